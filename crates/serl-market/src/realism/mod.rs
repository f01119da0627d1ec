//! Realism of simulated order flow against a real LOBSTER day, in the
//! spirit of LOB-Bench: the same statistics measured on the real day and on
//! simulated days written in LOBSTER's format, and a distance per
//! statistic with a bootstrap CI.
//!
//! - [`DayFeatures::measure`] reads a LOBSTER day (real, or a simulator's
//!   [`serl_lob::LobsterRecorder`]) into samples.
//! - [`lobster_calibration`] turns a real day into the agent-based market's
//!   [`Calibration`] (its minute mids, executed volume and spread), so the
//!   simulator plays the same symbol-day.
//! - [`ParametricFlow`] is the baseline the agent-based market has to beat.
//! - [`score`] compares models with the real day, statistic by statistic
//!   ([`STATISTICS`]), giving a [`RealismRow`] each.

mod baseline;
mod distance;
mod features;

pub use baseline::ParametricFlow;
pub use distance::{Distances, Interval, REPLICATES};
pub use features::{
    minute_of_session, DayFeatures, Response, ResponseEvent, Sample, RESPONSE_LAGS,
};

use distance::{distances, interval, into_blocks, resample, Blocks};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;
use serl_lob::{BookRows, LobsterEvent, MessageRow};

use crate::Calibration;

/// The simulator's calibration for a real LOBSTER day: the mid at each
/// minute's end (carried over a minute without a two-sided book), the
/// shares executed in each minute (visible and hidden), and the mean
/// quoted spread. `tick` is one tick in LOBSTER units (100 for a cent).
pub fn lobster_calibration(messages: &[MessageRow], rows: &BookRows, tick: i64) -> Calibration {
    lobster_calibration_window(messages, rows, tick, 0..crate::SESSION_MINUTES as usize)
}

/// [`lobster_calibration`] for the session's minutes `minutes` (0: 09:30):
/// part of a day, its messages outside the window ignored.
pub fn lobster_calibration_window(
    messages: &[MessageRow],
    rows: &BookRows,
    tick: i64,
    minutes: std::ops::Range<usize>,
) -> Calibration {
    let first = minutes.start;
    let minutes = minutes.len().max(1);
    let mut price = vec![f64::NAN; minutes];
    let mut volume = vec![0.0; minutes];
    let (mut spread_sum, mut spread_n) = (0.0, 0usize);
    for (i, m) in messages.iter().enumerate().take(rows.len()) {
        let Some(minute) = (features::minute_of(m.time) as usize)
            .checked_sub(first)
            .filter(|&k| k < minutes)
        else {
            continue;
        };
        if matches!(m.kind, LobsterEvent::Execute | LobsterEvent::ExecuteHidden) {
            volume[minute] += m.size as f64;
        }
        let (ask, _, bid, _, two_sided) = features::touch(rows.row(i));
        if two_sided {
            let mid = (ask + bid) as f64 / 2.0;
            price[minute] = mid / 10_000.0;
            spread_sum += (ask - bid) as f64 / mid * 1e4;
            spread_n += 1;
        }
    }
    fill_gaps(&mut price, 100.0);
    Calibration {
        tick: tick as f64 / 10_000.0,
        minute_price: price,
        minute_volume: volume,
        spread_bps: spread_sum / spread_n.max(1) as f64,
        noise_scale: Vec::new(),
    }
}

/// The calibration of the `minutes` after a day's part `seen` ends, from
/// `seen` alone (nothing of the minutes it describes): each minute's volume
/// the mean of `seen`'s, the same spread and tick, and a minute price path
/// drawn with `seed` as a driftless random walk from `seen`'s last price
/// at `seen`'s realised minute volatility. `noise_scale` is left empty
/// (fit it to this calibration).
pub fn forecast_calibration(seen: &Calibration, minutes: usize, seed: u64) -> Calibration {
    use rand::Rng;
    let p = &seen.minute_price;
    let returns: Vec<f64> = p.windows(2).map(|w| (w[1] / w[0]).ln()).collect();
    let n = returns.len().max(1) as f64;
    let mean = returns.iter().sum::<f64>() / n;
    let sigma = (returns.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / n).sqrt();
    let mut rng = SmallRng::seed_from_u64(seed);
    let last = p.last().copied().unwrap_or(100.0).max(1e-9);
    let mut price = vec![last];
    let mut level = last.ln();
    for _ in 1..minutes.max(1) {
        level += sigma * rng.sample::<f64, _>(rand_distr::StandardNormal);
        price.push(level.exp());
    }
    let volume = seen.minute_volume.iter().sum::<f64>() / seen.minute_volume.len().max(1) as f64;
    Calibration {
        tick: seen.tick,
        minute_price: price,
        minute_volume: vec![volume; minutes.max(1)],
        spread_bps: seen.spread_bps,
        noise_scale: Vec::new(),
    }
}

