//! The embedded backend: a GGUF model run in-process by `serl-local`,
//! every reply constrained by the request's Lark grammar (the module's
//! grammar with programs spelled out) or, failing one, its JSON schema.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serl_local::{Adapter, ChatMessage, Constraint, LocalModel, LocalOptions, Request, Sampling};

use crate::backend::{Backend, ChatRequest, ChatResponse, LlmError};

/// `[llm.local]`: the model file and how it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LocalConfig {
    /// The GGUF instruct model.
    pub model: Option<PathBuf>,
    /// A LoRA adapter directory trained on that model (`serl llm
    /// finetune`), applied to every reply.
    pub adapter: Option<PathBuf>,
    /// Threads for the matrix products (0: one per core).
    pub threads: usize,
    /// Context length in tokens (0: the model's, at most 8192).
    pub context_length: usize,
    /// Conversations whose key-value caches are kept between requests
    /// (each up to `context_length × layers × 2 × kv_width` floats): the
    /// next candidate's module prompt is then read from the last one's.
    pub cache_slots: usize,
    /// Sampling temperature; unset, the designer's (`[llm] temperature`).
    pub temperature: Option<f64>,
    /// Nucleus sampling's probability mass.
    pub top_p: f64,
    /// Added to each request's seed, so that a run can be redrawn without
    /// changing the evolve seed.
    pub seed: u64,
    /// Tokens after which a constrained reply is steered to its nearest
    /// end (closing brackets first; see `serl_local::steer_rank`), so that
    /// a model that keeps opening brackets still ends well-formed.
    pub steer_after: usize,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            model: None,
            adapter: None,
            threads: 0,
            context_length: 0,
            cache_slots: serl_local::DEFAULT_CACHE_SLOTS,
            temperature: None,
            top_p: 0.95,
            seed: 0,
            steer_after: 256,
        }
    }
}

/// A chat model inside serl.
pub struct LocalBackend {
    model: Mutex<LocalModel>,
    config: LocalConfig,
    name: String,
    /// The adapter's directory name, for logs.
    adapter: Mutex<Option<String>>,
}

impl LocalBackend {
    /// Loads `config.model`.
    pub fn load(config: &LocalConfig) -> Result<LocalBackend, LlmError> {
        let path = config.model.as_ref().ok_or_else(|| {
            LlmError::Local(
                "no model file: set [llm.local] model = \"PATH.gguf\" in the config".into(),
            )
        })?;
        let model = LocalModel::load(
            path,
            LocalOptions {
                threads: config.threads,
                context_length: config.context_length,
                cache_slots: config.cache_slots,
            },
        )
        .map_err(|e| LlmError::Local(e.to_string()))?;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        let backend = LocalBackend {
            model: Mutex::new(model),
            config: config.clone(),
            name,
            adapter: Mutex::new(None),
        };
        if let Some(adapter) = &config.adapter {
            backend.set_adapter(Some(adapter))?;
        }
        Ok(backend)
    }
}

impl Backend for LocalBackend {
    fn name(&self) -> String {
        match self.adapter.lock().ok().and_then(|a| a.clone()) {
            Some(a) => format!("local {} + {a}", self.name),
            None => format!("local {}", self.name),
        }
    }

    fn set_adapter(&self, adapter: Option<&Path>) -> Result<(), LlmError> {
        let read = adapter
            .map(|dir| Adapter::load(dir).map_err(|e| LlmError::Local(e.to_string())))
            .transpose()?;
        let mut model = self
            .model
            .lock()
            .map_err(|_| LlmError::Local("the model panicked in an earlier request".into()))?;
        model
            .set_adapter(read)
            .map_err(|e| LlmError::Local(e.to_string()))?;
        if let Ok(mut a) = self.adapter.lock() {
            *a = adapter.map(|d| d.display().to_string());
        }
        Ok(())
    }

    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let constraint = match (&req.lark, &req.schema) {
            (Some(lark), _) => Some(Constraint::Lark(lark.clone())),
            (None, Some(schema)) => Some(Constraint::JsonSchema(schema.schema.clone())),
            (None, None) => None,
        };
        let messages: Vec<ChatMessage> = req
            .messages
            .iter()
            .map(|m| ChatMessage {
                role: m.role.clone(),
                content: m.content.clone(),
            })
            .collect();
        let request = Request {
            messages: &messages,
            max_tokens: req.max_tokens as usize,
            sampling: Sampling {
                temperature: self.config.temperature.unwrap_or(req.temperature),
                top_p: self.config.top_p,
                seed: req.seed.unwrap_or(0).wrapping_add(self.config.seed),
            },
            constraint: constraint.as_ref(),
            steer_after: self.config.steer_after,
        };
        let mut model = self
            .model
            .lock()
            .map_err(|_| LlmError::Local("the model panicked in an earlier request".into()))?;
        let g = model
            .chat(&request)
            .map_err(|e| LlmError::Local(format!("{}: {e}", model.path())))?;
        tracing::debug!(
            prompt_tokens = g.prompt_tokens,
            cached_tokens = g.cached_tokens,
            completion_tokens = g.completion_tokens,
            prompt_secs = g.prompt_secs,
            generate_secs = g.generate_secs,
            finished = g.finished,
            "local reply"
        );
        Ok(ChatResponse {
            content: g.text,
            prompt_tokens: g.prompt_tokens as u64,
            completion_tokens: g.completion_tokens as u64,
        })
    }
}
