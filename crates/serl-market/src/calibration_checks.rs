//! How close simulated days come to the real session they were calibrated
//! to: opening level, daily volume, the half-hourly volume profile,
//! realised volatility and the typical spread, each a pass/fail
//! [`Check`] with its tolerance.

use crate::facts::Check;
use crate::{Calibration, MinuteStats};

/// Minutes in one bucket of the volume profile.
pub const PROFILE_MINUTES: usize = 30;

/// The seed-averaged simulated days against the real one.
#[derive(Debug, Clone)]
pub struct DayComparison {
    /// The calibration checks, in the order a report lists them.
    pub checks: Vec<Check>,
    /// (half hour, real volume, mean simulated volume) per bucket.
    pub profile: Vec<(usize, f64, f64)>,
}

fn rel(a: f64, b: f64) -> f64 {
    (a / b - 1.0).abs()
}

/// Realised volatility of a price path: the root of summed squared log
/// returns.
fn realised_vol(prices: &[f64]) -> f64 {
    prices
        .windows(2)
        .map(|w| (w[1] / w[0]).ln().powi(2))
        .sum::<f64>()
        .sqrt()
}

/// The mean quoted spread over a day's minutes with a quote, bps.
fn mean_spread_bps(d: &MinuteStats) -> f64 {
    let s: Vec<f64> = d
        .spread
        .iter()
        .zip(&d.mid)
        .filter(|(s, _)| **s > 0.0)
        .map(|(s, m)| s / m * 1e4)
        .collect();
    s.iter().sum::<f64>() / s.len().max(1) as f64
}

/// Compares `days` (one per seed) with the real session `cal` describes,
/// whose typical spread was `real_spread_bps`.
pub fn compare_days(
    cal: &Calibration,
    days: &[MinuteStats],
    real_spread_bps: f64,
) -> DayComparison {
    let n = days.len().max(1) as f64;
    let avg = |f: &dyn Fn(&MinuteStats) -> f64| days.iter().map(f).sum::<f64>() / n;
    let open_err = rel(avg(&|d| d.mid[0]), cal.minute_price[0]);
    let bucket = |v: &[f64], h: usize| {
        v[h * PROFILE_MINUTES..((h + 1) * PROFILE_MINUTES).min(v.len())]
            .iter()
            .sum::<f64>()
    };
    let real_total: f64 = cal.minute_volume.iter().sum();
    let sim_total = avg(&|d| d.volume.iter().sum());
    let mut worst = 0.0f64;
    let mut profile = Vec::new();
    for h in 0..cal.minute_price.len().div_ceil(PROFILE_MINUTES) {
        let r = bucket(&cal.minute_volume, h);
        let s = avg(&|d| bucket(&d.volume, h));
        profile.push((h, r, s));
        if r > 0.0 {
            worst = worst.max(rel(s, r));
        }
    }
    let real_rv = realised_vol(&cal.minute_price);
    let sim_rv = avg(&|d| realised_vol(&d.mid));
    let sim_spread_bps = avg(&mean_spread_bps);
    let check = |name: &str, value: String, target: &str, pass: bool| Check {
        name: name.into(),
        value,
        target: target.into(),
        pass,
    };
    let checks = vec![
        check(
            "opening price level",
            format!("{:.3}% off", open_err * 100.0),
            "within 1%",
            open_err < 0.01,
        ),
        check(
            "daily volume",
            format!("{sim_total:.0} vs {real_total:.0}"),
            "within 20%",
            rel(sim_total, real_total) < 0.2,
        ),
        check(
            "volume per half hour (U shape)",
            format!("worst bucket {:.1}% off", worst * 100.0),
            "within 20% per half hour",
            worst < 0.2,
        ),
        check(
            "realised volatility",
            format!("{:.1} vs {:.1} bps", sim_rv * 1e4, real_rv * 1e4),
            "within 25%",
            rel(sim_rv, real_rv) < 0.25,
        ),
        check(
            "typical spread",
            format!("{sim_spread_bps:.2} vs {real_spread_bps:.2} bps"),
            "within 50%",
            rel(sim_spread_bps, real_spread_bps) < 0.5,
        ),
    ];
    DayComparison { checks, profile }
}

/// Each day's 1-minute mid returns, bps, for the stylized facts.
pub fn minute_returns_bps(days: &[MinuteStats]) -> Vec<Vec<f64>> {
    days.iter()
        .map(|d| d.mid.windows(2).map(|w| (w[1] / w[0]).ln() * 1e4).collect())
        .collect()
}

/// The mean resting size of the top five levels over `days`.
pub fn mean_depth(days: &[MinuteStats]) -> [f64; 5] {
    let mut depth = [0.0; 5];
    for d in days {
        for (acc, v) in depth.iter_mut().zip(d.depth) {
            *acc += v / days.len() as f64;
        }
    }
    depth
}
