//! How far a simulated distribution is from the real one, with a bootstrap
//! CI that resamples whole minutes of each day (the samples of one minute
//! move together, so resampling single messages would overstate how sure
//! a distance is).
//!
//! - **L1** is the total variation between the two histograms,
//!   ½ Σ |p − q| ∈ [0, 1], on bins taken from the real sample's 5%
//!   quantiles; each distinct quantile is also a bin of its own, so that a
//!   discrete statistic (a spread of exactly one tick) is binned by value.
//! - **W1** is the Wasserstein-1 distance, the mean absolute difference of
//!   the two quantile functions (on 500 quantiles), in the statistic's
//!   units.
//!
//! A conditional statistic (a distribution given a bucket of another
//! variable) is scored per bucket and averaged with the real sample's
//! bucket shares as weights.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Bootstrap replicates behind every CI.
pub const REPLICATES: usize = 200;
/// At most this many samples of one series enter a distance (evenly
/// thinned in time order): enough for a distance's third digit, and it
/// keeps two hundred replicates of every statistic to seconds.
const MAX_SAMPLES: usize = 20_000;
const QUANTILES: usize = 500;

/// A value with a 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// The estimate on the full samples.
    pub value: f64,
    /// 2.5% bootstrap quantile.
    pub lo: f64,
    /// 97.5% bootstrap quantile.
    pub hi: f64,
}

impl Interval {
    /// `value [lo, hi]`, to `digits` decimals.
    pub fn show(&self, digits: usize) -> String {
        format!(
            "{:.d$} [{:.d$}, {:.d$}]",
            self.value,
            self.lo,
            self.hi,
            d = digits
        )
    }
}

/// Samples in blocks (one per day and minute): the bootstrap's unit. Each
/// sample is a bucket (0 for a plain distribution) and a value.
pub type Blocks = Vec<Vec<(u8, f64)>>;

/// Groups samples tagged `(day, minute)` into blocks, thinning the series
/// evenly to at most [`MAX_SAMPLES`]; also returns how many finite samples
/// there were before the thinning.
pub fn into_blocks(samples: impl Iterator<Item = (usize, u16, u8, f64)>) -> (Blocks, usize) {
    let all: Vec<_> = samples.filter(|s| s.3.is_finite()).collect();
    let step = all.len().div_ceil(MAX_SAMPLES).max(1);
    let mut blocks: Blocks = Vec::new();
    let mut key = None;
    for &(day, minute, bucket, value) in all.iter().step_by(step) {
        if key != Some((day, minute)) {
            blocks.push(Vec::new());
            key = Some((day, minute));
        }
        blocks.last_mut().expect("pushed").push((bucket, value));
    }
    (blocks, all.len())
}

/// The two distances between a real and a simulated sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Distances {
    /// Total variation of the histograms.
    pub l1: Interval,
    /// Wasserstein-1, in the statistic's units.
    pub w1: Interval,
}

/// L1 and W1 between `real` and `sim`, averaged over buckets with the real
/// sample's weights; `None` when either sample is empty.
pub fn distances(real: &Blocks, sim: &Blocks, seed: u64) -> Option<Distances> {
    let buckets = bucket_count(real).max(bucket_count(sim));
    let edges: Vec<Vec<f64>> = (0..buckets)
        .map(|b| quantile_edges(&values(real.iter(), b as u8)))
        .collect();
    let point = bucketed(real.iter(), sim.iter(), &edges)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut l1 = Vec::with_capacity(REPLICATES);
    let mut w1 = Vec::with_capacity(REPLICATES);
    for _ in 0..REPLICATES {
        let r = resample(real, &mut rng);
        let s = resample(sim, &mut rng);
        if let Some((a, b)) = bucketed(r.into_iter(), s.into_iter(), &edges) {
            l1.push(a);
            w1.push(b);
        }
    }
    Some(Distances {
        l1: interval(point.0, l1),
        w1: interval(point.1, w1),
    })
}

/// Block indices drawn with replacement, as many as there are blocks.
pub fn resample<'a, T>(blocks: &'a [T], rng: &mut SmallRng) -> Vec<&'a T> {
    (0..blocks.len())
        .map(|_| &blocks[rng.random_range(0..blocks.len())])
        .collect()
}

/// The point estimate and the 95% spread of its bootstrap replicates,
/// centred on it: [v − (median − q2.5), v + (q97.5 − median)], clipped at
/// 0.
///
/// A distance between two resampled samples carries the noise of both, so
/// every replicate sits above the estimate by about the same amount; the
/// raw percentiles of a small distance would not even contain it, and the
/// basic interval (reflected about it) would lie wholly below it. The
/// spread is what the bootstrap measures well, so that is what is kept.
pub fn interval(value: f64, mut replicates: Vec<f64>) -> Interval {
    replicates.retain(|v| v.is_finite());
    if replicates.is_empty() || !value.is_finite() {
        return Interval {
            value,
            lo: value,
            hi: value,
        };
    }
    replicates.sort_by(f64::total_cmp);
    let q = |p: f64| replicates[((replicates.len() - 1) as f64 * p).round() as usize];
    Interval {
        value,
        lo: (value - (q(0.5) - q(0.025))).max(0.0),
        hi: value + (q(0.975) - q(0.5)),
    }
}