/// Fills each `NaN` of `values` with the last finite value before it; the
/// leading ones take the first finite value (`none` when there is none).
pub(super) fn fill_gaps(values: &mut [f64], none: f64) {
    let mut last = values
        .iter()
        .copied()
        .find(|v| v.is_finite())
        .unwrap_or(none);
    for v in values {
        if v.is_finite() {
            last = *v;
        } else {
            *v = last;
        }
    }
}

/// What a statistic measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum StatKind {
    /// A distribution: L1 and W1.
    Distribution,
    /// A distribution given buckets of another variable: L1 and W1 per
    /// bucket, averaged with the real day's bucket shares.
    Conditional,
    /// A price-response curve: the mean absolute deviation from the real
    /// curve over [`RESPONSE_LAGS`], ticks.
    Response,
}

/// One statistic of [`STATISTICS`].
#[derive(Debug, Clone, Copy)]
pub struct Statistic {
    /// Its name in tables.
    pub name: &'static str,
    /// Units of W1 (or of the response deviation).
    pub unit: &'static str,
    /// What kind of score it gets.
    pub kind: StatKind,
    select: Select,
}

#[derive(Debug, Clone, Copy)]
enum Select {
    Plain(fn(&DayFeatures) -> &[Sample]),
    TouchGivenSpread,
    SpreadGivenTime,
    SpreadGivenVolatility,
    Response(ResponseEvent, bool),
}

macro_rules! plain {
    ($name:expr, $unit:expr, $f:expr) => {
        Statistic {
            name: $name,
            unit: $unit,
            kind: StatKind::Distribution,
            select: Select::Plain($f),
        }
    };
}

/// Every statistic scored, in table order.
pub const STATISTICS: &[Statistic] = &[
    plain!("spread", "ticks", |f| &f.spread),
    plain!("inter-arrival time", "log10 s", |f| &f.interarrival),
    plain!("limit order size", "log10 shares", |f| &f.limit_size),
    plain!("market order size", "log10 shares", |f| &f.market_size),
    plain!("limit order level (behind the touch)", "ticks", |f| &f
        .limit_depth),
    plain!("cancel level (behind the touch)", "ticks", |f| &f
        .cancel_depth),
    plain!("time to cancel", "log10 s", |f| &f.cancel_time),
    plain!("time to first fill", "log10 s", |f| &f.fill_time),
    plain!("level-1 imbalance", "(bid-ask)/(bid+ask)", |f| &f.imbalance),
    plain!("imbalance, levels 1-5", "(bid-ask)/(bid+ask)", |f| &f
        .imbalance_depth),
    plain!("ask volume, level 1", "log10 shares", |f| &f.touch_volume
        [0]),
    plain!("bid volume, level 1", "log10 shares", |f| &f.touch_volume
        [1]),
    plain!("ask volume, all levels", "log10 shares", |f| &f
        .depth_volume[0]),
    plain!("bid volume, all levels", "log10 shares", |f| &f
        .depth_volume[1]),
    Statistic {
        name: "level-1 volume given spread",
        unit: "log10 shares",
        kind: StatKind::Conditional,
        select: Select::TouchGivenSpread,
    },
    Statistic {
        name: "spread given time of day",
        unit: "ticks",
        kind: StatKind::Conditional,
        select: Select::SpreadGivenTime,
    },
    Statistic {
        name: "spread given volatility",
        unit: "ticks",
        kind: StatKind::Conditional,
        select: Select::SpreadGivenVolatility,
    },
    Statistic {
        name: "response to market orders, mid moved",
        unit: "ticks",
        kind: StatKind::Response,
        select: Select::Response(ResponseEvent::Market, true),
    },
    Statistic {
        name: "response to market orders, mid unmoved",
        unit: "ticks",
        kind: StatKind::Response,
        select: Select::Response(ResponseEvent::Market, false),
    },
    Statistic {
        name: "response to limit orders, mid moved",
        unit: "ticks",
        kind: StatKind::Response,
        select: Select::Response(ResponseEvent::Limit, true),
    },
    Statistic {
        name: "response to limit orders, mid unmoved",
        unit: "ticks",
        kind: StatKind::Response,
        select: Select::Response(ResponseEvent::Limit, false),
    },
    Statistic {
        name: "response to cancels, mid moved",
        unit: "ticks",
        kind: StatKind::Response,
        select: Select::Response(ResponseEvent::Cancel, true),
    },
    Statistic {
        name: "response to cancels, mid unmoved",
        unit: "ticks",
        kind: StatKind::Response,
        select: Select::Response(ResponseEvent::Cancel, false),
    },
];

