//! AdamW with its moments kept where a checkpoint can write them (candle's
//! optimizer keeps them private), and the gradients clipped by their
//! global norm first.

use std::collections::HashMap;

use candle_core::{Tensor, Var};

use crate::TuneError;

/// The optimizer's state: the moments of each variable, by name.
pub struct AdamW {
    lr: f64,
    weight_decay: f64,
    /// Steps taken (the bias correction's exponent).
    pub steps: u64,
    moments: HashMap<String, (Tensor, Tensor)>,
}

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPS: f64 = 1e-8;

impl AdamW {
    /// A fresh optimizer.
    pub fn new(lr: f64, weight_decay: f64) -> AdamW {
        AdamW {
            lr,
            weight_decay,
            steps: 0,
            moments: HashMap::new(),
        }
    }

    /// One step over `vars` with `grads` (each variable's, in the same
    /// order; `None`: no gradient reached it), clipped to a global norm of at
    /// most `clip` (0: no clipping); returns the norm before clipping.
    pub fn step(
        &mut self,
        vars: &[(String, Var)],
        grads: &[Option<Tensor>],
        clip: f64,
    ) -> Result<f64, TuneError> {
        let mut norm2 = 0f64;
        for g in grads.iter().flatten() {
            norm2 += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
        }
        let norm = norm2.sqrt();
        let factor = if clip > 0.0 && norm > clip {
            clip / norm
        } else {
            1.0
        };
        self.steps += 1;
        let t = self.steps as i32;
        let (c1, c2) = (1.0 - BETA1.powi(t), 1.0 - BETA2.powi(t));
        for ((name, v), g) in vars.iter().zip(grads) {
            let Some(g) = g else {
                continue;
            };
            let g = (g * factor)?;
            let (m, s) = match self.moments.remove(name) {
                Some(ms) => ms,
                None => (g.zeros_like()?, g.zeros_like()?),
            };
            let m = ((m * BETA1)? + (&g * (1.0 - BETA1))?)?;
            let s = ((s * BETA2)? + (g.sqr()? * (1.0 - BETA2))?)?;
            let update = ((&m / c1)? / ((&s / c2)?.sqrt()? + EPS)?)?;
            let x = v.as_tensor();
            let decayed = (x * (1.0 - self.lr * self.weight_decay))?;
            v.set(&(decayed - (update * self.lr)?)?)?;
            self.moments.insert(name.clone(), (m, s));
        }
        Ok(norm)
    }

    /// The moments as named tensors (`{name}.m`, `{name}.v`).
    pub fn tensors(&self) -> HashMap<String, Tensor> {
        let mut out = HashMap::new();
        for (name, (m, s)) in &self.moments {
            out.insert(format!("{name}.m"), m.clone());
            out.insert(format!("{name}.v"), s.clone());
        }
        out
    }

    /// Restores the moments written by [`AdamW::tensors`].
    pub fn load(&mut self, tensors: &HashMap<String, Tensor>, steps: u64) {
        self.steps = steps;
        self.moments.clear();
        for (key, m) in tensors {
            if let Some(name) = key.strip_suffix(".m") {
                if let Some(s) = tensors.get(&format!("{name}.v")) {
                    self.moments
                        .insert(name.to_string(), (m.clone(), s.clone()));
                }
            }
        }
    }
}
