//! The metaorder impact study: how far a TWAP execution of a share of the
//! day's volume moves the price, and how much of that move stays.
//!
//! Each seed's day is simulated once without the metaorder and once with it
//! (a buy, and separately a sell), so the difference between the two mid
//! paths is the impact alone: the rest of the day's randomness is shared.
//! Impact is signed so that a buy pushing the price up is positive.
//!
//! Everything public here is re-exported at the crate root.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serl_lob::Side;

use crate::{Calibration, MarketConfig, Simulator, EXECUTION_OWNER};

const US_PER_MIN: u64 = 60_000_000;

/// What [`impact_study`] measures: metaorder sizes, seeds, the TWAP
/// execution window and when the remaining impact is read. The default is
/// 1% to 20% of the day's volume over 30 seeds, executed from minute 30 to
/// 150 in 30-second slices, read 5, 15, 30 and 60 minutes later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactSpec {
    /// Metaorder sizes as shares of the day's volume (0.01 = 1%), each in
    /// (0, 1].
    pub fractions: Vec<f64>,
    /// Simulated days per size and side (at least 1); each costs one day
    /// without the metaorder and two (buy, sell) per size.
    pub seeds: u64,
    /// The first of the seeds `first_seed..first_seed + seeds`.
    pub first_seed: u64,
    /// First minute of the execution window, minutes since the open.
    pub start_minute: usize,
    /// End of the execution window (exclusive), minutes since the open;
    /// the peak impact is read at this minute's close.
    pub end_minute: usize,
    /// Seconds between child orders.
    pub child_interval_s: u64,
    /// Minutes after the window's end at which the remaining impact is read.
    pub decay_minutes: Vec<usize>,
}

impl Default for ImpactSpec {
    fn default() -> Self {
        ImpactSpec {
            fractions: vec![0.01, 0.02, 0.05, 0.10, 0.20],
            seeds: 30,
            first_seed: 1,
            start_minute: 30,
            end_minute: 150,
            child_interval_s: 30,
            decay_minutes: vec![5, 15, 30, 60],
        }
    }
}

/// The result for one metaorder size, over seeds and both sides.
#[derive(Debug, Clone, Serialize)]
pub struct ImpactRow {
    /// The metaorder's size as a share of the day's volume (0.01 = 1%).
    pub fraction: f64,
    /// Shares executed (the target; a thin book may fill less).
    pub shares: f64,
    /// Mean impact at the window's end, bps.
    pub peak_bps: f64,
    /// 95% confidence interval of `peak_bps` (mean ± 1.96 standard
    /// errors), bps.
    pub peak_ci: (f64, f64),
    /// Mean impact `decay_minutes[k]` minutes after the end, bps.
    pub after_bps: Vec<f64>,
    /// Mean impact per minute from the window's start to the last decay
    /// reading, bps.
    pub path_bps: Vec<f64>,
    /// Simulated days averaged: seeds × 2 sides.
    pub samples: usize,
}

/// What [`impact_study`] found: one row per metaorder size, the window it
/// was executed in, and the fitted exponent of the impact law.
#[derive(Debug, Clone, Serialize)]
pub struct ImpactStudy {
    /// One row per size, in the order of [`ImpactSpec::fractions`].
    pub rows: Vec<ImpactRow>,
    /// Minutes after the window's end at which `after_bps` was read.
    pub decay_minutes: Vec<usize>,
    /// First minute of the execution window, minutes since the open.
    pub start_minute: usize,
    /// End of the execution window (exclusive), minutes since the open.
    pub end_minute: usize,
    /// The fitted δ in I ∝ (Q/V)^δ (least squares in logs), with its
    /// standard error; `None` when fewer than two sizes moved the price.
    pub delta: Option<(f64, f64)>,
}

/// Why [`impact_study`] cannot run an [`ImpactSpec`] on a calibration.
#[derive(Debug, thiserror::Error)]
pub enum ImpactError {
    /// The window (start, end, minutes) is empty, or it and its last decay
    /// reading do not fit in the session's minutes.
    #[error("the execution window {0}..{1} is empty or outside the {2}-minute session")]
    Window(usize, usize, usize),
    /// A metaorder size outside (0, 1] of the day's volume.
    #[error("metaorder size {0} is not a share of the day's volume in (0, 1]")]
    Fraction(f64),
    /// The calibration's minute volumes sum to zero.
    #[error("the calibration has no volume to take a share of")]
    NoVolume,
}

/// One seed's signed impact paths, per size and side (buy, sell), in bps
/// per minute from the window's start to the last decay reading: what
/// [`impact_study`] runs for each seed, and a cluster task runs for one.
pub type SeedPaths = Vec<[Vec<f64>; 2]>;

/// Checks `spec` against the calibration; the day's volume.
fn check_spec(cal: &Calibration, spec: &ImpactSpec) -> Result<f64, ImpactError> {
    let minutes = cal.minute_price.len();
    if spec.start_minute >= spec.end_minute || last_reading(spec) >= minutes {
        return Err(ImpactError::Window(
            spec.start_minute,
            spec.end_minute,
            minutes,
        ));
    }
    if let Some(&f) = spec.fractions.iter().find(|f| !(**f > 0.0 && **f <= 1.0)) {
        return Err(ImpactError::Fraction(f));
    }
    let daily: f64 = cal.minute_volume.iter().sum();
    if daily <= 0.0 {
        return Err(ImpactError::NoVolume);
    }
    Ok(daily)
}

fn last_reading(spec: &ImpactSpec) -> usize {
    spec.end_minute + spec.decay_minutes.iter().copied().max().unwrap_or(0)
}

