//! The forward passes behind one interface ([`Network`]: tokens in,
//! next-token logits out, a key-value cache kept between calls).
//!
//! - serl's own decoder (`decoder`), in the manner of llama.cpp: weights
//!   stay in their 4- or 8-bit blocks, activations are rounded to 8-bit
//!   blocks, and the products are integer dot products (AVX2 where the
//!   CPU has it). It runs `llama` and `gemma3` files. candle's quantized
//!   llama is about 3× slower here (it runs Q4_1 without SIMD, grows the
//!   key-value cache by concatenation and copies it to reuse a prompt),
//!   and candle's quantized Gemma 3 computes another network (SiLU for
//!   Gemma's GELU, no sliding window once the prompt is read); see
//!   `docs/llm.md`.
//! - candle-transformers' quantized models (`candle`) for `qwen2`,
//!   `qwen3` and `phi3`.

mod candle;
mod config;
mod decoder;
mod prompt;
mod quant;
pub(crate) mod simd;

use std::path::Path;
use std::sync::Mutex;

use candle_core::quantized::gguf_file::Content;

pub use self::candle::CANDLE_ARCHITECTURES;
pub use config::{Config, Flavor, RopeTable};
pub use decoder::{Decoder, State};

use crate::adapter::Adapter;
use std::sync::Arc;

/// The architectures serl's own decoder runs.
pub const OWN_ARCHITECTURES: &[&str] = &["llama", "gemma3"];

/// A network that turns tokens into next-token logits.
pub enum Network {
    /// serl's decoder; its caches are the conversations' [`State`]s.
    Own(Decoder),
    /// A candle model, with the one cache it keeps inside (the
    /// conversations' states stay empty).
    Candle(Mutex<candle::CandleNet>),
}

impl Network {
    /// Reads the network of the architecture `arch` from `path`, whose
    /// header is `content`, for contexts of up to `context` tokens.
    pub fn read(
        path: &Path,
        content: &Content,
        reader: &mut (impl std::io::Read + std::io::Seek),
        arch: &str,
        context: usize,
    ) -> Result<Network, String> {
        if CANDLE_ARCHITECTURES.contains(&arch) {
            let net = candle::CandleNet::read(path, arch)?;
            Ok(Network::Candle(Mutex::new(net)))
        } else if OWN_ARCHITECTURES.contains(&arch) {
            Decoder::read(content, reader, arch, context).map(Network::Own)
        } else {
            Err(format!("no forward pass for `{arch}`"))
        }
    }

    /// How many leading tokens of `prompt` [`Network::logits`] will not
    /// read again, given `state`.
    pub fn reusable(&self, state: &State, prompt: &[u32]) -> usize {
        match self {
            // The last token is read again: its logits are needed.
            Network::Own(_) => state.shared(prompt).min(prompt.len() - 1),
            Network::Candle(net) => net.lock().map_or(0, |n| n.reusable(prompt)),
        }
    }

    /// The next-token logits after `tokens`, reading only what the cache
    /// does not hold.
    pub fn logits(&self, state: &mut State, tokens: &[u32]) -> Result<Vec<f32>, String> {
        match self {
            Network::Own(d) => Ok(d.logits(state, tokens)),
            Network::Candle(net) => lock(net)?.logits(tokens).map_err(|e| e.to_string()),
        }
    }

    /// Adds `adapter`'s low-rank updates from now on (`None` removes them).
    pub fn set_adapter(&mut self, adapter: Option<Arc<Adapter>>) -> Result<(), String> {
        match self {
            Network::Own(d) => d.set_adapter(adapter),
            Network::Candle(_) if adapter.is_some() => Err(format!(
                "adapters run on serl's own forward pass ({}), not on candle's models",
                OWN_ARCHITECTURES.join(", ")
            )),
            Network::Candle(_) => Ok(()),
        }
    }

    /// The next-token logits after appending `token`.
    pub fn next(&self, state: &mut State, token: u32) -> Result<Vec<f32>, String> {
        match self {
            Network::Own(d) => Ok(d.next(state, token)),
            Network::Candle(net) => lock(net)?.next(token).map_err(|e| e.to_string()),
        }
    }
}

fn lock(
    net: &Mutex<candle::CandleNet>,
) -> Result<std::sync::MutexGuard<'_, candle::CandleNet>, String> {
    net.lock()
        .map_err(|_| "the model panicked in an earlier request".to_string())
}

#[cfg(test)]
mod tests;
