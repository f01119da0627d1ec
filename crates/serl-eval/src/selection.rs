//! How much a search's winner can be trusted: the statistics of choosing
//! the best of many designs on a few days.
//!
//! The input is a days × designs matrix of each design's daily difference
//! from a reference (plain PPO): [`DayMatrix`]. What it tells:
//! - [`noise_edge`]: the edge the best of N designs *with no edge at all*
//!   shows on average, E\[max of N standard normals\]·σ_d/√d;
//! - [`min_detectable_edge`]: the smallest true daily edge a paired
//!   t-test on d days finds with the given power;
//! - [`pbo_cscv`]: the probability of backtest overfitting by
//!   combinatorially symmetric cross-validation (Bailey, Borwein, López de
//!   Prado and Zhu, 2017);
//! - [`deflated_sharpe`]: the deflated Sharpe ratio (Bailey and López de
//!   Prado, 2014), the chosen design's daily edge discounted for the
//!   number of designs tried and the spread of their scores;
//! - [`spa_test`]: White's (2000) Reality Check, with Hansen's (2005)
//!   test for superior predictive ability beside it, over a stationary
//!   bootstrap of the days (Politis and Romano, 1994): is the best of the
//!   designs better than the reference, given that all of them were tried?
//!   ([`Spa`] says why a recommendation reads the Reality Check.)
//! - [`clustered_t_test`]: the chosen design on days that come in blocks
//!   sharing a training (the folds), tested with the block as the unit.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use crate::metrics::{mean, std_dev as sd};

/// Euler–Mascheroni's constant, in the deflated Sharpe ratio's expected
/// maximum.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Each design's daily difference from the reference, on the same days.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DayMatrix {
    /// The designs, in the order of `diffs`.
    pub designs: Vec<String>,
    /// `diffs[k][t]`: design k's performance minus the reference's on day
    /// t, every row as long as the others.
    pub diffs: Vec<Vec<f64>>,
}

impl DayMatrix {
    /// Days in the matrix (0 without designs).
    pub fn days(&self) -> usize {
        self.diffs.first().map_or(0, Vec::len)
    }

    /// Each design's mean daily difference.
    pub fn means(&self) -> Vec<f64> {
        self.diffs.iter().map(|d| mean(d)).collect()
    }

    /// The median over designs of each design's daily standard deviation
    /// (σ_d); `None` under two days.
    pub fn sigma_d(&self) -> Option<f64> {
        if self.days() < 2 {
            return None;
        }
        let mut sds: Vec<f64> = self.diffs.iter().map(|d| sd(d)).collect();
        median(&mut sds)
    }
}

fn median(x: &mut [f64]) -> Option<f64> {
    if x.is_empty() {
        return None;
    }
    x.sort_by(f64::total_cmp);
    let n = x.len();
    Some(if n % 2 == 1 {
        x[n / 2]
    } else {
        (x[n / 2 - 1] + x[n / 2]) / 2.0
    })
}

fn std_normal() -> Normal {
    Normal::standard()
}

