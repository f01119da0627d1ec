//! The llama network (GGUF's `llama` layout: RMS norm, rotary attention
//! with grouped keys and values, a gated SiLU feed-forward block), with a
//! key-value cache that keeps the longest shared prefix between requests.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::GgmlDType;
use candle_core::Device;
use rayon::prelude::*;

use super::quant::{matmul, LayoutError, QActs, QMatrix};

/// The network's shape, from the file's `llama.*` metadata.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    pub layers: usize,
    pub embedding: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub feed_forward: usize,
    pub rope_base: f32,
    pub rms_eps: f32,
    pub vocab: usize,
}

impl Config {
    fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }
}

struct Layer {
    attn_norm: Vec<f32>,
    /// Queries, keys and values stacked: one product per token.
    qkv: QMatrix,
    output: QMatrix,
    ffn_norm: Vec<f32>,
    /// Gate and up stacked.
    gate_up: QMatrix,
    down: QMatrix,
}

/// The weights.
pub struct Llama {
    config: Config,
    embedding: Arc<QMatrix>,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    output: Arc<QMatrix>,
    /// cos and sin of each position's angle for each rotated pair,
    /// `context × head_dim / 2`.
    rope: (Vec<f32>, Vec<f32>),
}

/// What a tensor or a metadata field lacks.
pub type LoadError = String;

impl Llama {
    /// Reads the weights named in `content` from `reader`, for contexts of
    /// up to `context` tokens.
    pub fn read<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        context: usize,
    ) -> Result<Llama, LoadError> {
        let config = config(content)?;
        let mut loader = Loader { content, reader };
        // Grown as layers are read: the count comes from the file.
        let mut layers = Vec::new();
        for i in 0..config.layers {
            let p = format!("blk.{i}");
            let (q, kv, ff) = (
                config.heads * config.head_dim,
                config.kv_dim(),
                config.feed_forward,
            );
            let qkv = loader.stacked(&[
                (&format!("{p}.attn_q.weight"), q),
                (&format!("{p}.attn_k.weight"), kv),
                (&format!("{p}.attn_v.weight"), kv),
            ])?;
            let gate_up = loader.stacked(&[
                (&format!("{p}.ffn_gate.weight"), ff),
                (&format!("{p}.ffn_up.weight"), ff),
            ])?;
            layers.push(Layer {
                attn_norm: loader.vector(&format!("{p}.attn_norm.weight"))?,
                qkv,
                output: loader.matrix(&format!("{p}.attn_output.weight"))?,
                ffn_norm: loader.vector(&format!("{p}.ffn_norm.weight"))?,
                gate_up,
                down: loader.matrix(&format!("{p}.ffn_down.weight"))?,
            });
        }
        let embedding = Arc::new(loader.matrix("token_embd.weight")?);
        let output = if content.tensor_infos.contains_key("output.weight") {
            Arc::new(loader.matrix("output.weight")?)
        } else {
            // Tied: the same matrix, not a copy.
            embedding.clone()
        };
        let mut llama = Llama {
            config,
            norm: loader.vector("output_norm.weight")?,
            rope: (Vec::new(), Vec::new()),
            layers,
            embedding,
            output,
        };
        // Shapes first: the table's size follows from them.
        llama.check_shapes()?;
        llama.rope = rope_table(config.head_dim, config.rope_base, context);
        Ok(llama)
    }

    fn check_shapes(&self) -> Result<(), LoadError> {
        let c = &self.config;
        let e = c.embedding;
        let expect = |name: &str, m: &QMatrix, rows: usize, cols: usize| {
            if (m.rows(), m.cols()) == (rows, cols) {
                Ok(())
            } else {
                Err(format!(
                    "`{name}` is {} × {}, the metadata asks for {rows} × {cols}",
                    m.rows(),
                    m.cols()
                ))
            }
        };
        if self.norm.len() != e {
            return Err(format!(
                "`output_norm.weight` has {} values for an embedding of {e}",
                self.norm.len()
            ));
        }
        expect("token_embd.weight", &self.embedding, c.vocab, e)?;
        expect("output.weight", &self.output, c.vocab, e)?;
        for l in &self.layers {
            expect(
                "attn_q/k/v",
                &l.qkv,
                c.heads * c.head_dim + 2 * c.kv_dim(),
                e,
            )?;
            expect("attn_output", &l.output, e, c.heads * c.head_dim)?;
            expect("ffn_gate/up", &l.gate_up, 2 * c.feed_forward, e)?;
            expect("ffn_down", &l.down, e, c.feed_forward)?;
            if l.attn_norm.len() != e || l.ffn_norm.len() != e {
                return Err("a norm's length is not the embedding's".into());
            }
        }
        Ok(())
    }

    #[cfg(test)]
    /// The shape.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Positions the rotary table covers.
    pub fn context(&self) -> usize {
        self.rope.0.len() / (self.config.head_dim / 2)
    }
}

