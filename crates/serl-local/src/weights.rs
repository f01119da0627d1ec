//! A model's weights in f32, for training adapters on it (`serl-tune`):
//! every tensor of the file dequantized, with the shape the engine reads.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{Device, Tensor};

use crate::engine::{Config, OWN_ARCHITECTURES};
use crate::error::LocalError;
use crate::file::ModelFile;

/// The shape and the f32 tensors of a model file, by their GGUF names
/// (`token_embd.weight`, `blk.{i}.attn_q.weight`, …).
pub struct FloatWeights {
    /// The network's shape.
    pub shape: Config,
    /// Every tensor, dequantized.
    pub tensors: HashMap<String, Tensor>,
}

impl FloatWeights {
    /// Reads `path` (a `llama` or `gemma3` file: the architectures whose
    /// forward pass is serl's own, so that training and inference compute
    /// the same network).
    pub fn read(path: &Path) -> Result<FloatWeights, LocalError> {
        let mut file = ModelFile::open(path)?;
        let arch = file.string("general.architecture")?;
        if !OWN_ARCHITECTURES.contains(&arch.as_str()) {
            return Err(file.unsupported(format!(
                "adapters are trained and run on {} files, not `{arch}`",
                OWN_ARCHITECTURES.join(" and ")
            )));
        }
        let shape = Config::read(&file.content, &arch).map_err(|m| file.unsupported(m))?;
        let names: Vec<String> = file.content.tensor_infos.keys().cloned().collect();
        let mut tensors = HashMap::with_capacity(names.len());
        for name in names {
            let fail = |e: candle_core::Error| file_error(path, &name, e);
            let t = file
                .content
                .tensor(&mut file.reader, &name, &Device::Cpu)
                .map_err(fail)?
                .dequantize(&Device::Cpu)
                .map_err(fail)?;
            tensors.insert(name, t);
        }
        Ok(FloatWeights { shape, tensors })
    }

    /// The tensor `name`, or an error naming it.
    pub fn get(&self, name: &str) -> Result<&Tensor, LocalError> {
        self.tensors
            .get(name)
            .ok_or_else(|| LocalError::Unsupported {
                path: String::new(),
                message: format!("no `{name}` tensor"),
            })
    }
}

fn file_error(path: &Path, name: &str, e: candle_core::Error) -> LocalError {
    LocalError::Unsupported {
        path: path.display().to_string(),
        message: format!("`{name}`: {e}"),
    }
}
