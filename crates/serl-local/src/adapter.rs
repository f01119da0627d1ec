//! Low-rank adapters (LoRA) on the decoder's projections: the file format
//! that `serl llm finetune` writes and the engine reads, and the update
//! the engine adds at inference.
//!
//! An adapter is a directory with `adapter.json` (the base model's name and
//! hash, rank, alpha, targets) and `adapter.safetensors` (per layer and
//! target, `blk.{i}.{target}.lora_a`, rank × input, and `.lora_b`, output ×
//! rank). A projection `y = W x` becomes `y = W x + (alpha / rank) B (A x)`,
//! applied unmerged: the base keeps its 4- or 8-bit blocks (merging would
//! mean re-quantizing, and the low-rank product costs a few percent of the
//! projection at rank 8).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;

use candle_core::{Device, Tensor};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::engine::simd::dot_lanes;

use crate::error::LocalError;

/// A projection an adapter can update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// The queries.
    Q,
    /// The keys.
    K,
    /// The values.
    V,
    /// The attention's output.
    O,
    /// The feed-forward gate.
    Gate,
    /// The feed-forward up projection.
    Up,
    /// The feed-forward down projection.
    Down,
}

impl Target {
    /// Every target, in the order the layer computes them.
    pub const ALL: [Target; 7] = [
        Target::Q,
        Target::K,
        Target::V,
        Target::O,
        Target::Gate,
        Target::Up,
        Target::Down,
    ];

    /// The name in files and configs (`q`, `k`, `v`, `o`, `gate`, `up`,
    /// `down`).
    pub fn name(self) -> &'static str {
        match self {
            Target::Q => "q",
            Target::K => "k",
            Target::V => "v",
            Target::O => "o",
            Target::Gate => "gate",
            Target::Up => "up",
            Target::Down => "down",
        }
    }

    /// The target named `name`, if any.
    pub fn parse(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// The model an adapter was trained on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseModel {
    /// The file's name, for messages.
    pub file: String,
    /// BLAKE3 of the whole file ([`model_hash`]).
    pub hash: String,
}

/// The adapter's shape and scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdapterConfig {
    /// The rank of each update.
    pub rank: usize,
    /// The updates are scaled by `alpha / rank`.
    pub alpha: f32,
    /// The projections updated.
    pub targets: Vec<Target>,
}

impl AdapterConfig {
    /// `alpha / rank`.
    pub fn scale(&self) -> f32 {
        self.alpha / self.rank.max(1) as f32
    }
}

/// One projection's update: `B (A x)`, both row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct LowRank {
    /// `rank × cols`.
    pub a: Vec<f32>,
    /// `rows × rank`.
    pub b: Vec<f32>,
    /// The projection's outputs.
    pub rows: usize,
    /// The projection's inputs.
    pub cols: usize,
}

impl LowRank {
    /// The rank.
    pub fn rank(&self) -> usize {
        self.a.len() / self.cols.max(1)
    }
}

/// A [`LowRank`] as the engine multiplies it: `Bᵀ` scaled (`rank ×
/// rows`), so that the update is `rank` vectorized row additions.
pub(crate) struct Prepared {
    a: Vec<f32>,
    bt: Vec<f32>,
    rows: usize,
    cols: usize,
}

impl Prepared {
    pub(crate) fn new(lr: &LowRank, scale: f32) -> Prepared {
        let r = lr.rank();
        let mut bt = vec![0f32; r * lr.rows];
        for (j, row) in lr.b.chunks_exact(r.max(1)).enumerate() {
            for (k, &v) in row.iter().enumerate() {
                bt[k * lr.rows + j] = v * scale;
            }
        }
        Prepared {
            a: lr.a.clone(),
            bt,
            rows: lr.rows,
            cols: lr.cols,
        }
    }

    /// Adds `B (A x)` for each row `x` of `input` (`cols` wide) to the
    /// matching row of `out` at `offset` (rows of `stride`); a prompt's
    /// rows are shared among the threads.
    pub(crate) fn add(&self, input: &[f32], out: &mut [f32], offset: usize, stride: usize) {
        let one = |x: &[f32], o: &mut [f32]| {
            let o = &mut o[offset..offset + self.rows];
            for (a, bt) in self
                .a
                .chunks_exact(self.cols)
                .zip(self.bt.chunks_exact(self.rows))
            {
                let ax = dot_lanes(a, x);
                for (o, b) in o.iter_mut().zip(bt) {
                    *o += ax * b;
                }
            }
        };
        if input.len() > self.cols {
            let rows = input
                .par_chunks_exact(self.cols)
                .zip(out.par_chunks_exact_mut(stride));
            rows.for_each(|(x, o)| one(x, o));
        } else {
            let rows = input
                .chunks_exact(self.cols)
                .zip(out.chunks_exact_mut(stride));
            rows.for_each(|(x, o)| one(x, o));
        }
    }
}

/// A trained adapter.
#[derive(Debug, Clone, PartialEq)]
pub struct Adapter {
    /// The model it was trained on.
    pub base: BaseModel,
    /// Its shape.
    pub config: AdapterConfig,
    /// Per layer, the updates of its targets.
    pub layers: Vec<BTreeMap<Target, LowRank>>,
}

const META: &str = "adapter.json";
const WEIGHTS: &str = "adapter.safetensors";

#[derive(Serialize, Deserialize)]
struct AdapterMeta {
    format: u32,
    base: BaseModel,
    config: AdapterConfig,
    layers: usize,
}