/// Wilson's score interval for a proportion: `k` successes of `n`, at a
/// two-sided `level` (0.95); `(0, 1)` for no trials. Unlike the normal
/// interval it stays inside [0, 1] and is not empty at 0 or `n` successes,
/// which is where a detection rate or a false-recommendation rate lives.
pub fn wilson_interval(k: usize, n: usize, level: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = std_normal().inverse_cdf(0.5 + level / 2.0);
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The mean of `x` with its two-sided `level` t-interval (mean, low,
/// high); `None` under two values.
pub fn mean_interval(x: &[f64], level: f64) -> Option<(f64, f64, f64)> {
    if x.len() < 2 {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, (x.len() - 1) as f64).ok()?;
    let half = t.inverse_cdf(0.5 + level / 2.0) * sd(x) / (x.len() as f64).sqrt();
    let m = mean(x);
    Some((m, m - half, m + half))
}

/// A one-sided test that a design's mean daily difference is above 0
/// where its days come in clusters that share a training: each fold of
/// `[evolve.select] folds` trains the design and plain PPO once and
/// scores them on its own block of days, so the luck of those two
/// trainings moves every day of the block together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClusteredTest {
    /// Mean daily difference, bps.
    pub mean: f64,
    /// Its cluster-robust standard error (CR1: the clusters' summed
    /// deviations, scaled by k/(k−1)).
    pub se: f64,
    /// `mean / se`.
    pub t: f64,
    /// Clusters (k): the t reference has k − 1 degrees of freedom.
    pub clusters: usize,
    /// P(T ≥ t) under no edge, T Student's t with k − 1 degrees of freedom.
    pub p_value: f64,
}

/// The clustered test of `diffs` (day t in cluster `cluster[t]`); `None`
/// under two clusters or when the slices differ in length.
///
/// Why not the stationary bootstrap over these days: on 17 days in 3 or
/// 4 blocks it resamples a handful of blocks, underestimates the mean's
/// spread and, where the blocks share a training, rejects pure noise 8 to
/// 19% of the time at 5% (docs/evolve.md); the clustered t holds 5%.
pub fn clustered_t_test(diffs: &[f64], cluster: &[usize]) -> Option<ClusteredTest> {
    if diffs.len() != cluster.len() || diffs.is_empty() {
        return None;
    }
    let mut ids: Vec<usize> = cluster.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let k = ids.len();
    if k < 2 {
        return None;
    }
    let n = diffs.len() as f64;
    let m = mean(diffs);
    let summed: f64 = ids
        .iter()
        .map(|&c| {
            let u: f64 = (diffs.iter().zip(cluster))
                .filter(|(_, &ci)| ci == c)
                .map(|(d, _)| d - m)
                .sum();
            u * u
        })
        .sum();
    let kf = k as f64;
    let se = (kf / (kf - 1.0) * summed).sqrt() / n;
    let t = if se > 1e-12 {
        m / se
    } else if m > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let dist = StudentsT::new(0.0, 1.0, kf - 1.0).ok()?;
    Some(ClusteredTest {
        mean: m,
        se,
        t,
        clusters: k,
        p_value: if t.is_infinite() {
            0.0
        } else {
            1.0 - dist.cdf(t)
        },
    })
}

/// E\[max of `n` independent standard normals\], by integrating
/// x·n·φ(x)·Φ(x)^(n−1) (0 for n ≤ 1).
pub fn expected_max_of_normals(n: usize) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let z = std_normal();
    // Simpson's rule on [−12, 12]: the integrand is below 1e-30 outside.
    let (a, b, steps) = (-12.0f64, 12.0f64, 4800usize);
    let h = (b - a) / steps as f64;
    let f = |x: f64| {
        let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
        x * n as f64 * pdf * z.cdf(x).powi(n as i32 - 1)
    };
    let mut s = f(a) + f(b);
    for i in 1..steps {
        let w = if i % 2 == 1 { 4.0 } else { 2.0 };
        s += w * f(a + i as f64 * h);
    }
    s * h / 3.0
}

/// The mean edge over the reference that the best of `designs` designs
/// with no edge shows on `days` days, when each design's daily
/// difference has standard deviation `sigma_d`:
/// E\[max of N normals\]·σ_d/√d. Designs are taken as independent; the
/// shared reference makes them correlated, which lowers the figure.
pub fn noise_edge(sigma_d: f64, designs: usize, days: usize) -> f64 {
    if days == 0 {
        return f64::NAN;
    }
    expected_max_of_normals(designs) * sigma_d / (days as f64).sqrt()
}

/// The smallest true mean daily edge that a two-sided paired t-test at
/// level `alpha` finds with probability `power` on `days` days:
/// (t(1−α/2, d−1) + t(power, d−1))·σ_d/√d. `None` under two days.
pub fn min_detectable_edge(sigma_d: f64, days: usize, alpha: f64, power: f64) -> Option<f64> {
    if days < 2 {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, (days - 1) as f64).ok()?;
    let k = t.inverse_cdf(1.0 - alpha / 2.0) + t.inverse_cdf(power);
    Some(k * sigma_d / (days as f64).sqrt())
}

