//! Record and replay. Every request and response goes to a JSONL
//! transcript in the run directory; the same file answers a replay (a past
//! run reproduced exactly) and works as a cache keyed by the hash of the
//! prompt and parameters, so that nothing is paid for twice.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, ChatRequest, ChatResponse, LlmError};

/// One line of a transcript.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Exchange {
    pub key: String,
    pub backend: String,
    pub request: ChatRequest,
    pub response: ChatResponse,
}

fn file_err(path: &Path, e: impl std::fmt::Display) -> LlmError {
    LlmError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Reads a transcript; a last line cut short by a kill is skipped.
pub fn read_transcript(path: &Path) -> Result<Vec<Exchange>, LlmError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(file_err(path, e)),
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        match serde_json::from_str(l) {
            Ok(x) => out.push(x),
            Err(_) if i + 1 == lines.len() => {}
            Err(e) => return Err(file_err(path, format!("line {}: {e}", i + 1))),
        }
    }
    Ok(out)
}

/// Wraps a backend: answers repeated requests from the transcript and
/// appends new exchanges to it.
pub struct Recorder<B> {
    inner: B,
    path: PathBuf,
    cache: Mutex<HashMap<String, ChatResponse>>,
}

impl<B: Backend> Recorder<B> {
    /// Wraps `inner`, loading the transcript at `path` (if any) as the
    /// cache; new exchanges are appended to it.
    pub fn new(inner: B, path: &Path) -> Result<Self, LlmError> {
        let cache = read_transcript(path)?
            .into_iter()
            .map(|x| (x.key, x.response))
            .collect();
        Ok(Recorder {
            inner,
            path: path.to_path_buf(),
            cache: Mutex::new(cache),
        })
    }
}

impl<B: Backend> Backend for Recorder<B> {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn set_adapter(&self, adapter: Option<&Path>) -> Result<(), LlmError> {
        self.inner.set_adapter(adapter)
    }

    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let key = req.key();
        if let Some(r) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(r);
        }
        let response = self.inner.chat(req)?;
        let x = Exchange {
            key: key.clone(),
            backend: self.inner.name(),
            request: req.clone(),
            response: response.clone(),
        };
        let line = serde_json::to_string(&x).map_err(|e| file_err(&self.path, e))?;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| file_err(&self.path, e))?;
        writeln!(f, "{line}").map_err(|e| file_err(&self.path, e))?;
        if let Ok(mut c) = self.cache.lock() {
            c.insert(key, response.clone());
        }
        Ok(response)
    }
}

/// Answers only from a transcript: reproduces a recorded run exactly.
pub struct Replay {
    path: PathBuf,
    answers: HashMap<String, ChatResponse>,
    backend: String,
}

impl Replay {
    /// Loads the transcript at `path`; it must exist.
    pub fn open(path: &Path) -> Result<Self, LlmError> {
        if !path.exists() {
            return Err(file_err(path, "no transcript to replay"));
        }
        let xs = read_transcript(path)?;
        let backend = xs.first().map_or("nothing".into(), |x| x.backend.clone());
        Ok(Replay {
            path: path.to_path_buf(),
            answers: xs.into_iter().map(|x| (x.key, x.response)).collect(),
            backend,
        })
    }
}

impl Backend for Replay {
    fn name(&self) -> String {
        format!("replay of {} ({})", self.path.display(), self.backend)
    }

    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let key = req.key();
        self.answers
            .get(&key)
            .cloned()
            .ok_or_else(|| LlmError::NotRecorded {
                key,
                path: self.path.display().to_string(),
            })
    }
}
