//! # serl-local: a language model inside serl
//!
//! The designer's embedded backend (`serl evolve --llm local`): a GGUF
//! instruct model run in-process, so that an air-gapped machine (or CI)
//! can have a real model design. No serl crate is below it; `serl-llm`
//! wraps it as a `Backend`.
//!
//! - **Weights:** candle's quantized llama ([`LocalModel::load`]); every
//!   GGUF quantisation candle reads (Q4_0 to Q8_0, K-quants, F16, F32).
//!   Candle is the established Rust path for GGUF; burn has no GGUF
//!   loader.
//! - **Vocabulary:** the tokenizer, each token's bytes and the end-of-turn
//!   tokens come from the file's `tokenizer.ggml.*` metadata.
//! - **Chat template:** the file's `tokenizer.chat_template`, rendered
//!   with minijinja.
//! - **Sampling:** seeded temperature and top-p ([`Sampling`]): the same
//!   seed gives the same reply.
//! - **Constrained decoding:** at each step llguidance computes the mask
//!   of tokens that keep the reply inside a Lark grammar or a JSON schema
//!   ([`Constraint`]); the sampler draws only from it.
//! - **Errors:** a missing, truncated or foreign file fails on opening,
//!   naming the file and what is wrong ([`LocalError`]).
//!
//! [`write_test_model`] writes a tiny random-weight model for tests.

#![deny(missing_docs)]

mod error;
mod file;
mod grammar;
mod model;
mod sample;
mod template;
mod testmodel;
mod vocab;

pub use error::LocalError;
pub use file::ARCHITECTURES;
pub use grammar::ByteGrammar;
pub use model::{Constraint, Generation, LocalModel, LocalOptions, Request};
pub use sample::{Sampler, Sampling};
pub use template::{ChatMessage, ChatTemplate};
pub use testmodel::{write_test_model, TestModelSpec};
pub use vocab::steer_rank;
