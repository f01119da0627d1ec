//! A tiny GGUF chat model with random weights, written from scratch: a
//! llama-architecture network of a few thousand parameters, a byte-level
//! BPE vocabulary (the 256 bytes plus merges learned from a corpus) and a
//! ChatML template. Tests and the README's offline recipe use it to
//! exercise loading, templating, sampling and constrained decoding with no
//! download. Its replies are noise; with a grammar they are well-formed
//! noise.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

use crate::error::LocalError;
use crate::vocab::byte_level_chars;

/// ChatML, as SmolLM2 and Qwen write it.
const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// The shape of a test model.
#[derive(Debug, Clone)]
pub struct TestModelSpec {
    /// Text the BPE merges are learned from (the prompts it will read, so
    /// that they fit in its context).
    pub corpus: String,
    /// How many merges to learn.
    pub merges: usize,
    /// Width of the network.
    pub embedding: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Context length, tokens.
    pub context: usize,
    /// Seed of the weights.
    pub seed: u64,
    /// The architecture written into the file (`llama`; another name
    /// makes a file the loader must refuse).
    pub architecture: String,
}

impl Default for TestModelSpec {
    fn default() -> Self {
        TestModelSpec {
            corpus: String::new(),
            merges: 0,
            embedding: 32,
            layers: 2,
            context: 4096,
            seed: 0,
            architecture: "llama".into(),
        }
    }
}

/// Writes a test model to `path`.
pub fn write_test_model(path: &Path, spec: &TestModelSpec) -> Result<(), LocalError> {
    let fail = |message: String| LocalError::Write {
        path: path.display().to_string(),
        message,
    };
    let (tokens, merges) = vocabulary(&spec.corpus, spec.merges);
    let specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"];
    let n_normal = tokens.len();
    let mut all: Vec<String> = tokens;
    all.extend(specials.iter().map(|s| s.to_string()));
    let types: Vec<Value> = (0..all.len())
        .map(|i| Value::I32(if i < n_normal { 1 } else { 3 }))
        .collect();
    let strings = |v: &[String]| Value::Array(v.iter().map(|s| Value::String(s.clone())).collect());
    // Grouped keys and values, as in SmolLM2 and Llama 3.
    let (dim, heads, kv_heads) = (spec.embedding, 4usize, 2usize);
    let u32v = |x: usize| Value::U32(x as u32);
    let metadata: Vec<(&str, Value)> = vec![
        (
            "general.architecture",
            Value::String(spec.architecture.clone()),
        ),
        ("general.name", Value::String("serl test model".into())),
        ("llama.context_length", u32v(spec.context)),
        ("llama.embedding_length", u32v(dim)),
        ("llama.block_count", u32v(spec.layers)),
        ("llama.feed_forward_length", u32v(2 * dim)),
        ("llama.attention.head_count", u32v(heads)),
        ("llama.attention.head_count_kv", u32v(kv_heads)),
        ("llama.rope.dimension_count", u32v(dim / heads)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.tokens", strings(&all)),
        ("tokenizer.ggml.token_type", Value::Array(types)),
        ("tokenizer.ggml.merges", strings(&merges)),
        ("tokenizer.ggml.bos_token_id", u32v(n_normal)),
        ("tokenizer.ggml.eos_token_id", u32v(n_normal + 2)),
        ("tokenizer.chat_template", Value::String(CHATML.into())),
    ];
    let kv_dim = dim / heads * kv_heads;
    let tensors = weights(all.len(), dim, kv_dim, spec.layers, spec.seed)?;
    let meta: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let named: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut w = BufWriter::new(File::create(path).map_err(|e| fail(e.to_string()))?);
    gguf_file::write(&mut w, &meta, &named).map_err(|e| fail(e.to_string()))?;
    w.flush().map_err(|e| fail(e.to_string()))
}

/// The network's tensors, named as GGUF's llama layout names them.
fn weights(
    vocab: usize,
    dim: usize,
    kv_dim: usize,
    layers: usize,
    seed: u64,
) -> Result<Vec<(String, QTensor)>, LocalError> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let normal = Normal::new(0.0f32, 0.05).map_err(|e| LocalError::Run(e.to_string()))?;
    // Every layout the forward pass reads natively, and one it rounds.
    let mut random = |rows: usize, cols: usize, dtype: GgmlDType| -> Result<QTensor, LocalError> {
        let data: Vec<f32> = (0..rows * cols).map(|_| normal.sample(&mut rng)).collect();
        let t = Tensor::from_vec(data, (rows, cols), &Device::Cpu)?;
        Ok(QTensor::quantize(&t, dtype)?)
    };
    let ones = |n: usize| -> Result<QTensor, LocalError> {
        Ok(QTensor::quantize(
            &Tensor::ones(n, candle_core::DType::F32, &Device::Cpu)?,
            GgmlDType::F32,
        )?)
    };
    let mut out = vec![
        (
            "token_embd.weight".to_string(),
            random(vocab, dim, GgmlDType::Q4_0)?,
        ),
        ("output_norm.weight".to_string(), ones(dim)?),
        (
            "output.weight".to_string(),
            random(vocab, dim, GgmlDType::F32)?,
        ),
    ];
    for i in 0..layers {
        let p = format!("blk.{i}");
        for (name, rows, cols, dtype) in [
            ("attn_q", dim, dim, GgmlDType::Q8_0),
            ("attn_k", kv_dim, dim, GgmlDType::Q8_0),
            ("attn_v", kv_dim, dim, GgmlDType::Q4_1),
            ("attn_output", dim, dim, GgmlDType::Q8_0),
            ("ffn_gate", 2 * dim, dim, GgmlDType::Q4_1),
            ("ffn_up", 2 * dim, dim, GgmlDType::Q4_1),
            ("ffn_down", dim, 2 * dim, GgmlDType::Q4_1),
        ] {
            out.push((format!("{p}.{name}.weight"), random(rows, cols, dtype)?));
        }
        out.push((format!("{p}.attn_norm.weight"), ones(dim)?));
        out.push((format!("{p}.ffn_norm.weight"), ones(dim)?));
    }
    Ok(out)
}

