//! # serl-llm: the designer
//!
//! The "LLM as RL researcher" half of SE-RL, open to any model:
//!
//! - [`prompts`]: minijinja templates in a directory (`prompts/`), one per
//!   module plus the system prompt, the feedback block and the
//!   instruction-refinement prompt, with a documented context and a check.
//! - [`backend`]: the [`Backend`] trait every chat model implements, and
//!   [`http`]: OpenAI-compatible chat completions and Ollama's native API
//!   over reqwest, with timeouts, backoff and a concurrency limit.
//! - [`record`]: a transcript of every exchange, which doubles as a cache,
//!   and [`record::Replay`], which reproduces a recorded run exactly.
//! - [`builtin`]: the offline designer, a seeded search with no model.
//! - [`designer`]: the [`Designer`] interface both kinds implement, and
//!   [`generate`]: extract, validate, smoke-test and retry with the error.

pub mod backend;
pub mod builtin;
pub mod designer;
pub mod http;
pub mod prompts;
pub mod record;

pub use backend::{Backend, ChatRequest, ChatResponse, LlmError, Message};
pub use builtin::BuiltinDesigner;
pub use designer::{generate, Attempt, Designer, Generated, LlmDesigner, Reply};
pub use http::{Flavor, HttpBackend, HttpConfig};
pub use prompts::{ModuleContext, Prompts, TaskInfo};
