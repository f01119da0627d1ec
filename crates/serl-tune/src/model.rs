//! The network in f32 with candle tensors, so that candle's autograd can
//! differentiate it: the same layout as the engine's decoder (llama, and
//! Gemma 3's norms, GELU, embedding scale and sliding window), the base
//! weights frozen (plain tensors), the adapter's matrices the only
//! variables.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{CpuStorage, CustomOp1, DType, Device, Layout, Shape, Tensor, D};
use serl_local::{Flavor, FloatWeights, ModelShape, RopeTable, Target};

use crate::lora::Lora;
use crate::TuneError;

struct Layer {
    attn_norm: Tensor,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    post_attn_norm: Option<Tensor>,
    ffn_norm: Tensor,
    post_ffn_norm: Option<Tensor>,
    /// Each projection transposed (inputs × outputs), ready to multiply.
    weights: BTreeMap<Target, Tensor>,
    sliding: bool,
}

/// The frozen base network.
pub struct FloatModel {
    shape: ModelShape,
    embedding: Tensor,
    /// The output projection transposed (embedding × vocab).
    output_t: Tensor,
    norm: Tensor,
    layers: Vec<Layer>,
    /// cos and sin (`context × head_dim / 2`) of whole-context and
    /// sliding-window layers.
    rope: [(Tensor, Tensor); 2],
    context: usize,
    /// Where the tensors live: the CPU, or a CUDA GPU (`--features cuda`).
    device: Device,
}

/// The keys and values of a prompt's tokens, per layer (`kv_heads ×
/// tokens × head_dim`), computed without gradients.
pub struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    len: usize,
}

impl KvCache {
    /// Tokens cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

fn gguf_name(t: Target) -> &'static str {
    match t {
        Target::Q => "attn_q",
        Target::K => "attn_k",
        Target::V => "attn_v",
        Target::O => "attn_output",
        Target::Gate => "ffn_gate",
        Target::Up => "ffn_up",
        Target::Down => "ffn_down",
    }
}

impl FloatModel {
    /// Reads `path` in f32 on the CPU, for contexts of up to `context`
    /// tokens.
    pub fn read(path: &Path, context: usize) -> Result<FloatModel, TuneError> {
        FloatModel::read_on(path, context, &Device::Cpu)
    }

    /// Reads `path` in f32 onto `device` (the file is dequantized on the
    /// CPU, then copied).
    pub fn read_on(path: &Path, context: usize, device: &Device) -> Result<FloatModel, TuneError> {
        let mut w = FloatWeights::read(path)?;
        if !device.is_cpu() {
            for t in w.tensors.values_mut() {
                *t = t.to_device(device)?;
            }
        }
        FloatModel::new(w, context, device)
    }

    fn new(w: FloatWeights, context: usize, device: &Device) -> Result<FloatModel, TuneError> {
        let s = w.shape.clone();
        let vector = |name: &str| -> Result<Tensor, TuneError> { Ok(w.get(name)?.flatten_all()?) };
        let opt = |name: &str| w.tensors.get(name).map(|t| t.flatten_all()).transpose();
        let gemma = s.flavor == Flavor::Gemma3;
        let mut layers = Vec::with_capacity(s.layers);
        for i in 0..s.layers {
            let p = format!("blk.{i}");
            let mut weights = BTreeMap::new();
            for t in Target::ALL {
                let m = w.get(&format!("{p}.{}.weight", gguf_name(t)))?;
                let (rows, cols) = s.projection(t);
                if m.dims2()? != (rows, cols) {
                    return Err(TuneError::Model(format!(
                        "`{p}.{}.weight` is {:?}, the metadata asks for {rows} × {cols}",
                        gguf_name(t),
                        m.dims()
                    )));
                }
                weights.insert(t, m.t()?.contiguous()?);
            }
            let norm = |n: &str| {
                if gemma {
                    opt(&format!("{p}.{n}.weight"))
                } else {
                    Ok(None)
                }
            };
            layers.push(Layer {
                attn_norm: vector(&format!("{p}.attn_norm.weight"))?,
                q_norm: norm("attn_q_norm")?,
                k_norm: norm("attn_k_norm")?,
                post_attn_norm: norm("post_attention_norm")?,
                ffn_norm: vector(&format!("{p}.ffn_norm.weight"))?,
                post_ffn_norm: norm("post_ffw_norm")?,
                weights,
                sliding: s.sliding(i),
            });
        }
        let embedding = w.get("token_embd.weight")?.clone();
        let output = w.tensors.get("output.weight").unwrap_or(&embedding);
        let factors = opt("rope_freqs.weight")?
            .map(|t| t.to_vec1::<f32>())
            .transpose()?;
        let pairs = s.head_dim / 2;
        let table = |base: f32, scale: f32| -> Result<(Tensor, Tensor), TuneError> {
            let t = RopeTable::new(s.head_dim, base, scale, factors.as_deref(), context);
            let dev = device;
            Ok((
                Tensor::from_vec(t.cos, (context, pairs), dev)?,
                Tensor::from_vec(t.sin, (context, pairs), dev)?,
            ))
        };
        Ok(FloatModel {
            output_t: output.t()?.contiguous()?,
            norm: vector("output_norm.weight")?,
            rope: [
                table(s.rope_base, s.rope_scale)?,
                table(s.rope_base_local, 1.0)?,
            ],
            embedding,
            layers,
            context,
            shape: s,
            device: device.clone(),
        })
    }

