//! Architectures run by candle-transformers' quantized models: Qwen2 and
//! Qwen2.5 (`quantized_qwen2`), Qwen3 (`quantized_qwen3`) and Phi-3
//! (`quantized_phi3`). candle keeps one key-value cache inside the model
//! and can only append to it or start again, so a prompt is read from the
//! cache only when the cache holds a prefix of it (a conversation that
//! continues); any other prompt clears the cache and is read whole.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::models::{quantized_phi3, quantized_qwen2, quantized_qwen3};

use super::config::LoadError;

/// The architectures candle runs here, as GGUF names them.
pub const CANDLE_ARCHITECTURES: &[&str] = &["qwen2", "qwen3", "phi3"];

enum Model {
    Qwen2(quantized_qwen2::ModelWeights),
    Qwen3(quantized_qwen3::ModelWeights),
    Phi3(quantized_phi3::ModelWeights),
}

/// A candle model and the tokens its key-value cache holds.
pub struct CandleNet {
    model: Model,
    cached: Vec<u32>,
}

impl CandleNet {
    /// Reads the model at `path` (the header again: candle takes it by
    /// value) for the architecture `arch`.
    pub fn read(path: &Path, arch: &str) -> Result<CandleNet, LoadError> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        let mut reader = BufReader::new(file);
        let content = Content::read(&mut reader).map_err(|e| e.to_string())?;
        let dev = &Device::Cpu;
        // candle's loaders index tensors they expect without checking.
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match arch {
            "qwen2" => quantized_qwen2::ModelWeights::from_gguf(content, &mut reader, dev)
                .map(Model::Qwen2),
            "qwen3" => quantized_qwen3::ModelWeights::from_gguf(content, &mut reader, dev)
                .map(Model::Qwen3),
            "phi3" => quantized_phi3::ModelWeights::from_gguf(false, content, &mut reader, dev)
                .map(Model::Phi3),
            _ => Err(candle_core::Error::Msg(format!(
                "candle does not run `{arch}` here"
            ))),
        }));
        let model = match read {
            Ok(Ok(m)) => m,
            Ok(Err(e)) => return Err(format!("candle's `{arch}` model: {e}")),
            Err(_) => return Err(format!("candle's `{arch}` model failed to load the file")),
        };
        Ok(CandleNet {
            model,
            cached: Vec::new(),
        })
    }

    /// How many leading tokens of `tokens` the cache saves reading: all
    /// it holds when it holds a strict prefix of them, else none.
    pub fn reusable(&self, tokens: &[u32]) -> usize {
        if !self.cached.is_empty()
            && self.cached.len() < tokens.len()
            && tokens.starts_with(&self.cached)
        {
            self.cached.len()
        } else {
            0
        }
    }

    /// The next-token logits after `tokens`.
    pub fn logits(&mut self, tokens: &[u32]) -> candle_core::Result<Vec<f32>> {
        let kept = self.reusable(tokens);
        if kept == 0 {
            self.clear();
        }
        self.forward(&tokens[kept..])
    }

    /// The next-token logits after appending `token` to the cached ones.
    pub fn next(&mut self, token: u32) -> candle_core::Result<Vec<f32>> {
        self.forward(&[token])
    }

    fn clear(&mut self) {
        self.cached.clear();
        match &mut self.model {
            Model::Qwen2(m) => m.clear_kv_cache(),
            Model::Qwen3(m) => m.clear_kv_cache(),
            // Reset by a forward pass at position 0.
            Model::Phi3(_) => {}
        }
    }

    fn forward(&mut self, tokens: &[u32]) -> candle_core::Result<Vec<f32>> {
        let pos = self.cached.len();
        let x = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
        // Whatever fails, the cache no longer matches `cached`.
        let before = std::mem::take(&mut self.cached);
        let logits = match &mut self.model {
            Model::Qwen2(m) => m.forward(&x, pos)?,
            Model::Qwen3(m) => m.forward(&x, pos)?,
            Model::Phi3(m) => m.forward(&x, pos)?,
        };
        self.cached = before;
        self.cached.extend_from_slice(tokens);
        logits.flatten_all()?.to_vec1::<f32>()
    }
}
