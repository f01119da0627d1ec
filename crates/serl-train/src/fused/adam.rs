//! Adam's moments for one network's tensors, stepped as burn's Adam steps
//! them (the same bias corrections and epsilon), so a fused training and a
//! burn training of the same network agree.

use serde::{Deserialize, Serialize};

/// A zero tensor of each tensor's size.
pub(super) fn zeros_like(tensors: &[Vec<f32>]) -> Vec<Vec<f32>> {
    tensors.iter().map(|t| vec![0.0; t.len()]).collect()
}

/// Adam's moments for every tensor of one network, as burn keeps them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdamState {
    /// Steps taken (Adam's t, for the bias corrections).
    pub time: i32,
    /// First moment (mean of gradients), one vector per tensor.
    pub moment_1: Vec<Vec<f32>>,
    /// Second moment (mean of squared gradients), one vector per tensor.
    pub moment_2: Vec<Vec<f32>>,
}

const BETA_1: f32 = 0.9;

const BETA_2: f32 = 0.999;

impl AdamState {
    pub(super) fn new(params: &[Vec<f32>]) -> Self {
        AdamState {
            time: 0,
            moment_1: zeros_like(params),
            moment_2: zeros_like(params),
        }
    }

    pub(super) fn fits(&self, params: &[Vec<f32>]) -> bool {
        let same = |m: &[Vec<f32>]| {
            m.len() == params.len() && m.iter().zip(params).all(|(a, b)| a.len() == b.len())
        };
        same(&self.moment_1) && same(&self.moment_2)
    }

    /// Clips each tensor's gradient to `max_norm` and takes one Adam step.
    pub(super) fn step(
        &mut self,
        params: &mut [Vec<f32>],
        grads: &mut [Vec<f32>],
        lr: f32,
        max_norm: f32,
    ) {
        self.time += 1;
        let correction_2 = (1.0 - BETA_2.powi(self.time)).sqrt();
        let factor = correction_2 / (1.0 - BETA_1.powi(self.time));
        let eps = crate::ppo::ADAM_EPSILON as f32 * correction_2;
        for (((p, g), m1), m2) in params
            .iter_mut()
            .zip(grads.iter_mut())
            .zip(&mut self.moment_1)
            .zip(&mut self.moment_2)
        {
            let norm = g.iter().map(|v| v * v).sum::<f32>().sqrt();
            let clip = (max_norm / (norm + f32::MIN_POSITIVE)).min(1.0);
            for (((w, g), m1), m2) in p
                .iter_mut()
                .zip(g.iter())
                .zip(m1.iter_mut())
                .zip(m2.iter_mut())
            {
                let g = g * clip;
                *m1 = BETA_1 * *m1 + (1.0 - BETA_1) * g;
                *m2 = BETA_2 * *m2 + (1.0 - BETA_2) * g * g;
                *w -= lr * *m1 * factor / (m2.sqrt() + eps);
            }
        }
    }
}