    /// Where the tensors live.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The shape.
    pub fn shape(&self) -> &ModelShape {
        &self.shape
    }

    /// Positions the rotary tables cover.
    pub fn context(&self) -> usize {
        self.context
    }

    /// The keys and values of `tokens` (from position 0), with `lora`'s
    /// current updates but no gradient.
    pub fn cache(&self, lora: Option<&Lora>, tokens: &[u32]) -> Result<KvCache, TuneError> {
        let frozen = lora.map(Lora::frozen).transpose()?;
        let (_, cache) = self.forward(frozen.as_ref(), tokens, None)?;
        Ok(cache)
    }

    /// The sum of the log-probabilities of `reply` after a prompt whose
    /// last token is `last` and whose other tokens are in `cache`: a
    /// scalar through which gradients reach `lora`'s variables.
    pub fn reply_logprob(
        &self,
        lora: Option<&Lora>,
        cache: Option<&KvCache>,
        last: u32,
        reply: &[u32],
    ) -> Result<Tensor, TuneError> {
        let (Some(_), false) = (reply.first(), reply.is_empty()) else {
            return Err(TuneError::Data("an empty reply".into()));
        };
        let mut input = Vec::with_capacity(reply.len());
        input.push(last);
        input.extend_from_slice(&reply[..reply.len() - 1]);
        let logits = self.logits(lora, &input, cache)?;
        let max = logits.max_keepdim(D::Minus1)?.detach();
        let z = logits.broadcast_sub(&max)?;
        let lse = z.exp()?.sum_keepdim(D::Minus1)?.log()?;
        let logp = z.broadcast_sub(&lse)?;
        let targets = Tensor::from_slice(reply, (reply.len(), 1), &self.device)?;
        Ok(logp.gather(&targets, 1)?.sum_all()?)
    }

    /// The logits of every position of `tokens`, after `cache`'s tokens.
    pub fn logits(
        &self,
        lora: Option<&Lora>,
        tokens: &[u32],
        cache: Option<&KvCache>,
    ) -> Result<Tensor, TuneError> {
        let (hidden, _) = self.forward(lora, tokens, cache)?;
        frozen_matmul(&hidden, &self.output_t)
    }

    /// Runs `tokens` after `cache`: the final normed hidden states and the
    /// cache extended by them.
    fn forward(
        &self,
        lora: Option<&Lora>,
        tokens: &[u32],
        cache: Option<&KvCache>,
    ) -> Result<(Tensor, KvCache), TuneError> {
        let s = &self.shape;
        let start = cache.map_or(0, |c| c.len);
        if tokens.is_empty() || start + tokens.len() > self.context {
            return Err(TuneError::Data(format!(
                "{} tokens after {start} do not fit a context of {}",
                tokens.len(),
                self.context
            )));
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= s.vocab) {
            return Err(TuneError::Data(format!("token {t} is past the vocabulary")));
        }
        let ids = Tensor::from_slice(tokens, tokens.len(), &self.device)?;
        let mut x = self.embedding.index_select(&ids, 0)?;
        if s.embed_scale != 1.0 {
            x = (x * s.embed_scale as f64)?;
        }
        let mut kv = Vec::with_capacity(s.layers);
        for (i, layer) in self.layers.iter().enumerate() {
            let past = cache.map(|c| &c.layers[i]);
            let (delta, k, v) = self.attention(lora, i, layer, &x, start, past)?;
            x = (x + delta)?;
            x = (&x + self.feed_forward(lora, i, layer, &x)?)?;
            kv.push((k, v));
        }
        let hidden = rms_norm(&x, &self.norm, s.rms_eps)?;
        Ok((
            hidden,
            KvCache {
                layers: kv,
                len: start + tokens.len(),
            },
        ))
    }