fn bucket_count(blocks: &Blocks) -> usize {
    blocks
        .iter()
        .flatten()
        .map(|s| s.0 as usize + 1)
        .max()
        .unwrap_or(0)
}

fn values<'a>(blocks: impl Iterator<Item = &'a Vec<(u8, f64)>>, bucket: u8) -> Vec<f64> {
    let mut v: Vec<f64> = blocks
        .flatten()
        .filter(|s| s.0 == bucket)
        .map(|s| s.1)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The weighted mean over buckets of (L1, W1).
fn bucketed<'a>(
    real: impl Iterator<Item = &'a Vec<(u8, f64)>> + Clone,
    sim: impl Iterator<Item = &'a Vec<(u8, f64)>> + Clone,
    edges: &[Vec<f64>],
) -> Option<(f64, f64)> {
    let (mut l1, mut w1, mut weight) = (0.0, 0.0, 0.0);
    for (b, e) in edges.iter().enumerate() {
        let r = values(real.clone(), b as u8);
        let s = values(sim.clone(), b as u8);
        if r.is_empty() || s.is_empty() {
            continue;
        }
        let w = r.len() as f64;
        l1 += w * total_variation(&r, &s, e);
        w1 += w * wasserstein(&r, &s);
        weight += w;
    }
    (weight > 0.0).then(|| (l1 / weight, w1 / weight))
}

/// The real sample's distinct 5% quantiles.
fn quantile_edges(sorted: &[f64]) -> Vec<f64> {
    if sorted.is_empty() {
        return Vec::new();
    }
    let mut e: Vec<f64> = (0..=20)
        .map(|k| sorted[((sorted.len() - 1) as f64 * k as f64 / 20.0).round() as usize])
        .collect();
    e.dedup();
    e
}

/// The bin of `v`: below the first edge, at an edge, or between two.
fn bin(edges: &[f64], v: f64) -> usize {
    let pos = edges.partition_point(|&e| e < v);
    if pos < edges.len() && edges[pos] == v {
        2 * pos + 1
    } else {
        2 * pos
    }
}

fn histogram(sorted: &[f64], edges: &[f64]) -> Vec<f64> {
    let mut h = vec![0.0; 2 * edges.len() + 1];
    for &v in sorted {
        h[bin(edges, v)] += 1.0;
    }
    let n = sorted.len() as f64;
    h.iter_mut().for_each(|x| *x /= n);
    h
}

fn total_variation(a: &[f64], b: &[f64], edges: &[f64]) -> f64 {
    let (ha, hb) = (histogram(a, edges), histogram(b, edges));
    0.5 * ha.iter().zip(&hb).map(|(x, y)| (x - y).abs()).sum::<f64>()
}

/// Mean |Q_a − Q_b| over evenly spaced quantiles of two sorted samples.
fn wasserstein(a: &[f64], b: &[f64]) -> f64 {
    let q = |s: &[f64], u: f64| s[((s.len() as f64 * u) as usize).min(s.len() - 1)];
    (0..QUANTILES)
        .map(|j| {
            let u = (j as f64 + 0.5) / QUANTILES as f64;
            (q(a, u) - q(b, u)).abs()
        })
        .sum::<f64>()
        / QUANTILES as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(values: &[f64]) -> Blocks {
        into_blocks(
            values
                .iter()
                .enumerate()
                .map(|(i, &v)| (0, (i / 10) as u16, 0, v)),
        )
        .0
    }

    #[test]
    fn a_sample_is_at_no_distance_from_itself() {
        let a: Vec<f64> = (0..1_000).map(|i| (i % 37) as f64).collect();
        let d = distances(&blocks(&a), &blocks(&a), 1).unwrap();
        assert_eq!((d.l1.value, d.w1.value), (0.0, 0.0));
    }

    #[test]
    fn a_shift_shows_in_w1_and_a_discrete_value_in_l1() {
        let a: Vec<f64> = (0..1_000).map(|i| (i % 100) as f64 / 100.0).collect();
        let b: Vec<f64> = a.iter().map(|v| v + 0.5).collect();
        let d = distances(&blocks(&a), &blocks(&b), 1).unwrap();
        assert!((d.w1.value - 0.5).abs() < 0.01, "{:?}", d.w1);
        assert!(d.w1.lo <= d.w1.value && d.w1.value <= d.w1.hi);
        // A spread that is always one tick against one that is half the
        // time two ticks: half the mass moved.
        let one = vec![1.0; 500];
        let mixed: Vec<f64> = (0..500).map(|i| 1.0 + (i % 2) as f64).collect();
        let d = distances(&blocks(&one), &blocks(&mixed), 1).unwrap();
        assert!((d.l1.value - 0.5).abs() < 1e-9 && (d.w1.value - 0.5).abs() < 1e-2);
    }
}
