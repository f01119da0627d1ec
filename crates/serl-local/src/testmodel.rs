//! A tiny GGUF chat model with random weights, written from scratch: a
//! network of a few thousand parameters in any architecture the backend
//! runs (`llama`, `gemma3`, `qwen2`, `qwen3`, `phi3`, with each one's
//! metadata keys and tensor names), a byte-level BPE vocabulary (the 256
//! bytes plus merges learned from a corpus) and a ChatML template, or a
//! SentencePiece vocabulary (pieces and scores, byte tokens) and Gemma's
//! template. Tests and the README's offline recipe use it to exercise
//! loading, templating, sampling and constrained decoding with no
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

/// Gemma's turns.
const GEMMA: &str = "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}";

/// The shape of a test model.
#[derive(Debug, Clone)]
pub struct TestModelSpec {
    /// Text the BPE merges (or SentencePiece pieces) are learned from (the
    /// prompts it will read, so that they fit in its context).
    pub corpus: String,
    /// How many merges to learn.
    pub merges: usize,
    /// Width of the network (a multiple of 32).
    pub embedding: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Context length, tokens.
    pub context: usize,
    /// Seed of the weights.
    pub seed: u64,
    /// The architecture written into the file: `llama`, `gemma3`,
    /// `qwen2`, `qwen3` or `phi3` get their own keys and tensors; another
    /// name gets llama's under that name (a file the loader must refuse).
    pub architecture: String,
    /// A SentencePiece vocabulary (`tokenizer.ggml.model = "llama"`) and
    /// Gemma's chat template instead of byte-level BPE and ChatML.
    pub sentencepiece: bool,
    /// With SentencePiece: `tokenizer.ggml.add_space_prefix`.
    pub add_space_prefix: bool,
    /// `{arch}.rope.freq_base`, when set.
    pub rope_base: Option<f32>,
    /// Llama 3.1's rope factors (`rope_freqs.weight`, one per rotated
    /// pair), when not empty.
    pub rope_freqs: Vec<f32>,
    /// `{arch}.rope.scaling.type` and `.factor`, when set.
    pub rope_scaling: Option<(String, f32)>,
    /// Gemma 3: `gemma3.attention.sliding_window` (positions a local
    /// layer sees).
    pub sliding_window: usize,
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
            sentencepiece: false,
            add_space_prefix: false,
            rope_base: None,
            rope_freqs: Vec::new(),
            rope_scaling: None,
            sliding_window: 16,
        }
    }
}

impl TestModelSpec {
    /// The default model of `architecture`, with the tokenizer its real
    /// models have: SentencePiece for `gemma3` and `phi3` (the latter with
    /// Llama 2's space prefix), byte-level BPE for the others.
    pub fn for_architecture(architecture: &str) -> TestModelSpec {
        TestModelSpec {
            architecture: architecture.into(),
            sentencepiece: matches!(architecture, "gemma3" | "phi3"),
            add_space_prefix: architecture == "phi3",
            ..TestModelSpec::default()
        }
    }
}

/// The network's dimensions.
struct Dims {
    vocab: usize,
    dim: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    ff: usize,
}

/// Writes a test model to `path`.
pub fn write_test_model(path: &Path, spec: &TestModelSpec) -> Result<(), LocalError> {
    let fail = |message: String| LocalError::Write {
        path: path.display().to_string(),
        message,
    };
    let vocab = if spec.sentencepiece {
        spm_vocabulary(&spec.corpus, spec.merges)
    } else {
        bpe_vocabulary(&spec.corpus, spec.merges)
    };
    let arch = spec.architecture.as_str();
    // Grouped keys and values, as in SmolLM2 and Llama 3; Gemma 3 and
    // Qwen3 heads wider than the embedding's share, as theirs are.
    let (dim, heads) = (spec.embedding, 4usize);
    let wide = matches!(arch, "gemma3" | "qwen3");
    let d = Dims {
        vocab: vocab.tokens.len(),
        dim,
        heads,
        kv_heads: 2,
        head_dim: if wide { 2 * dim / heads } else { dim / heads },
        ff: 2 * dim,
    };
    let mut metadata = vocab.metadata(spec);
    metadata.extend(arch_metadata(spec, &d));
    let tensors = weights(arch, &d, spec)?;
    let meta: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let named: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut w = BufWriter::new(File::create(path).map_err(|e| fail(e.to_string()))?);
    gguf_file::write(&mut w, &meta, &named).map_err(|e| fail(e.to_string()))?;
    w.flush().map_err(|e| fail(e.to_string()))
}

