//! The one interface every language-model backend implements.

use serde::{Deserialize, Serialize};

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks: `system`, `user` or `assistant`.
    pub role: String,
    /// What is said.
    pub content: String,
}

impl Message {
    /// A message from the user.
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
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Sampling temperature.
    pub temperature: f64,
    /// Sampling seed, for servers that honour one.
    pub seed: Option<u64>,
    /// Longest reply, in tokens.
    pub max_tokens: u32,
    /// Ask for a JSON object where the server supports it.
    pub json: bool,
    /// A GBNF grammar for servers that constrain decoding with one
    /// (llama.cpp); others ignore it.
    pub grammar: Option<String>,
    /// A JSON schema the reply must follow, sent as OpenAI's
    /// `response_format` (`json_schema`) or Ollama's `format`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Schema>,
    /// A Lark grammar for backends that mask tokens with llguidance (the
    /// local backend); it follows from the schema or the GBNF, so it is
    /// not part of the request's key or its transcript.
    #[serde(default, skip_serializing)]
    pub lark: Option<String>,
}

/// A named JSON schema for a reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schema {
    /// Its name (the module's), as `response_format` asks for one.
    pub name: String,
    /// The schema itself.
    pub schema: serde_json::Value,
}

impl ChatRequest {
    /// A one-message request: `prompt` from the user, temperature 0.7, no
    /// seed, at most 1024 tokens, free text.
    pub fn new(prompt: impl Into<String>) -> Self {
        ChatRequest {
            messages: vec![Message::user(prompt)],
            temperature: 0.7,
            seed: None,
            max_tokens: 1024,
            json: false,
            grammar: None,
            schema: None,
            lark: None,
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

/// A chat model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The reply's text.
    pub content: String,
    /// Tokens the prompt took, as the server reports (0 when it does not).
    pub prompt_tokens: u64,
    /// Tokens the reply took, as the server reports (0 when it does not).
    pub completion_tokens: u64,
}

/// What can go wrong asking a model, reading prompts or replaying a
/// transcript.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The request could not be sent: the server cannot be reached (after
    /// the retries) or the HTTP client failed.
    #[error("{url}: cannot connect ({message}); is the server running?")]
    Connect {
        /// The endpoint asked.
        url: String,
        /// The client's error.
        message: String,
    },
    /// The last attempt, after the retries, got no response in time.
    #[error("{url}: no response within {secs} s")]
    Timeout {
        /// The endpoint asked.
        url: String,
        /// The per-request timeout, seconds.
        secs: f64,
    },
    /// The server answered with an error status that retrying does not
    /// fix (not 429 or 5xx).
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        /// The endpoint asked.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the response body (at most 500 characters).
        body: String,
    },
    /// The server answered, but not with a chat completion.
    #[error("{url}: the reply is not a chat completion: {message}")]
    BadReply {
        /// The endpoint asked.
        url: String,
        /// What is wrong with the reply.
        message: String,
    },
    /// The retries ran out on a rate-limited (429) or failing (5xx)
    /// request.
    #[error("{url}: gave up after {attempts} attempts; last error: {last}")]
    GaveUp {
        /// The endpoint asked.
        url: String,
        /// Attempts made (the first try and its retries).
        attempts: u32,
        /// The last attempt's error.
        last: String,
    },
    /// A remote (https) endpoint needs an API key and this environment
    /// variable, which should hold it, is unset or empty.
    #[error("the API key variable {0} is not set")]
    MissingKey(String),
    /// A replay met a request its transcript has no answer for.
    #[error("replay: no recorded response for request {key} in {path}")]
    NotRecorded {
        /// The request's key ([`ChatRequest::key`]).
        key: String,
        /// The transcript.
        path: String,
    },
    /// A file (transcript, prompt directory or template) cannot be read
    /// or written.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The embedded model failed to load or to answer.
    #[error("local model: {0}")]
    Local(String),
    /// A prompt template is missing, does not parse or does not render.
    #[error("prompt template {file}, line {line}: {message}")]
    Template {
        /// The template file.
        file: String,
        /// The line (0 when unknown).
        line: usize,
        /// What went wrong.
        message: String,
    },
}

/// A chat model.
pub trait Backend: Send + Sync {
    /// For logs and reports.
    fn name(&self) -> String;
    /// Sends one request and waits for the answer.
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError>;
    /// Answers with a LoRA adapter's updates from now on (`None`: the
    /// base model): only the embedded model runs one.
    fn set_adapter(&self, adapter: Option<&std::path::Path>) -> Result<(), LlmError> {
        match adapter {
            None => Ok(()),
            Some(dir) => Err(LlmError::Local(format!(
                "{}: only the embedded model (`--llm local`) runs an adapter ({})",
                self.name(),
                dir.display()
            ))),
        }
    }
}
