//! # serl-llm: the designer
//!
//! The "LLM as RL researcher" half of SE-RL, open to any model. How the
//! pieces connect:
//!
//! - A [`Designer`] proposes modules (`serl-design`) from a
//!   [`ModuleContext`]: [`LlmDesigner`] renders a prompt template and asks
//!   a chat model; [`BuiltinDesigner`] is the offline designer, a seeded
//!   search with no model; [`GrammarDesigner`] draws each module at
//!   random from its own grammar (`--llm grammar`), the no-knowledge
//!   floor.
//! - [`generate`] drives either kind: extract, validate, smoke-test and
//!   retry with the error until a module passes ([`Generated`]).
//! - [`prompts`]: minijinja templates in a directory (`prompts/`), one per
//!   module plus the system prompt, the feedback block and the
//!   instruction-refinement prompt, with a documented context and a check
//!   ([`Prompts::check`]). [`Template`] is the one list of them that
//!   listing, rendering, checking and probing read: one per
//!   `ModuleKind`, then the others.
//! - A [`Backend`] is a chat model: [`HttpBackend`] speaks
//!   OpenAI-compatible chat completions or Ollama's native API over
//!   reqwest, with timeouts, backoff and a concurrency limit
//!   ([`HttpConfig`]). [`LocalBackend`] (feature `local`, on by default)
//!   runs a GGUF model in-process with `serl-local`, every reply masked
//!   by its module's Lark grammar.
//! - [`Recorder`] wraps a backend and writes a transcript of every
//!   exchange, which doubles as a cache; [`Replay`] answers from a
//!   transcript alone, reproducing a recorded run exactly.

#![deny(missing_docs)]

mod backend;
mod builtin;
mod check;
mod designer;
mod grammar_designer;
mod http;
#[cfg(feature = "local")]
mod local;
pub mod prompts;
mod record;
mod samples;
mod templates;

pub use backend::{Backend, ChatRequest, ChatResponse, LlmError, Message, Schema};
pub use builtin::BuiltinDesigner;
pub use check::check_operators;
pub use designer::{generate, Attempt, Designer, Generated, LlmDesigner, Reply};
pub use grammar_designer::GrammarDesigner;
pub use http::{Flavor, HttpBackend, HttpConfig, SchemaFormat};
#[cfg(feature = "local")]
pub use local::{LocalBackend, LocalConfig};
pub use prompts::{ModuleContext, Prompts, TaskInfo};
pub use record::{Recorder, Replay};
pub use samples::{operator_context, sample_context};
#[cfg(feature = "local")]
pub use serl_local;
pub use templates::Template;