/// A vocabulary and what the file says of it.
struct TestVocab {
    tokens: Vec<String>,
    types: Vec<i32>,
    /// SentencePiece: a score per token; BPE: none.
    scores: Vec<f32>,
    merges: Vec<String>,
    bos: usize,
    eos: usize,
}

impl TestVocab {
    fn metadata(&self, spec: &TestModelSpec) -> Vec<(String, Value)> {
        let strings =
            |v: &[String]| Value::Array(v.iter().map(|s| Value::String(s.clone())).collect());
        let mut m = vec![
            (
                "general.architecture".into(),
                Value::String(spec.architecture.clone()),
            ),
            (
                "general.name".into(),
                Value::String("serl test model".into()),
            ),
            ("tokenizer.ggml.tokens".into(), strings(&self.tokens)),
            (
                "tokenizer.ggml.token_type".into(),
                Value::Array(self.types.iter().map(|&t| Value::I32(t)).collect()),
            ),
            (
                "tokenizer.ggml.bos_token_id".into(),
                Value::U32(self.bos as u32),
            ),
            (
                "tokenizer.ggml.eos_token_id".into(),
                Value::U32(self.eos as u32),
            ),
        ];
        if spec.sentencepiece {
            m.extend([
                ("tokenizer.ggml.model".into(), Value::String("llama".into())),
                (
                    "tokenizer.ggml.scores".into(),
                    Value::Array(self.scores.iter().map(|&s| Value::F32(s)).collect()),
                ),
                (
                    "tokenizer.ggml.add_space_prefix".into(),
                    Value::Bool(spec.add_space_prefix),
                ),
                (
                    "tokenizer.chat_template".into(),
                    Value::String(GEMMA.into()),
                ),
            ]);
        } else {
            m.extend([
                ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
                ("tokenizer.ggml.merges".into(), strings(&self.merges)),
                (
                    "tokenizer.chat_template".into(),
                    Value::String(CHATML.into()),
                ),
            ]);
        }
        m
    }
}

/// The `{arch}.*` keys.
fn arch_metadata(spec: &TestModelSpec, d: &Dims) -> Vec<(String, Value)> {
    let arch = spec.architecture.as_str();
    let u = |x: usize| Value::U32(x as u32);
    let mut m: Vec<(&str, Value)> = vec![
        ("context_length", u(spec.context)),
        ("embedding_length", u(d.dim)),
        ("block_count", u(spec.layers)),
        ("feed_forward_length", u(d.ff)),
        ("attention.head_count", u(d.heads)),
        ("attention.head_count_kv", u(d.kv_heads)),
        ("rope.dimension_count", u(d.head_dim)),
    ];
    let gemma = arch == "gemma3";
    let eps = if gemma { 1e-6 } else { 1e-5 };
    m.push(("attention.layer_norm_rms_epsilon", Value::F32(eps)));
    if matches!(arch, "gemma3" | "qwen3") {
        m.push(("attention.key_length", u(d.head_dim)));
        m.push(("attention.value_length", u(d.head_dim)));
    }
    if gemma {
        m.push(("attention.sliding_window", u(spec.sliding_window)));
    }
    let base = spec.rope_base.or(match arch {
        // candle's Qwen3 requires it.
        "qwen3" => Some(1e6),
        _ => None,
    });
    if let Some(b) = base {
        m.push(("rope.freq_base", Value::F32(b)));
    }
    if let Some((kind, factor)) = &spec.rope_scaling {
        m.push(("rope.scaling.type", Value::String(kind.clone())));
        m.push(("rope.scaling.factor", Value::F32(*factor)));
    }
    m.into_iter()
        .map(|(k, v)| (format!("{arch}.{k}"), v))
        .collect()
}