impl Adapter {
    /// Writes `dir/adapter.json` and `dir/adapter.safetensors`.
    pub fn save(&self, dir: &Path) -> Result<(), LocalError> {
        let fail = |p: &Path, e: &dyn std::fmt::Display| LocalError::Write {
            path: p.display().to_string(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(dir).map_err(|e| fail(dir, &e))?;
        let mut tensors = HashMap::new();
        for (i, layer) in self.layers.iter().enumerate() {
            for (t, lr) in layer {
                let name = format!("blk.{i}.{}", t.name());
                let a = Tensor::from_slice(&lr.a, (lr.rank(), lr.cols), &Device::Cpu)?;
                let b = Tensor::from_slice(&lr.b, (lr.rows, lr.rank()), &Device::Cpu)?;
                tensors.insert(format!("{name}.lora_a"), a);
                tensors.insert(format!("{name}.lora_b"), b);
            }
        }
        let weights = dir.join(WEIGHTS);
        candle_core::safetensors::save(&tensors, &weights).map_err(|e| fail(&weights, &e))?;
        let meta = AdapterMeta {
            format: 1,
            base: self.base.clone(),
            config: self.config.clone(),
            layers: self.layers.len(),
        };
        let path = dir.join(META);
        let text = serde_json::to_string_pretty(&meta).map_err(|e| fail(&path, &e))?;
        std::fs::write(&path, text).map_err(|e| fail(&path, &e))
    }

    /// Reads an adapter directory written by [`Adapter::save`].
    pub fn load(dir: &Path) -> Result<Adapter, LocalError> {
        let bad = |p: &Path, m: String| LocalError::Adapter {
            path: p.display().to_string(),
            message: m,
        };
        let path = dir.join(META);
        let text = std::fs::read_to_string(&path).map_err(|e| bad(&path, e.to_string()))?;
        let meta: AdapterMeta =
            serde_json::from_str(&text).map_err(|e| bad(&path, e.to_string()))?;
        if meta.config.rank == 0 {
            return Err(bad(&path, "`config.rank` is 0".into()));
        }
        let weights = dir.join(WEIGHTS);
        let tensors = candle_core::safetensors::load(&weights, &Device::Cpu)
            .map_err(|e| bad(&weights, e.to_string()))?;
        let mut layers = Vec::with_capacity(meta.layers);
        for i in 0..meta.layers {
            let mut layer = BTreeMap::new();
            for &t in &meta.config.targets {
                let name = format!("blk.{i}.{}", t.name());
                let get = |part: &str| -> Result<(Vec<f32>, usize, usize), LocalError> {
                    let key = format!("{name}.{part}");
                    let tensor = tensors
                        .get(&key)
                        .ok_or_else(|| bad(&weights, format!("no `{key}` tensor")))?;
                    let (r, c) = tensor.dims2().map_err(|e| bad(&weights, e.to_string()))?;
                    let v = tensor
                        .flatten_all()
                        .and_then(|t| t.to_vec1::<f32>())
                        .map_err(|e| bad(&weights, format!("`{key}`: {e}")))?;
                    Ok((v, r, c))
                };
                let (a, ra, cols) = get("lora_a")?;
                let (b, rows, rb) = get("lora_b")?;
                if ra != meta.config.rank || rb != meta.config.rank {
                    return Err(bad(
                        &weights,
                        format!(
                            "`{name}` has rank {ra}/{rb}, the config says {}",
                            meta.config.rank
                        ),
                    ));
                }
                layer.insert(t, LowRank { a, b, rows, cols });
            }
            layers.push(layer);
        }
        Ok(Adapter {
            base: meta.base,
            config: meta.config,
            layers,
        })
    }

    /// The update of `target` in layer `layer`, if the adapter has one.
    pub fn get(&self, layer: usize, target: Target) -> Option<&LowRank> {
        self.layers.get(layer).and_then(|l| l.get(&target))
    }
}

/// BLAKE3 of the whole file at `path`, in hex: what an adapter names its
/// base model by, so that an adapter is never run on another model.
pub fn model_hash(path: &Path) -> Result<String, LocalError> {
    let unreadable = |e: std::io::Error| LocalError::Unreadable {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let mut file = std::fs::File::open(path).map_err(unreadable)?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(unreadable)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().to_hex().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_rank_adds_the_scaled_product() {
        // A = [1 2], B = [[1], [3]]: x = (1, 1) gives A x = 3, B (A x) = (3, 9).
        let lr = LowRank {
            a: vec![1.0, 2.0],
            b: vec![1.0, 3.0],
            rows: 2,
            cols: 2,
        };
        let mut out = vec![10.0, 0.0, 0.0, 20.0, 10.0, 0.0, 0.0, 20.0];
        Prepared::new(&lr, 0.5).add(&[1.0, 1.0, 1.0, 1.0], &mut out, 1, 4);
        assert_eq!(out, vec![10.0, 1.5, 4.5, 20.0, 10.0, 1.5, 4.5, 20.0]);
    }

    #[test]
    fn an_adapter_reads_back_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let lr = LowRank {
            a: vec![0.25, -1.0, 2.0, 0.5],
            b: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            rows: 3,
            cols: 2,
        };
        let adapter = Adapter {
            base: BaseModel {
                file: "m.gguf".into(),
                hash: "abc".into(),
            },
            config: AdapterConfig {
                rank: 2,
                alpha: 4.0,
                targets: vec![Target::Q, Target::Down],
            },
            layers: vec![BTreeMap::from([
                (Target::Q, lr.clone()),
                (Target::Down, lr),
            ])],
        };
        adapter.save(dir.path()).unwrap();
        assert_eq!(Adapter::load(dir.path()).unwrap(), adapter);
        std::fs::write(dir.path().join(META), "{").unwrap();
        let err = Adapter::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("adapter.json"), "{err}");
    }
}