fn config(content: &Content) -> Result<Config, LoadError> {
    let get = |key: &str| content.metadata.get(key);
    let int = |key: &str| -> Result<usize, LoadError> {
        get(key)
            .and_then(crate::file::integer)
            .filter(|&v| v > 0)
            .map(|v| v as usize)
            .ok_or_else(|| format!("no positive `{key}` in the metadata"))
    };
    let float = |key: &str, default: f32| -> f32 {
        match get(key) {
            Some(Value::F64(v)) => *v as f32,
            Some(v) => v.to_f32().unwrap_or(default),
            None => default,
        }
    };
    let embedding = int("llama.embedding_length")?;
    let heads = int("llama.attention.head_count")?;
    let kv_heads = get("llama.attention.head_count_kv")
        .and_then(crate::file::integer)
        .map(|v| v as usize)
        .unwrap_or(heads);
    if !embedding.is_multiple_of(heads) || kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return Err(format!(
            "{heads} heads and {kv_heads} key-value heads do not divide an embedding of {embedding}"
        ));
    }
    let head_dim = embedding / heads;
    if !head_dim.is_multiple_of(2) {
        return Err(format!("an odd head width ({head_dim}) cannot be rotated"));
    }
    // What the forward pass does not do: rotating part of a head, and
    // Llama 3.1's frequency factors or other rope scaling.
    if let Some(n) = get("llama.rope.dimension_count").and_then(crate::file::integer) {
        if n as usize != head_dim {
            return Err(format!(
                "rotary embedding over {n} of a head's {head_dim} values is not supported"
            ));
        }
    }
    if content.tensor_infos.contains_key("rope_freqs.weight")
        || get("llama.rope.scaling.type").is_some()
    {
        return Err(
            "rope scaling (`rope_freqs.weight`, `llama.rope.scaling.*`) is not supported".into(),
        );
    }
    let vocab = content
        .tensor_infos
        .get("token_embd.weight")
        .and_then(|t| t.shape.dims().first().copied())
        .ok_or("no `token_embd.weight` matrix")?;
    Ok(Config {
        layers: int("llama.block_count")?,
        embedding,
        heads,
        kv_heads,
        head_dim,
        feed_forward: int("llama.feed_forward_length")?,
        rope_base: float("llama.rope.freq_base", 10_000.0),
        rms_eps: float("llama.attention.layer_norm_rms_epsilon", 1e-5),
        vocab,
    })
}

fn rope_table(head_dim: usize, base: f32, context: usize) -> (Vec<f32>, Vec<f32>) {
    let pairs = head_dim / 2;
    let mut cos = Vec::with_capacity(context * pairs);
    let mut sin = Vec::with_capacity(context * pairs);
    for pos in 0..context {
        for i in 0..pairs {
            let freq = 1.0 / base.powf((2 * i) as f32 / head_dim as f32);
            let angle = pos as f32 * freq;
            cos.push(angle.cos());
            sin.push(angle.sin());
        }
    }
    (cos, sin)
}

struct Loader<'a, R> {
    content: &'a Content,
    reader: &'a mut R,
}

impl<R: Read + Seek> Loader<'_, R> {
    fn tensor(&mut self, name: &str) -> Result<candle_core::quantized::QTensor, LoadError> {
        if !self.content.tensor_infos.contains_key(name) {
            return Err(format!("no `{name}` tensor"));
        }
        self.content
            .tensor(self.reader, name, &Device::Cpu)
            .map_err(|e| format!("`{name}`: {e}"))
    }

    /// A norm's weights.
    fn vector(&mut self, name: &str) -> Result<Vec<f32>, LoadError> {
        let t = self.tensor(name)?;
        t.dequantize(&Device::Cpu)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| format!("`{name}`: {e}"))
    }

    /// A matrix, kept in its own 4- or 8-bit layout where the kernels have
    /// one (Q4_0, Q4_1, Q8_0) and rounded to 8 bits otherwise.
    fn matrix(&mut self, name: &str) -> Result<QMatrix, LoadError> {
        let t = self.tensor(name)?;
        let (rows, cols) = match t.shape().dims() {
            [rows, cols] => (*rows, *cols),
            dims => return Err(format!("`{name}` has shape {dims:?}, not a matrix")),
        };
        let fail = |e: LayoutError| format!("`{name}`: {}", e.0);
        let bytes = || t.data().map_err(|e| format!("`{name}`: {e}"));
        match t.dtype() {
            GgmlDType::Q8_0 => QMatrix::from_q8_0(&bytes()?, rows, cols).map_err(fail),
            GgmlDType::Q4_0 => QMatrix::from_q4_0(&bytes()?, rows, cols).map_err(fail),
            GgmlDType::Q4_1 => QMatrix::from_q4_1(&bytes()?, rows, cols).map_err(fail),
            _ => {
                let values = t
                    .dequantize(&Device::Cpu)
                    .and_then(|t| t.flatten_all())
                    .and_then(|t| t.to_vec1::<f32>())
                    .map_err(|e| format!("`{name}`: {e}"))?;
                QMatrix::from_f32(&values, rows, cols).map_err(fail)
            }
        }
    }

    /// Matrices with the same columns, one above the other, each of the
    /// rows given.
    fn stacked(&mut self, parts: &[(&str, usize)]) -> Result<QMatrix, LoadError> {
        let mut matrices = Vec::with_capacity(parts.len());
        for &(name, rows) in parts {
            let m = self.matrix(name)?;
            if m.rows() != rows {
                return Err(format!(
                    "`{name}` has {} rows, the metadata asks for {rows}",
                    m.rows()
                ));
            }
            matrices.push(m);
        }
        QMatrix::stack(&matrices).map_err(|e| format!("`{}`: {}", parts[0].0, e.0))
    }
}