/// A layer's matrices for `arch`: name, rows, columns and the layout it is
/// stored in (in the order the first test models drew them).
fn layer_matrices(arch: &str, d: &Dims) -> Vec<(&'static str, usize, usize, GgmlDType)> {
    let (dim, q, kv, ff) = (d.dim, d.heads * d.head_dim, d.kv_heads * d.head_dim, d.ff);
    if arch == "phi3" {
        vec![
            ("attn_qkv", q + 2 * kv, dim, GgmlDType::Q8_0),
            ("attn_output", dim, q, GgmlDType::Q8_0),
            ("ffn_up", 2 * ff, dim, GgmlDType::Q4_1),
            ("ffn_down", dim, ff, GgmlDType::Q4_1),
        ]
    } else {
        vec![
            ("attn_q", q, dim, GgmlDType::Q8_0),
            ("attn_k", kv, dim, GgmlDType::Q8_0),
            ("attn_v", kv, dim, GgmlDType::Q4_1),
            ("attn_output", dim, q, GgmlDType::Q8_0),
            ("ffn_gate", ff, dim, GgmlDType::Q4_1),
            ("ffn_up", ff, dim, GgmlDType::Q4_1),
            ("ffn_down", dim, ff, GgmlDType::Q4_1),
        ]
    }
}

/// The network's tensors, named as GGUF names them for `arch`.
fn weights(
    arch: &str,
    d: &Dims,
    spec: &TestModelSpec,
) -> Result<Vec<(String, QTensor)>, LocalError> {
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let normal = Normal::new(0.0f32, 0.05).map_err(|e| LocalError::Run(e.to_string()))?;
    let mut draw = |n: usize| -> Vec<f32> { (0..n).map(|_| normal.sample(&mut rng)).collect() };
    let (dim, q, kv) = (d.dim, d.heads * d.head_dim, d.kv_heads * d.head_dim);
    let mut out = Vec::new();
    let mut put = |name: String, values: Vec<f32>, shape: &[usize], dtype: GgmlDType| {
        let t = Tensor::from_vec(values, shape, &Device::Cpu)?;
        out.push((name, QTensor::quantize(&t, dtype)?));
        Ok::<(), LocalError>(())
    };
    // Gemma's norms are drawn around 1, so that a norm read in the
    // wrong place shows; the others are ones, as before.
    let gemma = arch == "gemma3";
    let norm = |n: usize, draw: &mut dyn FnMut(usize) -> Vec<f32>| -> Vec<f32> {
        if gemma {
            draw(n).iter().map(|v| 1.0 + 4.0 * v).collect()
        } else {
            vec![1.0; n]
        }
    };
    // Every layout the forward pass reads natively, and one it rounds.
    put(
        "token_embd.weight".into(),
        draw(d.vocab * dim),
        &[d.vocab, dim],
        GgmlDType::Q4_0,
    )?;
    put(
        "output_norm.weight".into(),
        norm(dim, &mut draw),
        &[dim],
        GgmlDType::F32,
    )?;
    // Gemma ties the output to the embedding.
    if !gemma {
        put(
            "output.weight".into(),
            draw(d.vocab * dim),
            &[d.vocab, dim],
            GgmlDType::F32,
        )?;
    }
    for i in 0..spec.layers {
        let p = format!("blk.{i}");
        for (name, rows, cols, dtype) in layer_matrices(arch, d) {
            put(
                format!("{p}.{name}.weight"),
                draw(rows * cols),
                &[rows, cols],
                dtype,
            )?;
        }
        let mut norms = vec![("attn_norm", dim), ("ffn_norm", dim)];
        if matches!(arch, "gemma3" | "qwen3") {
            norms.extend([("attn_q_norm", d.head_dim), ("attn_k_norm", d.head_dim)]);
        }
        if gemma {
            norms.extend([("post_attention_norm", dim), ("post_ffw_norm", dim)]);
        }
        for (name, n) in norms {
            put(
                format!("{p}.{name}.weight"),
                norm(n, &mut draw),
                &[n],
                GgmlDType::F32,
            )?;
        }
        if arch == "qwen2" {
            for (name, n) in [("attn_q", q), ("attn_k", kv), ("attn_v", kv)] {
                put(format!("{p}.{name}.bias"), draw(n), &[n], GgmlDType::F32)?;
            }
        }
    }
    if !spec.rope_freqs.is_empty() {
        let n = spec.rope_freqs.len();
        put(
            "rope_freqs.weight".into(),
            spec.rope_freqs.clone(),
            &[n],
            GgmlDType::F32,
        )?;
    }
    Ok(out)
}