/// One model's score on one statistic.
#[derive(Debug, Clone, Serialize)]
pub struct ModelScore {
    /// The model.
    pub model: String,
    /// Samples it gave (over all its days).
    pub samples: usize,
    /// Total variation (distributions); `None` for a response curve.
    pub l1: Option<Interval>,
    /// Wasserstein-1, or a response curve's mean absolute deviation.
    pub w1: Interval,
    /// The model's mean response per lag (response curves only), ticks.
    pub curve: Vec<f64>,
}

/// One statistic against the real day, for every model.
#[derive(Debug, Clone, Serialize)]
pub struct RealismRow {
    /// The statistic.
    pub statistic: &'static str,
    /// What kind it is.
    pub kind: StatKind,
    /// Units of W1.
    pub unit: &'static str,
    /// Real samples.
    pub real_samples: usize,
    /// The real response curve (response curves only), ticks.
    pub real_curve: Vec<f64>,
    /// One per model with samples of this statistic.
    pub scores: Vec<ModelScore>,
}

impl RealismRow {
    fn of(
        stat: &Statistic,
        real_samples: usize,
        real_curve: Vec<f64>,
        scores: Vec<ModelScore>,
    ) -> Self {
        RealismRow {
            statistic: stat.name,
            kind: stat.kind,
            unit: stat.unit,
            real_samples,
            real_curve,
            scores,
        }
    }

    /// The model strictly closest to the real day on this statistic
    /// (lowest W1); `None` on a tie or when no model scored.
    pub fn best(&self) -> Option<&ModelScore> {
        let best = self
            .scores
            .iter()
            .min_by(|a, b| a.w1.value.total_cmp(&b.w1.value))?;
        let tied = self
            .scores
            .iter()
            .filter(|s| s.w1.value == best.w1.value)
            .count();
        (tied == 1).then_some(best)
    }
}

/// Buckets of the conditioning variables, from the real day.
struct Buckets {
    spread: Vec<f64>,
    volatility: Vec<f64>,
}

impl Buckets {
    fn of(real: &[DayFeatures]) -> Buckets {
        let quartiles = |mut v: Vec<f64>| {
            v.retain(|x| x.is_finite());
            v.sort_by(f64::total_cmp);
            let mut q: Vec<f64> = [0.25, 0.5, 0.75]
                .iter()
                .filter_map(|p| v.get(((v.len().max(1) - 1) as f64 * p) as usize).copied())
                .collect();
            q.dedup();
            q
        };
        Buckets {
            spread: quartiles(
                real.iter()
                    .flat_map(|d| d.spread.iter().map(|s| s.1))
                    .collect(),
            ),
            volatility: quartiles(
                real.iter()
                    .flat_map(|d| d.minute_volatility.iter().copied())
                    .collect(),
            ),
        }
    }

    fn of_value(edges: &[f64], v: f64) -> u8 {
        edges.partition_point(|&e| e < v) as u8
    }
}

/// The blocks of one statistic over a model's days, and its samples
/// before thinning.
fn blocks_of(stat: &Statistic, days: &[DayFeatures], b: &Buckets) -> (Blocks, usize) {
    let tagged = days
        .iter()
        .enumerate()
        .flat_map(|(k, d)| -> Vec<(usize, u16, u8, f64)> {
            match stat.select {
                Select::Plain(f) => f(d).iter().map(|&(m, v)| (k, m, 0, v)).collect(),
                Select::TouchGivenSpread => d
                    .touch_given_spread
                    .iter()
                    .map(|&(m, s, v)| (k, m, Buckets::of_value(&b.spread, s), v))
                    .collect(),
                Select::SpreadGivenTime => d
                    .spread
                    .iter()
                    .map(|&(m, v)| (k, m, (m / 30) as u8, v))
                    .collect(),
                Select::SpreadGivenVolatility => d
                    .spread
                    .iter()
                    .map(|&(m, v)| {
                        let vol = d
                            .minute_volatility
                            .get(m as usize)
                            .copied()
                            .unwrap_or(f64::NAN);
                        // The first minutes have no volatility to condition on.
                        let v = if vol.is_finite() { v } else { f64::NAN };
                        (k, m, Buckets::of_value(&b.volatility, vol), v)
                    })
                    .collect(),
                Select::Response(..) => Vec::new(),
            }
        });
    into_blocks(tagged)
}

