//! The one interface every language-model backend implements.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Message {
            role: "user".into(),
            content: content.into(),
        }
    }
}

/// One chat completion request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub temperature: f64,
    pub seed: Option<u64>,
    pub max_tokens: u32,
    /// Ask for a JSON object where the server supports it.
    pub json: bool,
    /// A GBNF grammar for servers that constrain decoding with one
    /// (llama.cpp); others ignore it.
    pub grammar: Option<String>,
}

impl ChatRequest {
    pub fn new(prompt: impl Into<String>) -> Self {
        ChatRequest {
            messages: vec![Message::user(prompt)],
            temperature: 0.7,
            seed: None,
            max_tokens: 1024,
            json: false,
            grammar: None,
        }
    }

    /// A stable key for caching and replay: the hash of the request.
    pub fn key(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        // FNV-1a, 64 bits: stable across runs and platforms.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.as_bytes() {
            h ^= *b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub content: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("{url}: cannot connect ({message}); is the server running?")]
    Connect { url: String, message: String },
    #[error("{url}: no response within {secs} s")]
    Timeout { url: String, secs: f64 },
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: the reply is not a chat completion: {message}")]
    BadReply { url: String, message: String },
    #[error("{url}: gave up after {attempts} attempts; last error: {last}")]
    GaveUp {
        url: String,
        attempts: u32,
        last: String,
    },
    #[error("the API key variable {0} is not set")]
    MissingKey(String),
    #[error("replay: no recorded response for request {key} in {path}")]
    NotRecorded { key: String, path: String },
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("prompt template {file}, line {line}: {message}")]
    Template {
        file: String,
        line: usize,
        message: String,
    },
}

/// A chat model.
pub trait Backend: Send + Sync {
    /// For logs and reports.
    fn name(&self) -> String;
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError>;
}