    /// `x` through target `t`'s projection of layer `i`, with the update.
    fn project(
        &self,
        lora: Option<&Lora>,
        i: usize,
        t: Target,
        x: &Tensor,
    ) -> Result<Tensor, TuneError> {
        let base = frozen_matmul(x, &self.layers[i].weights[&t])?;
        match lora.map(|l| l.update(i, t, x)).transpose()?.flatten() {
            Some(u) => Ok((base + u)?),
            None => Ok(base),
        }
    }

    #[allow(clippy::type_complexity)]
    fn attention(
        &self,
        lora: Option<&Lora>,
        i: usize,
        layer: &Layer,
        x: &Tensor,
        start: usize,
        past: Option<&(Tensor, Tensor)>,
    ) -> Result<(Tensor, Tensor, Tensor), TuneError> {
        let s = &self.shape;
        let (n, d) = (x.dim(0)?, s.head_dim);
        let h = rms_norm(x, &layer.attn_norm, s.rms_eps)?;
        let mut q = self
            .project(lora, i, Target::Q, &h)?
            .reshape((n, s.heads, d))?;
        let mut k = self
            .project(lora, i, Target::K, &h)?
            .reshape((n, s.kv_heads, d))?;
        let v = self
            .project(lora, i, Target::V, &h)?
            .reshape((n, s.kv_heads, d))?;
        if let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) {
            q = rms_norm(&q, qn, s.rms_eps)?;
            k = rms_norm(&k, kn, s.rms_eps)?;
        }
        let (cos, sin) = &self.rope[usize::from(layer.sliding)];
        let (cos, sin) = (cos.narrow(0, start, n)?, sin.narrow(0, start, n)?);
        let q = rotate(&q, &cos, &sin, s.neox)?.transpose(0, 1)?;
        let k = rotate(&k, &cos, &sin, s.neox)?
            .transpose(0, 1)?
            .contiguous()?;
        let v = v.transpose(0, 1)?.contiguous()?;
        let (k, v) = match past {
            Some((pk, pv)) => (Tensor::cat(&[pk, &k], 1)?, Tensor::cat(&[pv, &v], 1)?),
            None => (k, v),
        };
        let total = start + n;
        let group = s.heads / s.kv_heads;
        // Queries grouped by their key-value head: (kv_heads, group·n, d).
        let q = q.contiguous()?.reshape((s.kv_heads, group * n, d))?;
        let scores = (q.matmul(&k.t()?)? * s.attn_scale as f64)?;
        let window = if layer.sliding { s.window } else { usize::MAX };
        let mask = causal_mask(n, start, total, window, &self.device)?;
        let scores = scores
            .reshape((s.kv_heads, group, n, total))?
            .broadcast_add(&mask)?;
        let probs = softmax(&scores)?.reshape((s.kv_heads, group * n, total))?;
        let out = probs
            .matmul(&v)?
            .reshape((s.heads, n, d))?
            .transpose(0, 1)?
            .reshape((n, s.heads * d))?;
        let mut out = self.project(lora, i, Target::O, &out)?;
        if let Some(w) = &layer.post_attn_norm {
            out = rms_norm(&out, w, s.rms_eps)?;
        }
        Ok((out, k.detach(), v.detach()))
    }

    fn feed_forward(
        &self,
        lora: Option<&Lora>,
        i: usize,
        layer: &Layer,
        x: &Tensor,
    ) -> Result<Tensor, TuneError> {
        let s = &self.shape;
        let h = rms_norm(x, &layer.ffn_norm, s.rms_eps)?;
        let gate = self.project(lora, i, Target::Gate, &h)?;
        let up = self.project(lora, i, Target::Up, &h)?;
        let act = match s.flavor {
            Flavor::Gemma3 => gate.gelu()?,
            Flavor::Llama => gate.silu()?,
        };
        let mut out = self.project(lora, i, Target::Down, &(act * up)?)?;
        if let Some(w) = &layer.post_ffn_norm {
            out = rms_norm(&out, w, s.rms_eps)?;
        }
        Ok(out)
    }
}