/// Response curves in blocks of one (day, minute).
type CurveBlocks = Vec<Vec<[f64; RESPONSE_LAGS.len()]>>;

fn curve_blocks(days: &[DayFeatures], event: ResponseEvent, moved: bool) -> CurveBlocks {
    let mut blocks: CurveBlocks = Vec::new();
    let mut key = None;
    for (k, d) in days.iter().enumerate() {
        for r in d
            .responses
            .iter()
            .filter(|r| r.event == event && r.moved == moved)
        {
            if key != Some((k, r.minute)) {
                blocks.push(Vec::new());
                key = Some((k, r.minute));
            }
            blocks.last_mut().expect("pushed").push(r.change);
        }
    }
    blocks
}

fn mean_curve<'a>(blocks: impl Iterator<Item = &'a Vec<[f64; RESPONSE_LAGS.len()]>>) -> Vec<f64> {
    let mut sum = [0.0; RESPONSE_LAGS.len()];
    let mut n = [0usize; RESPONSE_LAGS.len()];
    for c in blocks.flatten() {
        for j in 0..c.len() {
            if c[j].is_finite() {
                sum[j] += c[j];
                n[j] += 1;
            }
        }
    }
    sum.iter()
        .zip(n)
        .map(|(s, n)| if n > 0 { s / n as f64 } else { f64::NAN })
        .collect()
}

/// Mean |a − b| over the lags both curves reach (`NaN` when none).
fn deviation(a: &[f64], b: &[f64]) -> f64 {
    let d: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .filter(|d| d.is_finite())
        .collect();
    d.iter().sum::<f64>() / d.len() as f64
}

/// Scores each model's days against the real days, statistic by statistic.
/// Deterministic in `seed`.
pub fn score(
    real: &[DayFeatures],
    models: &[(String, Vec<DayFeatures>)],
    seed: u64,
) -> Vec<RealismRow> {
    let buckets = Buckets::of(real);
    let mut rows = Vec::new();
    for (i, stat) in STATISTICS.iter().enumerate() {
        let seed = seed.wrapping_add(i as u64 * 7_919);
        let row = match stat.select {
            Select::Response(event, moved) => score_curve(stat, real, models, event, moved, seed),
            _ => score_distribution(stat, real, models, &buckets, seed),
        };
        if row.real_samples > 0 {
            rows.push(row);
        }
    }
    rows
}

fn score_distribution(
    stat: &Statistic,
    real: &[DayFeatures],
    models: &[(String, Vec<DayFeatures>)],
    buckets: &Buckets,
    seed: u64,
) -> RealismRow {
    let (r, real_samples) = blocks_of(stat, real, buckets);
    let scores = models
        .iter()
        .filter_map(|(model, days)| {
            let (s, samples) = blocks_of(stat, days, buckets);
            let d = distances(&r, &s, seed)?;
            Some(ModelScore {
                model: model.clone(),
                samples,
                l1: Some(d.l1),
                w1: d.w1,
                curve: Vec::new(),
            })
        })
        .collect();
    RealismRow::of(stat, real_samples, Vec::new(), scores)
}

fn score_curve(
    stat: &Statistic,
    real: &[DayFeatures],
    models: &[(String, Vec<DayFeatures>)],
    event: ResponseEvent,
    moved: bool,
    seed: u64,
) -> RealismRow {
    let r = curve_blocks(real, event, moved);
    let real_curve = mean_curve(r.iter());
    let count = |b: &CurveBlocks| b.iter().map(Vec::len).sum::<usize>();
    let scores = models
        .iter()
        .filter_map(|(model, days)| {
            // Every model sees the same resamples of the real day.
            let mut rng = SmallRng::seed_from_u64(seed);
            let s = curve_blocks(days, event, moved);
            if s.is_empty() || r.is_empty() {
                return None;
            }
            let curve = mean_curve(s.iter());
            let point = deviation(&real_curve, &curve);
            if !point.is_finite() {
                return None;
            }
            let reps = (0..REPLICATES)
                .map(|_| {
                    deviation(
                        &mean_curve(resample(&r, &mut rng).into_iter()),
                        &mean_curve(resample(&s, &mut rng).into_iter()),
                    )
                })
                .collect();
            let w1 = interval(point, reps);
            Some(ModelScore {
                model: model.clone(),
                samples: count(&s),
                l1: None,
                w1,
                curve,
            })
        })
        .collect();
    RealismRow::of(stat, count(&r), real_curve, scores)
}