/// What combinatorially symmetric cross-validation found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pbo {
    /// The probability of backtest overfitting: the share of halvings
    /// whose in-sample winner ranks at or below the median out of sample.
    pub pbo: f64,
    /// Blocks of days the matrix was cut into (S).
    pub blocks: usize,
    /// Halvings tried, C(S, S/2).
    pub halvings: usize,
    /// Each halving's logit of the winner's out-of-sample relative rank,
    /// ln(ω/(1−ω)), in the order the halvings were enumerated.
    pub logits: Vec<f64>,
}

/// The days cut into `blocks` contiguous blocks whose sizes differ by at
/// most one (the first `days mod blocks` take one day more).
pub fn day_blocks(days: usize, blocks: usize) -> Vec<std::ops::Range<usize>> {
    let (size, extra) = (days / blocks.max(1), days % blocks.max(1));
    let mut start = 0;
    (0..blocks)
        .map(|b| {
            let len = size + usize::from(b < extra);
            let r = start..start + len;
            start += len;
            r
        })
        .collect()
}

/// Every `k`-subset of `0..n`, in lexicographic order.
fn combinations(n: usize, k: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut c: Vec<usize> = (0..k).collect();
    if k > n {
        return out;
    }
    loop {
        out.push(c.clone());
        let Some(i) = (0..k).rev().find(|&i| c[i] != i + n - k) else {
            return out;
        };
        c[i] += 1;
        for j in i + 1..k {
            c[j] = c[j - 1] + 1;
        }
    }
}

/// The probability of backtest overfitting of choosing the design with the
/// best mean over `m`'s days, by CSCV: the days cut into `blocks` (even)
/// blocks, and for each of the C(S, S/2) halvings the in-sample winner's
/// rank among the designs on the other half. `None` with fewer than two
/// designs, an odd or zero `blocks`, or fewer days than blocks.
pub fn pbo_cscv(m: &DayMatrix, blocks: usize) -> Option<Pbo> {
    let (n, days) = (m.designs.len(), m.days());
    if n < 2 || blocks < 2 || blocks % 2 == 1 || days < blocks {
        return None;
    }
    let cut = day_blocks(days, blocks);
    let mean_on = |k: usize, bs: &[usize]| {
        let (mut s, mut c) = (0.0, 0usize);
        for &b in bs {
            for t in cut[b].clone() {
                s += m.diffs[k][t];
                c += 1;
            }
        }
        s / c as f64
    };
    let mut logits = Vec::new();
    for train in combinations(blocks, blocks / 2) {
        let test: Vec<usize> = (0..blocks).filter(|b| !train.contains(b)).collect();
        let is: Vec<f64> = (0..n).map(|k| mean_on(k, &train)).collect();
        let oos: Vec<f64> = (0..n).map(|k| mean_on(k, &test)).collect();
        let star = (0..n)
            .max_by(|&a, &b| is[a].total_cmp(&is[b]).then(b.cmp(&a)))
            .expect("two designs or more");
        // Its rank out of sample, 1 (worst) to n (best), ties halved.
        let below = oos.iter().filter(|&&v| v < oos[star]).count() as f64;
        let tied = oos.iter().filter(|&&v| v == oos[star]).count() as f64 - 1.0;
        let rank = below + 1.0 + tied / 2.0;
        let w = rank / (n as f64 + 1.0);
        logits.push((w / (1.0 - w)).ln());
    }
    let pbo = logits.iter().filter(|&&l| l <= 0.0).count() as f64 / logits.len() as f64;
    Some(Pbo {
        pbo,
        blocks,
        halvings: logits.len(),
        logits,
    })
}

/// The largest even number of blocks, at most `max_blocks`, that `days`
/// days fill with at least one day each; `None` under two days.
pub fn cscv_blocks(days: usize, max_blocks: usize) -> Option<usize> {
    let s = days.min(max_blocks);
    let s = s - s % 2;
    (s >= 2).then_some(s)
}

