//! serl's own llama forward pass, in the manner of llama.cpp: weights stay
//! in their 4- or 8-bit blocks, activations are rounded to 8-bit blocks,
//! and the products are integer dot products (AVX2 where the CPU has it).
//! candle still parses the file; its quantized llama is about 3× slower
//! than llama.cpp here (it runs Q4_1 without SIMD, grows the key-value
//! cache by concatenation and copies it to reuse a prompt), see
//! `docs/llm.md`.

mod llama;
mod quant;
mod simd;

pub use llama::{Llama, State};

#[cfg(test)]
mod tests;
