//! Opening a GGUF file: the header is read and checked before any weight
//! is, so that a missing, truncated or foreign file fails with its name
//! and the reason, not a tensor error halfway through loading.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{Content, Value};

use crate::error::LocalError;

/// The architectures the backend runs, as GGUF's `general.architecture`
/// names them: `llama` (SmolLM2, Llama 2, 3, 3.1 and 3.2, TinyLlama,
/// Mistral 7B) and `gemma3` by serl's own forward pass; `qwen2` (Qwen2,
/// Qwen2.5), `qwen3` and `phi3` (Phi-3 mini 4k) by candle-transformers'
/// quantized models.
pub const ARCHITECTURES: &[&str] = &["llama", "gemma3", "qwen2", "qwen3", "phi3"];

/// The tokenizers the backend reads (`tokenizer.ggml.model`): byte-level
/// BPE (`gpt2`) and SentencePiece (`llama`).
pub const TOKENIZERS: &[&str] = &["gpt2", "llama"];

/// A GGUF file whose header has been read and checked.
pub struct ModelFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its header: metadata and tensor table.
    pub content: Content,
    /// An open reader for the tensors.
    pub reader: BufReader<File>,
}

impl ModelFile {
    /// Opens `path` and checks its header: GGUF magic, tensor data within
    /// the file, a supported architecture and a byte-level BPE tokenizer.
    pub fn open(path: &Path) -> Result<ModelFile, LocalError> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| LocalError::Unreadable {
            path: name.clone(),
            message: e.to_string(),
        })?;
        let actual = file.metadata().map_err(|e| LocalError::Unreadable {
            path: name.clone(),
            message: e.to_string(),
        })?;
        let actual = actual.len();
        let mut reader = BufReader::new(file);
        // candle's reader panics on some malformed headers (an alignment
        // of 0 divides by zero): a panic is a file that is not GGUF.
        let read =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Content::read(&mut reader)));
        let not_gguf = |message: String| LocalError::NotGguf {
            path: name.clone(),
            message,
        };
        let content = match read {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(not_gguf(first_line(&e.to_string()))),
            Err(_) => return Err(not_gguf("the header does not parse".into())),
        };
        let needed =
            tensor_data_end(&content).ok_or_else(|| not_gguf("tensor sizes overflow".into()))?;
        if needed > actual {
            return Err(LocalError::Truncated {
                path: name,
                needed,
                actual,
            });
        }
        let file = ModelFile {
            path: path.to_path_buf(),
            content,
            reader,
        };
        file.check_supported()?;
        Ok(file)
    }

    fn check_supported(&self) -> Result<(), LocalError> {
        let arch = self.string("general.architecture")?;
        if !ARCHITECTURES.contains(&arch.as_str()) {
            return Err(self.unsupported(format!(
                "architecture `{arch}`; the local backend runs {} models",
                ARCHITECTURES.join(", ")
            )));
        }
        let tokenizer = self.string("tokenizer.ggml.model")?;
        if !TOKENIZERS.contains(&tokenizer.as_str()) {
            return Err(self.unsupported(format!(
                "tokenizer `{tokenizer}`; the local backend reads byte-level BPE (`gpt2`) and SentencePiece (`llama`) tokenizers"
            )));
        }
        // candle's Phi-3 has neither LongRoPE (Phi-3 128k, Phi-3.5) nor
        // another rotary base.
        let long_rope = ["rope_factors_long.weight", "rope_factors_short.weight"];
        if arch == "phi3"
            && long_rope
                .iter()
                .any(|t| self.content.tensor_infos.contains_key(*t))
        {
            return Err(self.unsupported(
                "Phi-3 with LongRoPE factors (128k context, Phi-3.5); the local backend runs Phi-3 mini 4k".into(),
            ));
        }
        Ok(())
    }

    /// The metadata value `key`, or an error naming it.
    pub fn value(&self, key: &str) -> Result<&Value, LocalError> {
        self.content
            .metadata
            .get(key)
            .ok_or_else(|| self.unsupported(format!("the metadata key `{key}` is missing")))
    }

    /// The string metadata value `key`.
    pub fn string(&self, key: &str) -> Result<String, LocalError> {
        self.value(key)?
            .to_string()
            .cloned()
            .map_err(|_| self.unsupported(format!("the metadata key `{key}` is not a string")))
    }

    /// The integer metadata value `key`, if present and an integer.
    pub fn integer(&self, key: &str) -> Option<u64> {
        integer(self.content.metadata.get(key)?)
    }

    /// An [`LocalError::Unsupported`] about this file.
    pub fn unsupported(&self, message: String) -> LocalError {
        LocalError::Unsupported {
            path: self.path.display().to_string(),
            message,
        }
    }
}

/// An integer metadata value, whatever width and sign the file stores it
/// with (negative values read as 0); `None` for anything else.
pub(crate) fn integer(v: &Value) -> Option<u64> {
    match v {
        Value::U8(x) => Some(u64::from(*x)),
        Value::U16(x) => Some(u64::from(*x)),
        Value::U32(x) => Some(u64::from(*x)),
        Value::U64(x) => Some(*x),
        Value::Bool(x) => Some(u64::from(*x)),
        Value::I8(x) => Some((*x).max(0) as u64),
        Value::I16(x) => Some((*x).max(0) as u64),
        Value::I32(x) => Some((*x).max(0) as u64),
        Value::I64(x) => Some((*x).max(0) as u64),
        _ => None,
    }
}

/// Where the last tensor's data ends, from the header; `None` when the
/// sizes overflow (a corrupt header).
fn tensor_data_end(content: &Content) -> Option<u64> {
    let mut end = 0u64;
    for t in content.tensor_infos.values() {
        let elems = t
            .shape
            .dims()
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d as u64))?;
        let block = (t.ggml_dtype.block_size() as u64).max(1);
        let bytes = (elems / block).checked_mul(t.ggml_dtype.type_size() as u64)?;
        end = end.max(t.offset.checked_add(bytes)?);
    }
    end.checked_add(content.tensor_data_offset)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}