/// The deflated Sharpe ratio (Bailey and López de Prado, 2014): the
/// probability that the true Sharpe ratio of a strategy whose estimate is
/// `sr` over `days` observations (with those observations' `skew` and
/// `kurtosis`, 3 for normal) exceeds what the best of `trials` strategies
/// with no skill would show, when the trials' Sharpe ratios vary by
/// `var_trials`. Per observation throughout (not annualised). `None` under
/// two days.
pub fn deflated_sharpe(
    sr: f64,
    days: usize,
    moments: (f64, f64),
    trials: usize,
    var_trials: f64,
) -> Option<f64> {
    if days < 2 {
        return None;
    }
    let (skew, kurtosis) = moments;
    let z = std_normal();
    let sr0 = if trials <= 1 {
        0.0
    } else {
        let n = trials as f64;
        var_trials.max(0.0).sqrt()
            * ((1.0 - EULER_GAMMA) * z.inverse_cdf(1.0 - 1.0 / n)
                + EULER_GAMMA * z.inverse_cdf(1.0 - 1.0 / (n * std::f64::consts::E)))
    };
    let denom = 1.0 - skew * sr + (kurtosis - 1.0) / 4.0 * sr * sr;
    if denom <= 0.0 {
        return None;
    }
    Some(z.cdf((sr - sr0) * ((days - 1) as f64).sqrt() / denom.sqrt()))
}

/// The Sharpe ratio of a series (mean over sample standard deviation), its
/// skewness and its kurtosis (3 for normal); `None` under two values or
/// without spread.
pub fn sharpe_moments(x: &[f64]) -> Option<(f64, f64, f64)> {
    let s = sd(x);
    if x.len() < 2 || s <= 0.0 {
        return None;
    }
    let m = mean(x);
    let n = x.len() as f64;
    let pop = (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n).sqrt();
    let skew = x.iter().map(|v| ((v - m) / pop).powi(3)).sum::<f64>() / n;
    let kurt = x.iter().map(|v| ((v - m) / pop).powi(4)).sum::<f64>() / n;
    Some((m / s, skew, kurt))
}

/// What the tests of superior predictive ability found.
///
/// The recommendation reads White's Reality Check ([`Spa::p_value`]):
/// on the few days a search is judged on, Hansen's studentized statistic
/// either rejects pure noise most of the time (studentized by a fixed
/// spread: a design whose days happen to agree looks certain) or, as a
/// bootstrap-t, almost never rejects anything; the Reality Check holds
/// its level (measured in the tests: 2.7% to 5% on 6 to 23 days) and
/// finds a one-σ_d edge among 30 designs on 6 days a third of the time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spa {
    /// Hansen's statistic: the largest studentized mean difference,
    /// max(maxₖ √n·d̄ₖ/sₖ, 0).
    pub statistic: f64,
    /// Hansen's consistent p-value (SPA_c, a bootstrap-t): the null
    /// recentred on the designs that are not clearly worse than the
    /// reference.
    pub p_consistent: f64,
    /// The lower p-value (SPA_l, no design recentred below 0).
    pub p_lower: f64,
    /// The Reality Check's statistic: max(maxₖ √n·d̄ₖ, 0), bps.
    pub reality_check: f64,
    /// White's Reality Check p-value (every design recentred on its
    /// mean): what the recommendation reads.
    pub p_reality_check: f64,
    /// The design with the largest mean difference.
    pub best: Option<String>,
    /// Designs left out of the studentized statistics for having no
    /// spread over the days.
    pub flat: usize,
    /// Bootstrap resamples.
    pub reps: usize,
    /// Mean length of the bootstrap's blocks of days (1/q).
    pub mean_block: f64,
}

impl Spa {
    /// The p-value a recommendation reads: the Reality Check's.
    pub fn p_value(&self) -> f64 {
        self.p_reality_check
    }
}

/// One stationary-bootstrap resample of `n` indices: each index follows
/// the last (circularly) with probability 1 − `q`, else starts a new block
/// at a uniform day.
pub fn stationary_indices(n: usize, q: f64, rng: &mut impl Rng) -> Vec<usize> {
    let mut idx = Vec::with_capacity(n);
    let mut i = rng.random_range(0..n);
    idx.push(i);
    for _ in 1..n {
        i = if rng.random::<f64>() < q {
            rng.random_range(0..n)
        } else {
            (i + 1) % n
        };
        idx.push(i);
    }
    idx
}

