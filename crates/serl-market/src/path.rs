//! The fundamental price path a simulated day is built around.
//!
//! Copying the real day's minute path would copy its accidents too: a single
//! day has a few hundred returns, often thin-tailed, and every seed would
//! share them. Instead the path is anchored to the real day every
//! `anchor_minutes` and filled in between by a stochastic-volatility process
//! with Student-t shocks (a Brownian bridge on the log price). The day keeps
//! the real open, the real half-hourly path and the real intraday volatility
//! profile, while the minute returns get what real markets show across many
//! days: heavy tails and volatility clustering, different for every seed.

use rand::Rng;
use rand_distr::{ChiSquared, Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

/// How the fundamental fills in the real day between anchors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PathModel {
    /// Minutes between points where the path equals the real day's price.
    /// 1 replays the real minute path exactly.
    pub anchor_minutes: usize,
    /// Degrees of freedom of the Student-t shocks (> 2; smaller is heavier).
    pub tail_dof: f64,
    /// Per-minute persistence of log volatility (AR(1) coefficient).
    pub vol_persistence: f64,
    /// Standard deviation of the log-volatility innovations.
    pub vol_of_vol: f64,
    /// Scales the fundamental's variance between anchors. The book follows
    /// the fundamental with a lag of a second or two, which smooths away
    /// part of its minute variance; this puts it back so that the
    /// simulated mid's realised volatility matches the real day's.
    pub variance_scale: f64,
}

impl Default for PathModel {
    fn default() -> Self {
        PathModel {
            anchor_minutes: 130,
            tail_dof: 5.0,
            vol_persistence: 0.95,
            vol_of_vol: 0.2,
            variance_scale: 1.5,
        }
    }
}

impl PathModel {
    /// The log-price path (one value per minute, the first is `ln p[0]`)
    /// for the real minute prices `p`, drawn with `rng`.
    pub fn log_path(&self, p: &[f64], rng: &mut impl Rng) -> Vec<f64> {
        let x: Vec<f64> = p.iter().map(|v| v.max(1e-9).ln()).collect();
        let n = x.len();
        if self.anchor_minutes <= 1 || n < 3 {
            return x;
        }
        let dof = self.tail_dof.max(2.1);
        let chi = ChiSquared::new(dof).expect("dof > 0");
        let t_scale = ((dof - 2.0) / dof).sqrt();
        let phi = self.vol_persistence.clamp(0.0, 0.999);
        let h_var = self.vol_of_vol.powi(2) / (1.0 - phi * phi);
        let mut h = rng.sample::<f64, _>(StandardNormal) * h_var.sqrt();
        let mut out = vec![x[0]; n];
        let mut a = 0;
        while a < n - 1 {
            let b = (a + self.anchor_minutes).min(n - 1);
            let len = (b - a) as f64;
            let drift = x[b] - x[a];
            // The real segment's realised variance, less what its net move
            // will add through the bridge, spread over its minutes.
            let rv: f64 = (a + 1..=b).map(|i| (x[i] - x[i - 1]).powi(2)).sum();
            let var = (rv - drift * drift / len).max(0.2 * rv) / (len + 1.0)
                * self.variance_scale.max(0.0);
            let mut shocks = Vec::with_capacity(b - a);
            for _ in a..b {
                h = phi * h + self.vol_of_vol * rng.sample::<f64, _>(StandardNormal);
                let sigma = (h - h_var).exp();
                let z: f64 = rng.sample(StandardNormal);
                let t = z / (chi.sample(rng) / dof).sqrt() * t_scale;
                shocks.push(var.sqrt() * sigma * t);
            }
            let bridge = (drift - shocks.iter().sum::<f64>()) / len;
            let mut level = out[a];
            for (i, s) in shocks.iter().enumerate() {
                level += s + bridge;
                out[a + 1 + i] = level;
            }
            out[b] = x[b];
            a = b;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn the_path_meets_the_real_day_at_every_anchor() {
        let p: Vec<f64> = (0..390).map(|m| 100.0 + (m as f64 / 20.0).sin()).collect();
        let model = PathModel::default();
        let path = model.log_path(&p, &mut SmallRng::seed_from_u64(7));
        for m in (0..390).step_by(130).chain([389]) {
            assert!((path[m] - p[m].ln()).abs() < 1e-12, "minute {m}");
        }
        assert_ne!(path[15], p[15].ln());
        let exact = PathModel {
            anchor_minutes: 1,
            ..model
        };
        let replay = exact.log_path(&p, &mut SmallRng::seed_from_u64(7));
        assert!(replay.iter().zip(&p).all(|(a, b)| *a == b.ln()));
    }
}
