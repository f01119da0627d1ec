//! The decoder: GGUF's `llama` layout (RMS norm, rotary attention with
//! grouped keys and values, a gated SiLU feed-forward block) and Gemma 3's
//! variations on it (query and key norms, a norm after each block, GELU, a
//! scaled embedding, a sliding window), with a key-value cache that keeps
//! the longest shared prefix between requests.

use std::io::{Read, Seek};
use std::sync::Arc;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::GgmlDType;
use candle_core::Device;
use half::f16;
use rayon::prelude::*;

use super::config::{Config, Flavor, LoadError, RopeTable};
use super::quant::{matmul, LayoutError, QActs, QMatrix};
use crate::adapter::{Adapter, Prepared, Target};
use std::collections::BTreeMap;

struct Layer {
    attn_norm: Vec<f32>,
    /// Queries, keys and values stacked: one product per token.
    qkv: QMatrix,
    /// Gemma 3: RMS norms of each query and key head.
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    output: QMatrix,
    /// Gemma 3: the attention's output normed before it is added.
    post_attn_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    /// Gate and up stacked.
    gate_up: QMatrix,
    down: QMatrix,
    /// Gemma 3: the feed-forward output normed before it is added.
    post_ffn_norm: Option<Vec<f32>>,
    /// Attends through the sliding window, with the local rotary table.
    sliding: bool,
}

/// The weights.
pub struct Decoder {
    config: Config,
    embedding: Arc<QMatrix>,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    output: Arc<QMatrix>,
    /// The rotary tables of whole-context and of sliding-window layers.
    rope: [RopeTable; 2],
    context: usize,
    /// Low-rank updates added to the projections (unmerged), per layer.
    adapter: Option<Vec<BTreeMap<Target, Prepared>>>,
}