/// Seed `first_seed + k` of the study: a day without the metaorder and,
/// for each size, a day with a TWAP buy and one with a TWAP sell.
pub fn impact_seed(
    cal: &Calibration,
    cfg: &MarketConfig,
    spec: &ImpactSpec,
    k: u64,
) -> Result<SeedPaths, ImpactError> {
    let daily = check_spec(cal, spec)?;
    let seed = spec.first_seed + k;
    let quiet = Simulator::new(cal, cfg, seed).finish();
    Ok(spec
        .fractions
        .iter()
        .map(|&f| {
            [Side::Bid, Side::Ask].map(|side| {
                let pushed = run_metaorder(cal, cfg, seed, spec, side, f * daily);
                let sign = if side == Side::Bid { 1.0 } else { -1.0 };
                (spec.start_minute..=last_reading(spec))
                    .map(|m| sign * (pushed.mid[m] / quiet.mid[m]).ln() * 1e4)
                    .collect()
            })
        })
        .collect())
}

/// Runs the study: [`impact_seed`] for each seed (in parallel), then
/// [`impact_summary`]; `progress` is called once per finished seed.
pub fn impact_study(
    cal: &Calibration,
    cfg: &MarketConfig,
    spec: &ImpactSpec,
    progress: &(dyn Fn() + Sync),
) -> Result<ImpactStudy, ImpactError> {
    check_spec(cal, spec)?;
    let paths = (0..spec.seeds.max(1))
        .into_par_iter()
        .map(|k| {
            let p = impact_seed(cal, cfg, spec, k);
            progress();
            p
        })
        .collect::<Result<Vec<_>, _>>()?;
    impact_summary(cal, spec, &paths)
}

/// The study from every seed's paths (`paths[k]` of seed `first_seed + k`):
/// peak impact with its CI per size, decay, the fitted exponent.
pub fn impact_summary(
    cal: &Calibration,
    spec: &ImpactSpec,
    paths: &[SeedPaths],
) -> Result<ImpactStudy, ImpactError> {
    let daily = check_spec(cal, spec)?;
    let end_at = spec.end_minute - spec.start_minute;
    let rows: Vec<ImpactRow> = spec
        .fractions
        .iter()
        .enumerate()
        .map(|(i, &fraction)| {
            let samples: Vec<&Vec<f64>> = paths.iter().flat_map(|p| p[i].iter()).collect();
            let at = |off: usize| -> Vec<f64> { samples.iter().map(|p| p[off]).collect() };
            let peak = at(end_at);
            let (mean, se) = mean_se(&peak);
            ImpactRow {
                fraction,
                shares: fraction * daily,
                peak_bps: mean,
                peak_ci: (mean - 1.96 * se, mean + 1.96 * se),
                after_bps: spec
                    .decay_minutes
                    .iter()
                    .map(|d| mean_se(&at(end_at + d)).0)
                    .collect(),
                path_bps: (0..samples[0].len()).map(|o| mean_se(&at(o)).0).collect(),
                samples: peak.len(),
            }
        })
        .collect();
    Ok(ImpactStudy {
        delta: fit_exponent(&rows),
        rows,
        decay_minutes: spec.decay_minutes.clone(),
        start_minute: spec.start_minute,
        end_minute: spec.end_minute,
    })
}

/// One seed's day with a TWAP metaorder of `shares` on `side`.
fn run_metaorder(
    cal: &Calibration,
    cfg: &MarketConfig,
    seed: u64,
    spec: &ImpactSpec,
    side: Side,
    shares: f64,
) -> crate::MinuteStats {
    let mut sim = Simulator::new(cal, cfg, seed);
    let start = spec.start_minute as u64 * US_PER_MIN;
    let end = spec.end_minute as u64 * US_PER_MIN;
    let step = spec.child_interval_s.max(1) * 1_000_000;
    let children = (end - start).div_ceil(step);
    let mut sent = 0.0;
    for c in 0..children {
        sim.run_until(start + c * step);
        // Whole shares, spread so that the rounding never drifts.
        let due = (shares * (c + 1) as f64 / children as f64).round();
        let qty = (due - sent).max(0.0);
        if qty >= 1.0 {
            sim.execute_market(EXECUTION_OWNER, side, qty as u64);
        }
        sent = due;
    }
    sim.finish()
}

fn mean_se(x: &[f64]) -> (f64, f64) {
    let n = x.len().max(1) as f64;
    let m = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (m, (var / n).sqrt())
}

/// Least squares of ln I on ln(Q/V) over the sizes with positive impact.
fn fit_exponent(rows: &[ImpactRow]) -> Option<(f64, f64)> {
    let pts: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.peak_bps > 0.0)
        .map(|r| (r.fraction.ln(), r.peak_bps.ln()))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let resid: f64 = pts
        .iter()
        .map(|p| (p.1 - my - slope * (p.0 - mx)).powi(2))
        .sum();
    let se = if pts.len() > 2 {
        (resid / (n - 2.0) / sxx).sqrt()
    } else {
        f64::NAN
    };
    Some((slope, se))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exponent_of_a_square_root_law_is_one_half() {
        let rows: Vec<ImpactRow> = [0.01, 0.04, 0.16]
            .iter()
            .map(|&f: &f64| ImpactRow {
                fraction: f,
                shares: 0.0,
                peak_bps: 30.0 * f.sqrt(),
                peak_ci: (0.0, 0.0),
                after_bps: vec![],
                path_bps: vec![],
                samples: 1,
            })
            .collect();
        let (d, _) = fit_exponent(&rows).unwrap();
        assert!((d - 0.5).abs() < 1e-9);
    }
}