/// The statistics of [`spa_test`] for one resample of the days (`idx`):
/// (SPA with the consistent recentring, SPA lower, Reality Check). The
/// SPA statistics are studentized by the resample's own standard
/// deviation (a bootstrap-t), as the observed one is by the sample's: on
/// a handful of days a design whose days happen to agree has a tiny
/// standard deviation, and a fixed one would make the test reject pure
/// noise most of the time.
fn resampled(m: &DayMatrix, keep: &[(usize, f64, f64)], idx: &[usize], n: f64) -> [f64; 3] {
    let thresh = -(2.0 * n.ln().ln().max(0.0)).sqrt();
    // The resampled mean spreads by the days' population standard
    // deviation; widened by √(n/(n−1)) it spreads by the sample's, as the
    // observed mean does (on six days the difference is 10%).
    let widen = (n / (n - 1.0)).sqrt();
    let mut t = [0f64; 3];
    let mut star = vec![0f64; idx.len()];
    for &(k, d_bar, omega) in keep {
        for (s, &i) in star.iter_mut().zip(idx) {
            *s = m.diffs[k][i];
        }
        let mean_star = mean(&star);
        let sd_star = sd(&star);
        t[2] = t[2].max(n.sqrt() * (mean_star - d_bar) * widen);
        if omega <= 1e-12 {
            continue;
        }
        let studentized = d_bar * n.sqrt() / omega;
        let c = if studentized >= thresh { d_bar } else { 0.0 };
        let t_of = |centre: f64| {
            let dev = mean_star - centre;
            if sd_star > 1e-12 {
                n.sqrt() * dev / sd_star
            } else if dev > 0.0 {
                f64::INFINITY
            } else {
                0.0
            }
        };
        t[0] = t[0].max(t_of(c));
        t[1] = t[1].max(t_of(d_bar.max(0.0)));
    }
    t
}

/// White's Reality Check and Hansen's test for superior predictive
/// ability: is any of `m`'s designs better than the reference (differences
/// above 0 are better), given that all were tried? Over `reps`
/// stationary-bootstrap resamples of the days with mean block length
/// `mean_block` days, seeded by `seed`. `None` under two days or without
/// designs.
pub fn spa_test(m: &DayMatrix, mean_block: f64, reps: usize, seed: u64) -> Option<Spa> {
    let days = m.days();
    if days < 2 || reps == 0 {
        return None;
    }
    let n = days as f64;
    let q = 1.0 / mean_block.max(1.0);
    let means = m.means();
    let keep: Vec<(usize, f64, f64)> = (0..m.diffs.len())
        .map(|k| (k, means[k], sd(&m.diffs[k])))
        .collect();
    let flat = keep.iter().filter(|k| k.2 <= 1e-12).count();
    let best_k = (0..means.len()).max_by(|&a, &b| means[a].total_cmp(&means[b]))?;
    let statistic = keep
        .iter()
        .filter(|k| k.2 > 1e-12)
        .map(|&(_, d, w)| n.sqrt() * d / w)
        .fold(0.0f64, f64::max);
    let rc = means.iter().map(|d| n.sqrt() * d).fold(0.0f64, f64::max);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut above = [0usize; 3];
    for _ in 0..reps {
        let idx = stationary_indices(days, q, &mut rng);
        let t = resampled(m, &keep, &idx, n);
        for (a, (&tb, obs)) in above
            .iter_mut()
            .zip(t.iter().zip([statistic, statistic, rc]))
        {
            *a += usize::from(tb >= obs);
        }
    }
    let p = |a: usize| a as f64 / reps as f64;
    Some(Spa {
        statistic,
        p_consistent: p(above[0]),
        p_lower: p(above[1]),
        reality_check: rc,
        p_reality_check: p(above[2]),
        best: Some(m.designs[best_k].clone()),
        flat,
        reps,
        mean_block: 1.0 / q,
    })
}

#[cfg(test)]
#[path = "selection_tests.rs"]
mod tests;
