//! What a real session says about the day to simulate, and the pilot days
//! that fit the noise traders' arrival rates to its volume.

use serde::{Deserialize, Serialize};

use super::{MarketConfig, Simulator};

/// What a real session says about the day to simulate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Price of one tick in dollars (0.01).
    pub tick: f64,
    /// The real minute price path, one per session minute, in dollars.
    pub minute_price: Vec<f64>,
    /// The real (or expected) volume per session minute, in shares.
    pub minute_volume: Vec<f64>,
    /// Typical spread in bps.
    pub spread_bps: f64,
    /// Per-minute multipliers of the noise traders' arrival rate (empty:
    /// all 1), from [`fit_noise_volume`].
    #[serde(default)]
    pub noise_scale: Vec<f64>,
}

/// How many pilot days [`fit_noise_volume`] spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitEffort {
    /// One pilot day.
    Quick,
    /// Two pilot days, refitted once: four.
    Full,
}

/// Fits the noise traders' per-minute arrival rates so that the simulated
/// volume of each half hour matches the real one. The other traders' volume
/// depends on how much the price moves against the book, which no formula
/// gives in advance, so pilot days measure it: each half hour's noise rate
/// is scaled by real / simulated volume (in all bounded to [1/4, 4]).
///
/// `FitEffort::Full` (four pilot days) is what `serl simulate` checks;
/// training environments use `FitEffort::Quick` (one), since every new
/// session an episode draws pays for its fit once.
pub fn fit_noise_volume(
    cal: &Calibration,
    cfg: &MarketConfig,
    seed: u64,
    effort: FitEffort,
) -> Vec<f64> {
    let minutes = cal.minute_price.len();
    let mut cal = cal.clone();
    // The response is not linear in the rate (more noise orders also mean
    // more resting liquidity to trade against), so the full fit refits
    // once, and averages two days, since a day's volume varies with its
    // path.
    let (rounds, days) = match effort {
        FitEffort::Quick => (1, 1),
        FitEffort::Full => (2, 2),
    };
    for _ in 0..rounds {
        let pilots: Vec<Vec<f64>> = (0..days)
            .map(|k| Simulator::new(&cal, cfg, seed + k).finish().volume)
            .collect();
        let mut scale = vec![1.0; minutes];
        for start in (0..minutes).step_by(30) {
            let end = (start + 30).min(minutes);
            let real: f64 = cal
                .minute_volume
                .get(start..end)
                .map_or(0.0, |v| v.iter().sum());
            let sim: f64 = pilots
                .iter()
                .map(|v| v[start..end].iter().sum::<f64>())
                .sum::<f64>()
                / pilots.len() as f64;
            let old = cal.noise_scale.get(start).copied().unwrap_or(1.0);
            let k = if real > 0.0 && sim > 0.0 {
                (real / sim).clamp(0.5, 2.0)
            } else {
                1.0
            };
            scale[start..end].fill((old * k).clamp(0.25, 4.0));
        }
        cal.noise_scale = scale;
    }
    cal.noise_scale
}
