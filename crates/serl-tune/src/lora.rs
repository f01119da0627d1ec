//! The adapter being trained: per layer and target, `A` (rank × inputs,
//! seeded Kaiming-uniform as PEFT starts it) and `B` (outputs × rank,
//! zero), so that a new adapter computes exactly the base model.

use std::collections::{BTreeMap, HashMap};

use candle_core::{Device, Tensor, Var};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serl_local::{Adapter, AdapterConfig, BaseModel, LowRank, ModelShape, Target};

use crate::TuneError;

/// Trainable low-rank updates.
pub struct Lora {
    config: AdapterConfig,
    /// Per layer: target → (A, B); variables while training, detached
    /// constants in a [`Lora::frozen`] copy.
    layers: Vec<BTreeMap<Target, (Tensor, Tensor)>>,
    /// With dropout: each update's input is masked (training only).
    dropout: Option<Dropout>,
}

struct Dropout {
    p: f32,
    seed: u64,
}

impl Lora {
    /// A new adapter for `shape` on the CPU: `A` drawn with `seed`, `B`
    /// zero.
    pub fn new(shape: &ModelShape, config: AdapterConfig, seed: u64) -> Result<Lora, TuneError> {
        Lora::new_on(shape, config, seed, &Device::Cpu)
    }

    /// [`Lora::new`] on `device` (the same numbers: drawn on the CPU).
    pub fn new_on(
        shape: &ModelShape,
        config: AdapterConfig,
        seed: u64,
        device: &Device,
    ) -> Result<Lora, TuneError> {
        if config.rank == 0 || config.targets.is_empty() {
            return Err(TuneError::Config(
                "a LoRA adapter needs a rank of at least 1 and one target".into(),
            ));
        }
        let mut rng = SmallRng::seed_from_u64(seed);
        let r = config.rank;
        let mut layers = Vec::with_capacity(shape.layers);
        for _ in 0..shape.layers {
            let mut layer = BTreeMap::new();
            for &t in &config.targets {
                let (rows, cols) = shape.projection(t);
                let bound = 1.0 / (cols as f32).sqrt();
                let a: Vec<f32> = (0..r * cols)
                    .map(|_| rng.random_range(-bound..bound))
                    .collect();
                let a = Var::from_tensor(&Tensor::from_vec(a, (r, cols), device)?)?;
                let zeros = Tensor::zeros((rows, r), candle_core::DType::F32, device)?;
                let b = Var::from_tensor(&zeros)?;
                layer.insert(t, (a.as_tensor().clone(), b.as_tensor().clone()));
            }
            layers.push(layer);
        }
        Ok(Lora {
            config,
            layers,
            dropout: None,
        })
    }

    /// Masks each update's input with probability `p`, seeded by `seed`
    /// (a fresh mask per call of [`Lora::with_dropout_seed`]).
    pub fn set_dropout(&mut self, p: f32, seed: u64) {
        self.dropout = (p > 0.0).then_some(Dropout { p, seed });
    }

    /// The adapter with its dropout masks drawn from `seed` (one per
    /// optimizer step, so a resumed run draws the same).
    pub fn with_dropout_seed(&mut self, seed: u64) {
        if let Some(d) = &mut self.dropout {
            d.seed = seed;
        }
    }

    /// Where the variables live.
    pub fn device(&self) -> Device {
        let first = self.layers.iter().flat_map(|l| l.values()).next();
        first.map_or(Device::Cpu, |(a, _)| a.device().clone())
    }

    /// The configuration.
    pub fn config(&self) -> &AdapterConfig {
        &self.config
    }

    /// The same updates as constants (no gradient, no dropout): for the
    /// prompt's cache.
    pub fn frozen(&self) -> Result<Lora, TuneError> {
        let layers = self
            .layers
            .iter()
            .map(|l| {
                l.iter()
                    .map(|(&t, (a, b))| (t, (a.detach(), b.detach())))
                    .collect()
            })
            .collect();
        Ok(Lora {
            config: self.config.clone(),
            layers,
            dropout: None,
        })
    }