/// The key-value cache and the scratch buffers of one conversation.
#[derive(Default)]
pub struct State {
    /// Tokens whose keys and values are cached, in order.
    tokens: Vec<u32>,
    /// Per layer: keys and values, `position × kv_dim`.
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
    acts: QActs,
}

impl State {
    #[cfg(test)]
    /// Tokens whose keys and values are cached.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// How many leading tokens of `tokens` are cached here.
    pub fn shared(&self, tokens: &[u32]) -> usize {
        self.tokens
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count()
    }

    /// A new state holding a copy of the first `n` cached tokens' keys
    /// and values (fresh scratch buffers).
    pub fn fork(&self, n: usize) -> State {
        let n = n.min(self.tokens.len());
        let per_token = |v: &Vec<f32>| v.len().checked_div(self.tokens.len()).unwrap_or(0);
        let head = |v: &Vec<f32>| v[..n * per_token(v)].to_vec();
        State {
            tokens: self.tokens[..n].to_vec(),
            keys: self.keys.iter().map(head).collect(),
            values: self.values.iter().map(head).collect(),
            acts: QActs::default(),
        }
    }
}

impl Llama {
    /// The next-token logits after `tokens`, given everything already in
    /// `state`: cached tokens that `tokens` does not start with are
    /// dropped, the shared prefix is kept (a request that repeats most of
    /// the last prompt reads only what differs).
    pub fn logits(&self, state: &mut State, tokens: &[u32]) -> Vec<f32> {
        assert!(!tokens.is_empty() && tokens.len() <= self.context());
        let shared = state
            .shared(tokens)
            // The last token is always read again: its logits are needed.
            .min(tokens.len() - 1);
        self.truncate(state, shared);
        let hidden = self.forward(state, &tokens[shared..]);
        self.project(state, &hidden)
    }

    /// The next-token logits after appending `token` to the cached ones.
    pub fn next(&self, state: &mut State, token: u32) -> Vec<f32> {
        let hidden = self.forward(state, &[token]);
        self.project(state, &hidden)
    }

    fn project(&self, state: &mut State, hidden: &[f32]) -> Vec<f32> {
        let mut logits = vec![0f32; self.config.vocab];
        state.acts.quantize(hidden, self.config.embedding);
        matmul(&self.output, &state.acts, &mut logits);
        logits
    }

    fn truncate(&self, state: &mut State, len: usize) {
        let kv = self.config.kv_dim();
        state.tokens.truncate(len);
        state.keys.resize_with(self.config.layers, Vec::new);
        state.values.resize_with(self.config.layers, Vec::new);
        for (k, v) in state.keys.iter_mut().zip(&mut state.values) {
            k.truncate(len * kv);
            v.truncate(len * kv);
        }
    }