impl Decoder {
    /// Reads the weights named in `content` from `reader`, for the
    /// architecture `arch` and contexts of up to `context` tokens.
    pub fn read<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        arch: &str,
        context: usize,
    ) -> Result<Decoder, LoadError> {
        let config = Config::read(content, arch)?;
        let mut loader = Loader { content, reader };
        // Grown as layers are read: the count comes from the file.
        let mut layers = Vec::new();
        for i in 0..config.layers {
            layers.push(loader.layer(&config, i)?);
        }
        let embedding = Arc::new(loader.matrix("token_embd.weight")?);
        let output = if content.tensor_infos.contains_key("output.weight") {
            Arc::new(loader.matrix("output.weight")?)
        } else {
            // Tied: the same matrix, not a copy.
            embedding.clone()
        };
        // Llama 3.1 and 3.2: each pair's frequency is divided by its factor.
        let factors = if content.tensor_infos.contains_key("rope_freqs.weight") {
            let f = loader.vector("rope_freqs.weight")?;
            if f.len() != config.head_dim / 2 || !f.iter().all(|&x| x > 0.0) {
                return Err(format!(
                    "`rope_freqs.weight` has {} values, not {} positive factors",
                    f.len(),
                    config.head_dim / 2
                ));
            }
            Some(f)
        } else {
            None
        };
        let empty = || RopeTable::new(2, 1.0, 1.0, None, 0);
        let mut decoder = Decoder {
            norm: loader.vector("output_norm.weight")?,
            rope: [empty(), empty()],
            layers,
            embedding,
            output,
            context,
            config,
            adapter: None,
        };
        // Shapes first: the tables' sizes follow from them.
        decoder.check_shapes()?;
        let c = &decoder.config;
        let f = factors.as_deref();
        decoder.rope = [
            RopeTable::new(c.head_dim, c.rope_base, c.rope_scale, f, context),
            RopeTable::new(c.head_dim, c.rope_base_local, 1.0, f, context),
        ];
        Ok(decoder)
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
        let d = c.head_dim;
        for l in &self.layers {
            expect("attn_q/k/v", &l.qkv, c.q_dim() + 2 * c.kv_dim(), e)?;
            expect("attn_output", &l.output, e, c.q_dim())?;
            expect("ffn_gate/up", &l.gate_up, 2 * c.feed_forward, e)?;
            expect("ffn_down", &l.down, e, c.feed_forward)?;
            let norms = [&l.post_attn_norm, &l.post_ffn_norm];
            if l.attn_norm.len() != e
                || l.ffn_norm.len() != e
                || norms
                    .iter()
                    .any(|n| n.as_ref().is_some_and(|n| n.len() != e))
            {
                return Err("a norm's length is not the embedding's".into());
            }
            if [&l.q_norm, &l.k_norm]
                .iter()
                .any(|n| n.as_ref().is_some_and(|n| n.len() != d))
            {
                return Err("a query or key norm's length is not the head's".into());
            }
        }
        Ok(())
    }

    #[cfg(test)]
    /// The shape.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Positions the rotary tables cover.
    pub fn context(&self) -> usize {
        self.context
    }

    /// Adds `adapter`'s updates to the projections from now on (`None`
    /// removes them), after checking that its shapes are this network's.
    pub fn set_adapter(&mut self, adapter: Option<Arc<Adapter>>) -> Result<(), LoadError> {
        if let Some(a) = &adapter {
            let c = &self.config;
            if a.layers.len() != c.layers {
                return Err(format!(
                    "the adapter has {} layers, the model {}",
                    a.layers.len(),
                    c.layers
                ));
            }
            for (i, layer) in a.layers.iter().enumerate() {
                for (&t, lr) in layer {
                    let (rows, cols) = c.projection(t);
                    if (lr.rows, lr.cols) != (rows, cols) || lr.a.len() != lr.rank() * cols {
                        return Err(format!(
                            "layer {i}'s `{}` update is {} × {}, the projection {rows} × {cols}",
                            t.name(),
                            lr.rows,
                            lr.cols
                        ));
                    }
                }
            }
        }
        self.adapter = adapter.map(|a| {
            let scale = a.config.scale();
            a.layers
                .iter()
                .map(|l| {
                    l.iter()
                        .map(|(&t, lr)| (t, Prepared::new(lr, scale)))
                        .collect()
                })
                .collect()
        });
        Ok(())
    }

    /// Adds the adapter's updates of `targets` in layer `layer` to `out`
    /// (rows of `stride`, each target's outputs after the previous one's).
    fn low_rank(&self, layer: usize, targets: &[Target], input: &[f32], out: &mut [f32]) {
        let Some(layers) = &self.adapter else { return };
        let stride = out.len() / (input.len() / self.config.projection(targets[0]).1);
        let mut offset = 0;
        for &t in targets {
            if let Some(p) = layers.get(layer).and_then(|l| l.get(&t)) {
                p.add(input, out, offset, stride);
            }
            offset += self.config.projection(t).0;
        }
    }
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

    /// Layer `i`'s weights.
    fn layer(&mut self, c: &Config, i: usize) -> Result<Layer, LoadError> {
        let p = format!("blk.{i}");
        let (q, kv, ff) = (c.q_dim(), c.kv_dim(), c.feed_forward);
        let qkv = self.stacked(&[
            (&format!("{p}.attn_q.weight"), q),
            (&format!("{p}.attn_k.weight"), kv),
            (&format!("{p}.attn_v.weight"), kv),
        ])?;
        let gate_up = self.stacked(&[
            (&format!("{p}.ffn_gate.weight"), ff),
            (&format!("{p}.ffn_up.weight"), ff),
        ])?;
        let gemma = c.flavor == Flavor::Gemma3;
        let mut norm = |name: &str| -> Result<Option<Vec<f32>>, LoadError> {
            gemma
                .then(|| self.vector(&format!("{p}.{name}.weight")))
                .transpose()
        };
        let (q_norm, k_norm) = (norm("attn_q_norm")?, norm("attn_k_norm")?);
        let post_attn_norm = norm("post_attention_norm")?;
        let post_ffn_norm = norm("post_ffw_norm")?;
        Ok(Layer {
            attn_norm: self.vector(&format!("{p}.attn_norm.weight"))?,
            qkv,
            q_norm,
            k_norm,
            output: self.matrix(&format!("{p}.attn_output.weight"))?,
            post_attn_norm,
            ffn_norm: self.vector(&format!("{p}.ffn_norm.weight"))?,
            gate_up,
            down: self.matrix(&format!("{p}.ffn_down.weight"))?,
            post_ffn_norm,
            sliding: c.sliding(i),
        })
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
    /// Per layer: keys and values, `position × kv_dim`, in f16 (as
    /// llama.cpp keeps them; `simd` says why).
    keys: Vec<Vec<f16>>,
    values: Vec<Vec<f16>>,
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
        let per_token = |v: &Vec<f16>| v.len().checked_div(self.tokens.len()).unwrap_or(0);
        let head = |v: &Vec<f16>| v[..n * per_token(v)].to_vec();
        State {
            tokens: self.tokens[..n].to_vec(),
            keys: self.keys.iter().map(head).collect(),
            values: self.values.iter().map(head).collect(),
            acts: QActs::default(),
        }
    }
}

