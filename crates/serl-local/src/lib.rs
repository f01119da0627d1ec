//! # serl-local: a language model inside serl
//!
//! The designer's embedded backend (`serl evolve --llm local`): a GGUF
//! instruct model run in-process, so that an air-gapped machine (or CI)
//! can have a real model design. No serl crate is below it; `serl-llm`
//! wraps it as a `Backend`.
//!
//! - **Weights:** candle parses the GGUF file ([`ARCHITECTURES`] run). The
//!   `llama` and `gemma3` forward pass is serl's own (`engine`), in
//!   llama.cpp's manner: Q4_0, Q4_1 and Q8_0 weights stay in their blocks
//!   and are multiplied by 8-bit activations with integer dot products
//!   (AVX2 where the CPU has it); other layouts (K-quants, F16, F32) are
//!   rounded to 8 bits on loading. candle's own quantized llama ran
//!   SmolLM2 3× slower than llama.cpp (no SIMD for Q4_1, a key-value cache
//!   grown by concatenation), and its quantized Gemma 3 computes another
//!   network (SiLU, no sliding window when generating); they remain the
//!   references the tests check the forward pass against. `qwen2`,
//!   `qwen3` and `phi3` run through candle-transformers' quantized models.
//!   burn has no GGUF loader.
//! - **Key-value cache:** kept between requests; with serl's forward pass
//!   a request that starts like the last one (the system prompt, a module
//!   asked again) reads only the tokens that differ; candle's models read
//!   from their one cache only a prompt that continues it.
//! - **Vocabulary:** the tokenizer (byte-level BPE, or SentencePiece as
//!   llama.cpp encodes it), each token's bytes and the end-of-turn tokens
//!   come from the file's `tokenizer.ggml.*` metadata.
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

mod adapter;
mod engine;
mod error;
mod file;
mod grammar;
mod model;
mod sample;
mod spm;
mod template;
mod testmodel;
mod vocab;
mod weights;

pub use adapter::{model_hash, Adapter, AdapterConfig, BaseModel, LowRank, Target};
pub use engine::{Config as ModelShape, Flavor, RopeTable};
pub use error::LocalError;
pub use file::ARCHITECTURES;
pub use grammar::ByteGrammar;
pub use grammar::Constraint;
pub use model::{Generation, LocalModel, LocalOptions, Request, DEFAULT_CACHE_SLOTS};
pub use sample::{Sampler, Sampling};
pub use template::{ChatMessage, ChatTemplate, GEMMA_TEMPLATE};
pub use testmodel::{write_test_model, TestModelSpec};
pub use vocab::steer_rank;
pub use weights::FloatWeights;
