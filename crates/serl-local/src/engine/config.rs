//! The decoder's shape and its rotary embedding, from the file's metadata:
//! GGUF's `llama` layout (SmolLM2, Llama 2 and 3, with Llama 3.1's rope
//! factors or linear rope scaling) and `gemma3`'s (query and key norms,
//! norms after each block, GELU, a sliding window on five layers of six).

use candle_core::quantized::gguf_file::{Content, Value};

/// What a tensor or a metadata field lacks.
pub type LoadError = String;

/// Which of the layouts the decoder runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// GGUF's `llama`: RMS norm, interleaved rotary pairs, SiLU.
    Llama,
    /// GGUF's `gemma3`: as llama.cpp's `gemma3` graph computes it.
    Gemma3,
}

/// The network's shape, from the file's `{arch}.*` metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The layout.
    pub flavor: Flavor,
    /// Decoder blocks.
    pub layers: usize,
    /// The embedding's width.
    pub embedding: usize,
    /// Query heads.
    pub heads: usize,
    /// Key and value heads (grouped: each serves `heads / kv_heads`).
    pub kv_heads: usize,
    /// The width of a head.
    pub head_dim: usize,
    /// The feed-forward block's hidden width.
    pub feed_forward: usize,
    /// The RMS norms' epsilon.
    pub rms_eps: f32,
    /// Tokens in the vocabulary (the embedding's rows).
    pub vocab: usize,
    /// Rotary base of the layers that see the whole context.
    pub rope_base: f32,
    /// Rotary base of the sliding-window layers.
    pub rope_base_local: f32,
    /// Linear rope scaling of the whole-context layers: positions are
    /// multiplied by it (1 / `rope.scaling.factor`).
    pub rope_scale: f32,
    /// Pairs rotated as (i, i + d/2) (NEOX) rather than (2i, 2i + 1).
    pub neox: bool,
    /// Positions a sliding-window layer sees, its own included (0: none).
    pub window: usize,
    /// Every `window_pattern`-th layer sees the whole context.
    pub window_pattern: usize,
    /// The scores' scale, 1/√(head width) but for Gemma 3 27B.
    pub attn_scale: f32,
    /// The embedding's scale (Gemma: √width).
    pub embed_scale: f32,
}

impl Config {
    /// The width of the keys (and of the values) of one token.
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// The width of the queries of one token.
    pub fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    /// The (outputs, inputs) of a projection an adapter can update.
    pub fn projection(&self, target: crate::adapter::Target) -> (usize, usize) {
        use crate::adapter::Target;
        let (e, f) = (self.embedding, self.feed_forward);
        match target {
            Target::Q => (self.q_dim(), e),
            Target::K | Target::V => (self.kv_dim(), e),
            Target::O => (e, self.q_dim()),
            Target::Gate | Target::Up => (f, e),
            Target::Down => (e, f),
        }
    }

    /// Whether layer `i` attends through a sliding window.
    pub fn sliding(&self, i: usize) -> bool {
        self.window > 0 && self.window_pattern > 0 && !(i + 1).is_multiple_of(self.window_pattern)
    }