    /// Runs `tokens` (after `state.tokens`) through the network; returns
    /// the last token's final normed hidden state.
    fn forward(&self, state: &mut State, tokens: &[u32]) -> Vec<f32> {
        let c = self.config;
        let (n, e) = (tokens.len(), c.embedding);
        let start = state.tokens.len();
        assert!(start + n <= self.context(), "past the context");
        // A fresh state has no layers yet.
        self.truncate(state, start);
        let mut x = vec![0f32; n * e];
        for (row, &t) in x.chunks_exact_mut(e).zip(tokens) {
            self.embedding.row(t as usize, row);
        }
        let q_dim = c.heads * c.head_dim;
        let mut normed = vec![0f32; n * e];
        let mut qkv = vec![0f32; n * (q_dim + 2 * c.kv_dim())];
        let mut attended = vec![0f32; n * q_dim];
        let mut delta = vec![0f32; n * e];
        let mut gate_up = vec![0f32; n * 2 * c.feed_forward];
        let mut hidden = vec![0f32; n * c.feed_forward];
        for (i, layer) in self.layers.iter().enumerate() {
            rms_norm(&x, &layer.attn_norm, c.rms_eps, &mut normed);
            state.acts.quantize(&normed, e);
            matmul(&layer.qkv, &state.acts, &mut qkv);
            self.rotate_and_cache(state, i, start, &mut qkv);
            self.attend(state, i, start, &qkv, &mut attended);
            state.acts.quantize(&attended, q_dim);
            matmul(&layer.output, &state.acts, &mut delta);
            add(&mut x, &delta);
            rms_norm(&x, &layer.ffn_norm, c.rms_eps, &mut normed);
            state.acts.quantize(&normed, e);
            matmul(&layer.gate_up, &state.acts, &mut gate_up);
            let f = c.feed_forward;
            for (h, gu) in hidden.chunks_exact_mut(f).zip(gate_up.chunks_exact(2 * f)) {
                let (gate, up) = gu.split_at(f);
                for ((h, &g), &u) in h.iter_mut().zip(gate).zip(up) {
                    *h = g / (1.0 + (-g).exp()) * u;
                }
            }
            state.acts.quantize(&hidden, f);
            matmul(&layer.down, &state.acts, &mut delta);
            add(&mut x, &delta);
        }
        state.tokens.extend_from_slice(tokens);
        let mut out = vec![0f32; e];
        rms_norm(&x[(n - 1) * e..], &self.norm, c.rms_eps, &mut out);
        out
    }

    /// Rotates each token's queries and keys by its position, and appends
    /// its keys and values to layer `layer`'s cache.
    fn rotate_and_cache(&self, state: &mut State, layer: usize, start: usize, qkv: &mut [f32]) {
        let c = self.config;
        let (q_dim, kv) = (c.heads * c.head_dim, c.kv_dim());
        let pairs = c.head_dim / 2;
        for (t, row) in qkv.chunks_exact_mut(q_dim + 2 * kv).enumerate() {
            let pos = start + t;
            let cos = &self.rope.0[pos * pairs..(pos + 1) * pairs];
            let sin = &self.rope.1[pos * pairs..(pos + 1) * pairs];
            for head in row[..q_dim + kv].chunks_exact_mut(c.head_dim) {
                for (i, pair) in head.chunks_exact_mut(2).enumerate() {
                    let (a, b) = (pair[0], pair[1]);
                    pair[0] = a * cos[i] - b * sin[i];
                    pair[1] = a * sin[i] + b * cos[i];
                }
            }
            state.keys[layer].extend_from_slice(&row[q_dim..q_dim + kv]);
            state.values[layer].extend_from_slice(&row[q_dim + kv..]);
        }
    }

    /// Causal attention of each new token over the cache (which already
    /// holds the new tokens' keys and values).
    fn attend(&self, state: &State, layer: usize, start: usize, qkv: &[f32], out: &mut [f32]) {
        let c = self.config;
        let (q_dim, kv, d) = (c.heads * c.head_dim, c.kv_dim(), c.head_dim);
        let group = c.heads / c.kv_heads;
        let (keys, values) = (&state.keys[layer], &state.values[layer]);
        let scale = 1.0 / (d as f32).sqrt();
        // One task per (token, head): enough to share among the threads
        // even for a single token.
        out.par_chunks_exact_mut(d)
            .enumerate()
            .for_each_init(Vec::new, |scores, (i, out)| {
                let (t, h) = (i / c.heads, i % c.heads);
                let row = t * (q_dim + 2 * kv);
                let q = &qkv[row + h * d..row + (h + 1) * d];
                let kv_off = (h / group) * d;
                let head = super::simd::Head {
                    keys: &keys[kv_off..],
                    values: &values[kv_off..],
                    stride: kv,
                    seen: start + t + 1,
                    scale,
                };
                head.attend(q, scores, out);
            });
    }
}

fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let e = weight.len();
    for (row, out) in x.chunks_exact(e).zip(out.chunks_exact_mut(e)) {
        let mean = row.iter().map(|v| v * v).sum::<f32>() / e as f32;
        let inv = 1.0 / (mean + eps).sqrt();
        for ((o, &v), &w) in out.iter_mut().zip(row).zip(weight) {
            *o = v * inv * w;
        }
    }
}

fn add(x: &mut [f32], delta: &[f32]) {
    for (x, d) in x.iter_mut().zip(delta) {
        *x += d;
    }
}