/// The 256 byte tokens and `n` merges learned from `corpus` (most frequent
/// adjacent pair first, within words), as byte-level BPE writes them.
fn vocabulary(corpus: &str, n: usize) -> (Vec<String>, Vec<String>) {
    let chars: HashMap<u8, char> = byte_level_chars()
        .into_iter()
        .map(|(c, b)| (b, c))
        .collect();
    let mut tokens: Vec<String> = (0..=255u8).map(|b| chars[&b].to_string()).collect();
    let mut words: Vec<Vec<String>> = split_words(corpus)
        .iter()
        .map(|w| w.bytes().map(|b| chars[&b].to_string()).collect())
        .collect();
    let mut merges = Vec::new();
    for _ in 0..n {
        let mut counts: HashMap<(String, String), usize> = HashMap::new();
        for w in &words {
            for pair in w.windows(2) {
                *counts
                    .entry((pair[0].clone(), pair[1].clone()))
                    .or_default() += 1;
            }
        }
        // The most frequent pair; ties broken by the pair itself, so the
        // vocabulary does not depend on the map's iteration order.
        let Some(((a, b), _)) = counts
            .into_iter()
            .filter(|(_, c)| *c >= 2)
            .max_by(|x, y| x.1.cmp(&y.1).then_with(|| y.0.cmp(&x.0)))
        else {
            break;
        };
        let joined = format!("{a}{b}");
        for w in words.iter_mut() {
            let mut i = 0;
            while i + 1 < w.len() {
                if w[i] == a && w[i + 1] == b {
                    w[i] = joined.clone();
                    w.remove(i + 1);
                }
                i += 1;
            }
        }
        merges.push(format!("{a} {b}"));
        // Two merge paths can build one string ("ab"+"c", "a"+"bc"); it
        // is one token.
        if !tokens.contains(&joined) {
            tokens.push(joined);
        }
    }
    (tokens, merges)
}

/// Words as GPT-2's pre-tokenizer cuts them, roughly: a run of letters,
/// digits or other symbols, with the space before it.
fn split_words(text: &str) -> Vec<String> {
    let class = |c: char| {
        if c.is_alphabetic() {
            0
        } else if c.is_numeric() {
            1
        } else if c.is_whitespace() {
            2
        } else {
            3
        }
    };
    let mut words: Vec<String> = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        let starts = match current.chars().last() {
            None => false,
            Some(p) if p == ' ' && current.len() == 1 => class(c) == 2,
            Some(p) => class(p) != class(c),
        };
        if starts {
            words.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    words.push(current);
    words
}