/// `x · w` for a constant `w` (inputs × outputs): on the CPU the backward
/// pass computes the gradient of `x` only. candle's matmul would also
/// compute `w`'s, a weight-sized product and allocation per projection,
/// which tripled the cost of a reply's backward pass on SmolLM2. On a GPU
/// candle's own matmul runs (the op below has no kernel there), and the
/// unused product costs a GPU far less.
fn frozen_matmul(x: &Tensor, w: &Tensor) -> Result<Tensor, TuneError> {
    if !x.device().is_cpu() {
        return Ok(x.matmul(w)?);
    }
    Ok(x.contiguous()?.apply_op1(Frozen { w: w.clone() })?)
}

struct Frozen {
    w: Tensor,
}

impl CustomOp1 for Frozen {
    fn name(&self) -> &'static str {
        "frozen-matmul"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let CpuStorage::F32(values) = storage else {
            candle_core::bail!("frozen-matmul: f32 inputs only");
        };
        let Some((from, to)) = layout.contiguous_offsets() else {
            candle_core::bail!("frozen-matmul: a contiguous input only");
        };
        let x = Tensor::from_slice(&values[from..to], layout.shape(), &Device::Cpu)?;
        let y = x.matmul(&self.w)?;
        let shape = y.shape().clone();
        Ok((CpuStorage::F32(y.flatten_all()?.to_vec1()?), shape))
    }

    fn bwd(
        &self,
        _arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(grad.matmul(&self.w.t()?)?))
    }
}

/// RMS norm over the last dimension, times `weight`.
fn rms_norm(x: &Tensor, weight: &Tensor, eps: f32) -> candle_core::Result<Tensor> {
    let mean = x.sqr()?.mean_keepdim(D::Minus1)?;
    let inv = (mean + eps as f64)?.sqrt()?.recip()?;
    x.broadcast_mul(&inv)?.broadcast_mul(weight)
}

/// Softmax over the last dimension.
fn softmax(x: &Tensor) -> candle_core::Result<Tensor> {
    let max = x.max_keepdim(D::Minus1)?.detach();
    let e = x.broadcast_sub(&max)?.exp()?;
    e.broadcast_div(&e.sum_keepdim(D::Minus1)?)
}

/// Rotates `x` (`tokens × heads × head_dim`) by its positions' angles:
/// pairs (2i, 2i + 1), or (i, i + d/2) with `neox`, as the engine does.
fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor, neox: bool) -> candle_core::Result<Tensor> {
    let (n, h, d) = x.dims3()?;
    let half = d / 2;
    let cos = cos.reshape((n, 1, half))?;
    let sin = sin.reshape((n, 1, half))?;
    let (a, b) = if neox {
        (x.narrow(2, 0, half)?, x.narrow(2, half, half)?)
    } else {
        let pairs = x.reshape((n, h, half, 2))?;
        (
            pairs.narrow(3, 0, 1)?.squeeze(3)?,
            pairs.narrow(3, 1, 1)?.squeeze(3)?,
        )
    };
    let ra = (a.broadcast_mul(&cos)? - b.broadcast_mul(&sin)?)?;
    let rb = (a.broadcast_mul(&sin)? + b.broadcast_mul(&cos)?)?;
    if neox {
        Tensor::cat(&[ra, rb], 2)
    } else {
        Tensor::stack(&[ra, rb], 3)?.reshape((n, h, d))
    }
}

/// `n × total`: 0 where query `t` (at position `start + t`) sees key `j`
/// (causal, and within `window` positions counting its own), −∞ elsewhere.
fn causal_mask(
    n: usize,
    start: usize,
    total: usize,
    window: usize,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let mut m = vec![f32::NEG_INFINITY; n * total];
    for t in 0..n {
        let pos = start + t;
        let from = (pos + 1).saturating_sub(window);
        m[t * total + from..t * total + pos + 1].fill(0.0);
    }
    Tensor::from_vec(m, (n, total), device)?.to_dtype(DType::F32)
}