/// The byte-level BPE vocabulary: bytes, merges, then ChatML's specials.
fn bpe_vocabulary(corpus: &str, merges: usize) -> TestVocab {
    let (mut tokens, merges) = vocabulary(corpus, merges);
    let n_normal = tokens.len();
    tokens.extend(["<|endoftext|>", "<|im_start|>", "<|im_end|>"].map(String::from));
    let types = (0..tokens.len())
        .map(|i| if i < n_normal { 1 } else { 3 })
        .collect();
    TestVocab {
        tokens,
        types,
        scores: Vec::new(),
        merges,
        bos: n_normal,
        eos: n_normal + 2,
    }
}

/// A SentencePiece vocabulary as Gemma's is laid out: control tokens, the
/// 256 byte tokens, then pieces (`▁` for a space): the printable ASCII
/// characters and `n` merges learned from `corpus`, each scoring below
/// the one before (merged in the order learned).
fn spm_vocabulary(corpus: &str, n: usize) -> TestVocab {
    let controls = [
        "<pad>",
        "<eos>",
        "<bos>",
        "<unk>",
        "<start_of_turn>",
        "<end_of_turn>",
    ];
    let mut tokens: Vec<String> = controls.map(String::from).to_vec();
    let mut types = vec![3, 3, 3, 2, 3, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    let mut scores = vec![0.0f32; tokens.len()];
    let mut pieces: Vec<String> = (b'!'..=b'~').map(|b| (b as char).to_string()).collect();
    pieces.push("\u{2581}".into());
    let escaped = corpus.replace(' ', "\u{2581}");
    // Words start at each ▁, as SentencePiece cuts them.
    let mut words: Vec<Vec<String>> = vec![Vec::new()];
    for c in escaped.chars() {
        if c == '\u{2581}' && !words.last().is_some_and(Vec::is_empty) {
            words.push(Vec::new());
        }
        if let Some(w) = words.last_mut() {
            w.push(c.to_string());
        }
    }
    let base = pieces.len();
    let merges = learn_merges(&mut words, n);
    for m in &merges {
        let joined = m.replace(' ', "");
        if !pieces.contains(&joined) {
            pieces.push(joined);
        }
    }
    // Characters score below every merge, so that merges win.
    for (i, p) in pieces.into_iter().enumerate() {
        scores.push(if i < base {
            -1000.0 - i as f32
        } else {
            -(i as f32)
        });
        tokens.push(p);
        types.push(1);
    }
    TestVocab {
        tokens,
        types,
        scores,
        merges: Vec::new(),
        bos: 2,
        eos: 1,
    }
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
    let merges = learn_merges(&mut words, n);
    for m in &merges {
        // Two merge paths can build one string ("ab"+"c", "a"+"bc"); it
        // is one token.
        let joined = m.replacen(' ', "", 1);
        if !tokens.contains(&joined) {
            tokens.push(joined);
        }
    }
    (tokens, merges)
}

/// Up to `n` merges (`"a b"`), most frequent adjacent pair first, applied
/// to `words` as they are learned.
fn learn_merges(words: &mut [Vec<String>], n: usize) -> Vec<String> {
    let mut merges = Vec::new();
    for _ in 0..n {
        let mut counts: HashMap<(String, String), usize> = HashMap::new();
        for w in words.iter() {
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
    }
    merges
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