impl Decoder {
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
        let c = &self.config;
        let (n, e) = (tokens.len(), c.embedding);
        let start = state.tokens.len();
        assert!(start + n <= self.context(), "past the context");
        // A fresh state has no layers yet.
        self.truncate(state, start);
        let mut x = vec![0f32; n * e];
        for (row, &t) in x.chunks_exact_mut(e).zip(tokens) {
            self.embedding.row(t as usize, row);
            if c.embed_scale != 1.0 {
                row.iter_mut().for_each(|v| *v *= c.embed_scale);
            }
        }
        let mut s = Scratch {
            normed: vec![0f32; n * e],
            qkv: vec![0f32; n * (c.q_dim() + 2 * c.kv_dim())],
            attended: vec![0f32; n * c.q_dim()],
            delta: vec![0f32; n * e],
            gate_up: vec![0f32; n * 2 * c.feed_forward],
            hidden: vec![0f32; n * c.feed_forward],
        };
        for (i, layer) in self.layers.iter().enumerate() {
            self.attention(state, i, layer, start, &mut x, &mut s);
            self.feed_forward(state, i, layer, &mut x, &mut s);
        }
        state.tokens.extend_from_slice(tokens);
        let mut out = vec![0f32; e];
        rms_norm(&x[(n - 1) * e..], &self.norm, c.rms_eps, &mut out);
        out
    }

    /// The attention block of layer `i`, added to `x`.
    fn attention(
        &self,
        state: &mut State,
        i: usize,
        layer: &Layer,
        start: usize,
        x: &mut [f32],
        s: &mut Scratch,
    ) {
        let c = &self.config;
        rms_norm(x, &layer.attn_norm, c.rms_eps, &mut s.normed);
        state.acts.quantize(&s.normed, c.embedding);
        matmul(&layer.qkv, &state.acts, &mut s.qkv);
        self.low_rank(i, &[Target::Q, Target::K, Target::V], &s.normed, &mut s.qkv);
        if let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) {
            let q_dim = c.q_dim();
            for row in s.qkv.chunks_exact_mut(q_dim + 2 * c.kv_dim()) {
                let (q, kv) = row.split_at_mut(q_dim);
                rms_norm_in_place(q, qn, c.rms_eps);
                rms_norm_in_place(&mut kv[..c.kv_dim()], kn, c.rms_eps);
            }
        }
        self.rotate_and_cache(state, i, layer.sliding, start, &mut s.qkv);
        self.attend(state, i, layer.sliding, start, &s.qkv, &mut s.attended);
        state.acts.quantize(&s.attended, c.q_dim());
        matmul(&layer.output, &state.acts, &mut s.delta);
        self.low_rank(i, &[Target::O], &s.attended, &mut s.delta);
        if let Some(w) = &layer.post_attn_norm {
            rms_norm_in_place(&mut s.delta, w, c.rms_eps);
        }
        add(x, &s.delta);
    }

    /// The feed-forward block, added to `x`.
    fn feed_forward(
        &self,
        state: &mut State,
        i: usize,
        layer: &Layer,
        x: &mut [f32],
        s: &mut Scratch,
    ) {
        let c = &self.config;
        rms_norm(x, &layer.ffn_norm, c.rms_eps, &mut s.normed);
        state.acts.quantize(&s.normed, c.embedding);
        matmul(&layer.gate_up, &state.acts, &mut s.gate_up);
        self.low_rank(i, &[Target::Gate, Target::Up], &s.normed, &mut s.gate_up);
        let f = c.feed_forward;
        let gelu = c.flavor == Flavor::Gemma3;
        for (h, gu) in s
            .hidden
            .chunks_exact_mut(f)
            .zip(s.gate_up.chunks_exact(2 * f))
        {
            let (gate, up) = gu.split_at(f);
            for ((h, &g), &u) in h.iter_mut().zip(gate).zip(up) {
                *h = if gelu {
                    gelu_tanh(g)
                } else {
                    g / (1.0 + (-g).exp())
                } * u;
            }
        }
        state.acts.quantize(&s.hidden, f);
        matmul(&layer.down, &state.acts, &mut s.delta);
        self.low_rank(i, &[Target::Down], &s.hidden, &mut s.delta);
        if let Some(w) = &layer.post_ffn_norm {
            rms_norm_in_place(&mut s.delta, w, c.rms_eps);
        }
        add(x, &s.delta);
    }

    /// Rotates each token's queries and keys by its position, and appends
    /// its keys and values to layer `layer`'s cache.
    fn rotate_and_cache(
        &self,
        state: &mut State,
        layer: usize,
        sliding: bool,
        start: usize,
        qkv: &mut [f32],
    ) {
        let c = &self.config;
        let (q_dim, kv) = (c.q_dim(), c.kv_dim());
        let pairs = c.head_dim / 2;
        let table = &self.rope[usize::from(sliding)];
        for (t, row) in qkv.chunks_exact_mut(q_dim + 2 * kv).enumerate() {
            let pos = start + t;
            let cos = &table.cos[pos * pairs..(pos + 1) * pairs];
            let sin = &table.sin[pos * pairs..(pos + 1) * pairs];
            for head in row[..q_dim + kv].chunks_exact_mut(c.head_dim) {
                if c.neox {
                    let (lo, hi) = head.split_at_mut(pairs);
                    for i in 0..pairs {
                        let (a, b) = (lo[i], hi[i]);
                        lo[i] = a * cos[i] - b * sin[i];
                        hi[i] = a * sin[i] + b * cos[i];
                    }
                } else {
                    for (i, pair) in head.chunks_exact_mut(2).enumerate() {
                        let (a, b) = (pair[0], pair[1]);
                        pair[0] = a * cos[i] - b * sin[i];
                        pair[1] = a * sin[i] + b * cos[i];
                    }
                }
            }
            append_f16(&mut state.keys[layer], &row[q_dim..q_dim + kv]);
            append_f16(&mut state.values[layer], &row[q_dim + kv..]);
        }
    }

    /// Causal attention of each new token over the cache (which already
    /// holds the new tokens' keys and values); a sliding-window layer sees
    /// only the last `window` positions, its own included (llama.cpp's
    /// standard window). A prompt's tokens attend as matrix products
    /// (`prompt`), one new token with the cache-reading kernel (`simd`).
    fn attend(
        &self,
        state: &State,
        layer: usize,
        sliding: bool,
        start: usize,
        qkv: &[f32],
        out: &mut [f32],
    ) {
        let c = &self.config;
        let (q_dim, kv, d) = (c.q_dim(), c.kv_dim(), c.head_dim);
        let (heads, group) = (c.heads, c.heads / c.kv_heads);
        let window = if sliding { c.window } else { usize::MAX };
        let (keys, values) = (&state.keys[layer], &state.values[layer]);
        let scale = c.attn_scale;
        let n = qkv.len() / (q_dim + 2 * kv);
        if n >= super::prompt::MIN_TOKENS {
            let prompt = super::prompt::PromptAttention {
                keys,
                values,
                heads,
                kv_heads: c.kv_heads,
                head_dim: d,
                start,
                window,
                scale,
            };
            return prompt.attend(qkv, q_dim + 2 * kv, n, out);
        }
        // One task per (token, head): enough to share among the threads
        // even for a single token.
        out.par_chunks_exact_mut(d)
            .enumerate()
            .for_each_init(Vec::new, |scores, (i, out)| {
                let (t, h) = (i / heads, i % heads);
                let row = t * (q_dim + 2 * kv);
                let q = &qkv[row + h * d..row + (h + 1) * d];
                let seen = start + t + 1;
                let from = seen.saturating_sub(window);
                let at = from * kv + (h / group) * d;
                let head = super::simd::Head {
                    keys: &keys[at..],
                    values: &values[at..],
                    stride: kv,
                    seen: seen - from,
                    scale,
                };
                head.attend(q, scores, out);
            });
    }
}

