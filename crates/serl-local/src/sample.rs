//! Seeded sampling: temperature, nucleus (top-p), and an optional mask of
//! the tokens the grammar allows. The same seed, logits and mask give the
//! same token on every machine.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// How tokens are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// Softmax temperature; 0 picks the most likely token.
    pub temperature: f64,
    /// Nucleus sampling: draw from the smallest set of most likely tokens
    /// whose probabilities sum to at least this (1 = all tokens).
    pub top_p: f64,
    /// The generator's seed.
    pub seed: u64,
}

/// A seeded sampler.
pub struct Sampler {
    sampling: Sampling,
    rng: SmallRng,
    scratch: Vec<(u32, f64)>,
}

impl Sampler {
    /// A sampler seeded with `sampling.seed`.
    pub fn new(sampling: Sampling) -> Sampler {
        Sampler {
            sampling,
            rng: SmallRng::seed_from_u64(sampling.seed),
            scratch: Vec::new(),
        }
    }

    /// A token from `logits`, among those `allowed` accepts; `None` when it
    /// accepts none.
    pub fn sample(&mut self, logits: &[f32], allowed: impl Fn(u32) -> bool) -> Option<u32> {
        self.scratch.clear();
        self.scratch.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(t, l)| l.is_finite() && allowed(*t as u32))
                .map(|(t, l)| (t as u32, *l as f64)),
        );
        if self.scratch.is_empty() {
            return None;
        }
        // Ties and equal probabilities are broken by token id, so the
        // order (and the draw) does not depend on the sort's stability.
        self.scratch
            .sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let t = self.sampling.temperature;
        if t <= 0.0 {
            return Some(self.scratch[0].0);
        }
        let top = self.scratch[0].1;
        let mut total = 0.0;
        for e in self.scratch.iter_mut() {
            e.1 = ((e.1 - top) / t).exp();
            total += e.1;
        }
        let mut kept = 0.0;
        let mut n = 0;
        for e in &self.scratch {
            kept += e.1;
            n += 1;
            if kept >= self.sampling.top_p.clamp(0.0, 1.0) * total {
                break;
            }
        }
        let mut draw = self.rng.random::<f64>() * kept;
        for e in &self.scratch[..n] {
            draw -= e.1;
            if draw <= 0.0 {
                return Some(e.0);
            }
        }
        Some(self.scratch[n - 1].0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_tokens_and_the_mask_is_obeyed() {
        let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32 * 0.3).collect();
        let draw = |seed| {
            let mut s = Sampler::new(Sampling {
                temperature: 1.0,
                top_p: 0.9,
                seed,
            });
            (0..100)
                .map(|_| s.sample(&logits, |t| t % 3 == 0).unwrap())
                .collect::<Vec<_>>()
        };
        let a = draw(7);
        assert_eq!(a, draw(7));
        assert_ne!(a, draw(8));
        assert!(a.iter().all(|t| t % 3 == 0));
        let mut greedy = Sampler::new(Sampling {
            temperature: 0.0,
            top_p: 1.0,
            seed: 0,
        });
        assert_eq!(greedy.sample(&logits, |_| true), Some(6));
        assert_eq!(greedy.sample(&logits, |_| false), None);
    }
}