    /// `scale · B (A x)` for the rows of `x`, if layer `i` updates `t`.
    pub fn update(&self, i: usize, t: Target, x: &Tensor) -> Result<Option<Tensor>, TuneError> {
        let Some((a, b)) = self.layers.get(i).and_then(|l| l.get(&t)) else {
            return Ok(None);
        };
        let x = match &self.dropout {
            Some(d) => {
                let salt = (i as u64) << 8 | t as u64;
                let mut rng =
                    SmallRng::seed_from_u64(d.seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let keep = 1.0 / (1.0 - d.p);
                let mask: Vec<f32> = (0..x.elem_count())
                    .map(|_| if rng.random::<f32>() < d.p { 0.0 } else { keep })
                    .collect();
                (x * Tensor::from_vec(mask, x.shape(), x.device())?)?
            }
            None => x.clone(),
        };
        let u = x.matmul(&a.t()?)?.matmul(&b.t()?)?;
        Ok(Some((u * self.config.scale() as f64)?))
    }

    /// Every variable with its name (`blk.{i}.{target}.lora_a`/`_b`), in a
    /// fixed order.
    pub fn vars(&self) -> Vec<(String, Var)> {
        let mut out = Vec::new();
        for (i, layer) in self.layers.iter().enumerate() {
            for (t, (a, b)) in layer {
                // A variable's tensor makes a `Var` sharing its storage.
                let var = |x: &Tensor| Var::from_tensor(x).expect("a variable's tensor");
                out.push((format!("blk.{i}.{}.lora_a", t.name()), var(a)));
                out.push((format!("blk.{i}.{}.lora_b", t.name()), var(b)));
            }
        }
        out
    }

    /// The values by name (copies: a checkpoint's).
    pub fn tensors(&self) -> Result<HashMap<String, Tensor>, TuneError> {
        self.vars()
            .into_iter()
            .map(|(n, v)| Ok((n, v.as_tensor().detach().copy()?)))
            .collect()
    }

    /// Sets the variables from `tensors` (a checkpoint).
    pub fn load(&mut self, tensors: &HashMap<String, Tensor>) -> Result<(), TuneError> {
        for (name, var) in self.vars() {
            let t = tensors
                .get(&name)
                .ok_or_else(|| TuneError::Checkpoint(format!("no `{name}` in the checkpoint")))?;
            var.set(&t.to_device(var.device())?)?;
        }
        Ok(())
    }

    /// The adapter as the engine reads it.
    pub fn to_adapter(&self, base: BaseModel) -> Result<Adapter, TuneError> {
        let mut layers = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let mut out = BTreeMap::new();
            for (&t, (a, b)) in layer {
                let (rows, _) = b.dims2()?;
                let (_, cols) = a.dims2()?;
                out.insert(
                    t,
                    LowRank {
                        a: a.flatten_all()?.to_vec1()?,
                        b: b.flatten_all()?.to_vec1()?,
                        rows,
                        cols,
                    },
                );
            }
            layers.push(out);
        }
        Ok(Adapter {
            base,
            config: self.config.clone(),
            layers,
        })
    }

    /// An adapter read back into variables (to continue training it, or
    /// to compute with it in f32).
    pub fn from_adapter(adapter: &Adapter) -> Result<Lora, TuneError> {
        let mut layers = Vec::with_capacity(adapter.layers.len());
        for layer in &adapter.layers {
            let mut out = BTreeMap::new();
            for (&t, lr) in layer {
                let r = lr.rank();
                let a = Tensor::from_slice(&lr.a, (r, lr.cols), &Device::Cpu)?;
                let b = Tensor::from_slice(&lr.b, (lr.rows, r), &Device::Cpu)?;
                let (a, b) = (Var::from_tensor(&a)?, Var::from_tensor(&b)?);
                out.insert(t, (a.as_tensor().clone(), b.as_tensor().clone()));
            }
            layers.push(out);
        }
        Ok(Lora {
            config: adapter.config.clone(),
            layers,
            dropout: None,
        })
    }
}
