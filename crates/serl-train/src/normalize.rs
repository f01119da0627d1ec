//! Running observation normalisation (Welford), frozen at evaluation and
//! saved with the checkpoint so that a policy sees the same scale later.

use serde::{Deserialize, Serialize};

/// Clip normalised features to ±this, as the reference PPO setups do.
const CLIP: f32 = 10.0;

/// Per-feature running mean and variance (Welford); [`RunningNorm::apply`]
/// maps features to z-scores clipped to ±10.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningNorm {
    /// Rows seen.
    pub count: f64,
    /// Mean of each feature.
    pub mean: Vec<f64>,
    /// Sum of squared deviations from the mean, per feature (variance ×
    /// count).
    pub m2: Vec<f64>,
}

impl RunningNorm {
    /// A normaliser of `dim` features that has seen no rows.
    pub fn new(dim: usize) -> Self {
        RunningNorm {
            count: 0.0,
            mean: vec![0.0; dim],
            m2: vec![0.0; dim],
        }
    }

    /// Features per row.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// Adds rows of `dim()` features.
    pub fn update(&mut self, rows: &[f32]) {
        for row in rows.chunks_exact(self.dim()) {
            self.count += 1.0;
            for (k, &x) in row.iter().enumerate() {
                let x = x as f64;
                let d = x - self.mean[k];
                self.mean[k] += d / self.count;
                self.m2[k] += d * (x - self.mean[k]);
            }
        }
    }

    /// Normalises rows in place.
    pub fn apply(&self, rows: &mut [f32]) {
        let std: Vec<f32> = self
            .m2
            .iter()
            .map(|m2| {
                let var = if self.count > 1.0 {
                    m2 / self.count
                } else {
                    1.0
                };
                (var.sqrt() + 1e-8) as f32
            })
            .collect();
        for row in rows.chunks_exact_mut(self.dim()) {
            for (k, x) in row.iter_mut().enumerate() {
                let z = (*x - self.mean[k] as f32) / std[k];
                *x = if z.is_finite() {
                    z.clamp(-CLIP, CLIP)
                } else {
                    0.0
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalised_features_have_zero_mean_and_unit_variance() {
        let rows: Vec<f32> = (0..1000).flat_map(|i| [i as f32, 5.0]).collect();
        let mut n = RunningNorm::new(2);
        n.update(&rows);
        let mut x = rows.clone();
        n.apply(&mut x);
        let col0: Vec<f32> = x.iter().step_by(2).copied().collect();
        let mean = col0.iter().sum::<f32>() / 1000.0;
        let var = col0.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / 1000.0;
        assert!(
            mean.abs() < 1e-3 && (var - 1.0).abs() < 1e-2,
            "{mean} {var}"
        );
        // A constant feature maps to 0, not to NaN.
        assert!(x.iter().skip(1).step_by(2).all(|v| *v == 0.0));
    }
}