/// Appends `x` to `cache`, rounded to f16.
fn append_f16(cache: &mut Vec<f16>, x: &[f32]) {
    use half::slice::HalfFloatSliceExt;
    let at = cache.len();
    cache.resize(at + x.len(), f16::ZERO);
    cache[at..].convert_from_f32_slice(x);
}

/// Buffers of one forward pass.
struct Scratch {
    normed: Vec<f32>,
    qkv: Vec<f32>,
    attended: Vec<f32>,
    delta: Vec<f32>,
    gate_up: Vec<f32>,
    hidden: Vec<f32>,
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

/// Each row of `weight.len()` values of `x` normed (an embedding, or each
/// query or key head).
fn rms_norm_in_place(x: &mut [f32], weight: &[f32], eps: f32) {
    let e = weight.len();
    for row in x.chunks_exact_mut(e) {
        let mean = row.iter().map(|v| v * v).sum::<f32>() / e as f32;
        let inv = 1.0 / (mean + eps).sqrt();
        for (v, &w) in row.iter_mut().zip(weight) {
            *v *= inv * w;
        }
    }
}

/// GELU, tanh approximation (Gemma's `gelu_pytorch_tanh`, ggml's gelu).
fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())
}

fn add(x: &mut [f32], delta: &[f32]) {
    for (x, d) in x.iter_mut().zip(delta) {
        *x += d;
    }
}