    /// The configuration of the architecture `arch` from `content`.
    pub fn read(content: &Content, arch: &str) -> Result<Config, LoadError> {
        let flavor = match arch {
            "llama" => Flavor::Llama,
            "gemma3" => Flavor::Gemma3,
            _ => return Err(format!("the decoder does not run `{arch}`")),
        };
        let meta = Meta { content, arch };
        let embedding = meta.int("embedding_length")?;
        let heads = meta.int("attention.head_count")?;
        let kv_heads = meta.opt_int("attention.head_count_kv").unwrap_or(heads);
        let head_dim = match flavor {
            Flavor::Llama => embedding / heads.max(1),
            Flavor::Gemma3 => meta.int("attention.key_length")?,
        };
        if kv_heads == 0 || !heads.is_multiple_of(kv_heads) || head_dim == 0 {
            return Err(format!(
                "{heads} heads and {kv_heads} key-value heads of width {head_dim} do not fit an embedding of {embedding}"
            ));
        }
        if flavor == Flavor::Llama && !embedding.is_multiple_of(heads) {
            return Err(format!(
                "{heads} heads do not divide an embedding of {embedding}"
            ));
        }
        if let Some(v) = meta.opt_int("attention.value_length") {
            if v != head_dim {
                return Err(format!("values of width {v} beside keys of {head_dim}"));
            }
        }
        if !head_dim.is_multiple_of(2) {
            return Err(format!("an odd head width ({head_dim}) cannot be rotated"));
        }
        // Rotating part of a head is not done.
        if let Some(n) = meta.opt_int("rope.dimension_count") {
            if n != head_dim {
                return Err(format!(
                    "rotary embedding over {n} of a head's {head_dim} values is not supported"
                ));
            }
        }
        let layers = meta.int("block_count")?;
        let gemma = flavor == Flavor::Gemma3;
        let rope_base = meta.float("rope.freq_base", if gemma { 1e6 } else { 1e4 });
        Ok(Config {
            flavor,
            layers,
            embedding,
            heads,
            kv_heads,
            head_dim,
            feed_forward: meta.int("feed_forward_length")?,
            rms_eps: meta.float("attention.layer_norm_rms_epsilon", 1e-5),
            vocab: content
                .tensor_infos
                .get("token_embd.weight")
                .and_then(|t| t.shape.dims().first().copied())
                .ok_or("no `token_embd.weight` matrix")?,
            rope_base,
            // llama.cpp's Gemma 3 default; newer files name it.
            rope_base_local: meta
                .opt_float("rope.freq_base_swa")
                .or_else(|| meta.opt_float("rope.local_freq_base"))
                .unwrap_or(if gemma { 1e4 } else { rope_base }),
            rope_scale: rope_scale(&meta)?,
            neox: gemma,
            window: if gemma {
                meta.opt_int("attention.sliding_window").unwrap_or(0)
            } else {
                0
            },
            window_pattern: meta
                .opt_int("attention.sliding_window_pattern")
                .unwrap_or(6),
            // Gemma 3 27B (62 layers) scales by its width per head, as
            // llama.cpp does; every other model by the head's width.
            attn_scale: if gemma && layers == 62 {
                1.0 / ((embedding / heads) as f32).sqrt()
            } else {
                1.0 / (head_dim as f32).sqrt()
            },
            embed_scale: if gemma {
                (embedding as f32).sqrt()
            } else {
                1.0
            },
        })
    }
}

/// The linear scaling of positions; rope scaling of another kind (YaRN,
/// LongRoPE) is refused. Llama 3.1's scaling is not metadata but the
/// `rope_freqs.weight` tensor ([`RopeTable`]'s `factors`).
fn rope_scale(meta: &Meta) -> Result<f32, LoadError> {
    let kind = meta
        .content
        .metadata
        .get(&format!("{}.rope.scaling.type", meta.arch))
        .and_then(|v| v.to_string().ok().cloned());
    let factor = meta
        .opt_float("rope.scaling.factor")
        .or_else(|| meta.opt_float("rope.scale_linear"));
    match (kind.as_deref(), factor) {
        (None | Some("linear"), Some(f)) if f > 0.0 => Ok(1.0 / f),
        (None | Some("none") | Some("linear"), _) => Ok(1.0),
        (Some(other), _) => Err(format!(
            "rope scaling `{other}` is not supported (only linear scaling and Llama 3's `rope_freqs.weight`)"
        )),
    }
}

struct Meta<'a> {
    content: &'a Content,
    arch: &'a str,
}

impl Meta<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.content.metadata.get(&format!("{}.{key}", self.arch))
    }

    fn opt_int(&self, key: &str) -> Option<usize> {
        self.get(key)
            .and_then(crate::file::integer)
            .map(|v| v as usize)
    }

    fn int(&self, key: &str) -> Result<usize, LoadError> {
        self.opt_int(key)
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("no positive `{}.{key}` in the metadata", self.arch))
    }

    fn opt_float(&self, key: &str) -> Option<f32> {
        match self.get(key)? {
            Value::F64(v) => Some(*v as f32),
            v => v.to_f32().ok(),
        }
    }

    fn float(&self, key: &str, default: f32) -> f32 {
        self.opt_float(key).unwrap_or(default)
    }
}

/// cos and sin of each position's angle for each rotated pair,
/// `context × head_dim / 2`: angle = pos · scale · base^(−2i/d) / factor_i,
/// as llama.cpp's rope computes it (Llama 3.1's `rope_freqs.weight` are the
/// factors).
pub struct RopeTable {
    /// cos of each (position, pair)'s angle.
    pub cos: Vec<f32>,
    /// sin of each (position, pair)'s angle.
    pub sin: Vec<f32>,
}

impl RopeTable {
    /// The table of `context` positions for heads of `head_dim`.
    pub fn new(
        head_dim: usize,
        base: f32,
        scale: f32,
        factors: Option<&[f32]>,
        context: usize,
    ) -> RopeTable {
        let pairs = head_dim / 2;
        let freqs: Vec<f32> = (0..pairs)
            .map(|i| {
                let f = 1.0 / base.powf((2 * i) as f32 / head_dim as f32);
                f * scale / factors.map_or(1.0, |x| x[i])
            })
            .collect();
        let mut cos = Vec::with_capacity(context * pairs);
        let mut sin = Vec::with_capacity(context * pairs);
        for pos in 0..context {
            for f in &freqs {
                let angle = pos as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        RopeTable { cos, sin }
    }
}
