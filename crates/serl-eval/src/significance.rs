//! Day-level evidence: a strategy against a baseline with the day as the
//! unit, since orders of one day (and one stock) move together and an
//! order-level bootstrap overstates how sure a gain is.
//!
//! For each pair, the PA differences are averaged per (symbol, day), then
//! per day; a one-sided Wilcoxon signed-rank test asks whether the
//! strategy beats the baseline on a typical day, the p-values of every
//! pair in a report are corrected together (Benjamini–Hochberg), and the
//! mean daily difference gets a bootstrap CI that resamples whole days (a
//! block bootstrap over days).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::metrics::{bootstrap_mean, paired, Estimate, OrderResult};

/// A strategy against a reference, day by day.
#[derive(Debug, Clone, Serialize)]
pub struct DayTest {
    /// The strategy tested.
    pub strategy: String,
    /// The baseline it is tested against.
    pub reference: String,
    /// The venue.
    pub env: String,
    /// The horizon (minutes) of the orders compared; `None` for all of
    /// them pooled.
    pub horizon_min: Option<u16>,
    /// Days with orders both ran.
    pub days: usize,
    /// (symbol, day) pairs they span.
    pub symbol_days: usize,
    /// Days on which the strategy's mean PA was higher.
    pub days_won: usize,
    /// Mean over days of the daily mean PA difference, bps, with a
    /// bootstrap CI over days.
    pub mean_day_diff: Estimate,
    /// The signed-rank statistic: the sum of the ranks of the days won.
    pub w_plus: f64,
    /// One-sided p-value of "the strategy is better on a typical day".
    pub p_value: f64,
    /// The p-value corrected for every test of the report
    /// (Benjamini–Hochberg).
    pub q_value: f64,
}

/// Fewer days than this and a day-level test cannot mean much (with four
/// days the smallest one-sided Wilcoxon p-value is 1/16): reports show
/// "too few days" instead of its p-value.
pub const MIN_TEST_DAYS: usize = 5;

impl DayTest {
    /// Whether the test spans too few days to report a p-value
    /// ([`MIN_TEST_DAYS`]).
    pub fn too_few_days(&self) -> bool {
        self.days < MIN_TEST_DAYS
    }

    /// The p-value as a table shows it: "too few days" where it spans
    /// fewer than [`MIN_TEST_DAYS`].
    pub fn p_cell(&self) -> String {
        self.cell(self.p_value)
    }

    /// The q-value as a table shows it ([`Self::p_cell`]).
    pub fn q_cell(&self) -> String {
        self.cell(self.q_value)
    }

    fn cell(&self, v: f64) -> String {
        if self.too_few_days() {
            "too few days".into()
        } else {
            format!("{v:.3}")
        }
    }
}

/// `a`'s PA minus `b`'s over the orders both ran, by day; `None` when they
/// share no order.
pub fn day_test(a: &[&OrderResult], b: &[&OrderResult], seed: u64) -> Option<DayTest> {
    let mut per_symbol_day: BTreeMap<(chrono::NaiveDate, &str), (f64, usize)> = BTreeMap::new();
    for (r, d) in paired(a, b) {
        let e = per_symbol_day.entry((r.date, &r.symbol)).or_default();
        e.0 += d;
        e.1 += 1;
    }
    let mut per_day: BTreeMap<chrono::NaiveDate, (f64, usize)> = BTreeMap::new();
    for ((day, _), (sum, n)) in &per_symbol_day {
        let e = per_day.entry(*day).or_default();
        e.0 += sum / *n as f64;
        e.1 += 1;
    }
    let daily: Vec<f64> = per_day.values().map(|(s, n)| s / *n as f64).collect();
    if daily.is_empty() {
        return None;
    }
    let (w_plus, p_value) = wilcoxon_greater(&daily);
    Some(DayTest {
        strategy: a[0].strategy.clone(),
        reference: b[0].strategy.clone(),
        env: a[0].env.clone(),
        horizon_min: None,
        days: daily.len(),
        symbol_days: per_symbol_day.len(),
        days_won: daily.iter().filter(|d| **d > 0.0).count(),
        mean_day_diff: bootstrap_mean(&daily, 1000, seed),
        w_plus,
        p_value,
        q_value: p_value,
    })
}

/// The one-sided Wilcoxon signed-rank test of "the differences `d` are
/// centred above 0": the statistic W+ and its p-value. Zeros are dropped,
/// tied magnitudes share their mean rank; the p-value is exact (by
/// counting sign patterns, ties included) for up to 25 differences, else
/// from the normal approximation with the tie and continuity corrections.
pub fn wilcoxon_greater(d: &[f64]) -> (f64, f64) {
    let mut nz: Vec<f64> = d.iter().copied().filter(|x| *x != 0.0).collect();
    let n = nz.len();
    if n == 0 {
        return (0.0, 1.0);
    }
    nz.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    let mut ranks = vec![0.0; n];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && nz[j + 1].abs() == nz[i].abs() {
            j += 1;
        }
        let mean_rank = (i + j + 2) as f64 / 2.0;
        ranks[i..=j].fill(mean_rank);
        ties.push(j - i + 1);
        i = j + 1;
    }
    let w_plus = nz
        .iter()
        .zip(&ranks)
        .filter(|(x, _)| **x > 0.0)
        .fold(0.0, |w, (_, r)| w + r);
    if n <= EXACT_UP_TO {
        // Tied ranks are halves: count sign patterns on doubled ranks.
        let doubled: Vec<usize> = ranks.iter().map(|r| (r * 2.0).round() as usize).collect();
        return (
            w_plus,
            exact_upper_tail(&doubled, (w_plus * 2.0).round() as usize),
        );
    }
    (w_plus, normal_upper_tail(n, w_plus, &ties))
}

/// Up to this many non-zero differences the p-value is counted exactly.
const EXACT_UP_TO: usize = 25;

/// P(W+ ≥ w) under the null from the normal approximation, with the tie
/// and continuity corrections; `ties` holds the size of each group of
/// equal magnitudes.
fn normal_upper_tail(n: usize, w_plus: f64, ties: &[usize]) -> f64 {
    let nf = n as f64;
    let mean = nf * (nf + 1.0) / 4.0;
    let tie_term: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum::<f64>() / 48.0;
    let var = nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0 - tie_term;
    let z = (w_plus - mean - 0.5) / var.sqrt();
    1.0 - normal_cdf(z)
}

/// P(sum of the weights of the positive signs ≥ w) under the null: the
/// share of the 2^n sign patterns whose positive weights reach `w`.
fn exact_upper_tail(weights: &[usize], w: usize) -> f64 {
    let max: usize = weights.iter().sum();
    let mut ways = vec![0f64; max + 1];
    ways[0] = 1.0;
    for &wt in weights {
        for s in (wt..=max).rev() {
            ways[s] += ways[s - wt];
        }
    }
    let total: f64 = ways.iter().sum();
    ways[w.min(max + 1)..].iter().sum::<f64>() / total
}

/// The standard normal CDF (Abramowitz and Stegun 7.1.26 for erf: error
/// below 1.5e-7).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// Benjamini–Hochberg adjusted p-values (q-values), in the order given:
/// with m tests, the k-th smallest p becomes min over j ≥ k of p_(j)·m/j.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|a, b| p[*a].total_cmp(&p[*b]));
    let mut q = vec![0.0; m];
    let mut running = 1.0f64;
    for (k, &i) in order.iter().enumerate().rev() {
        running = running.min(p[i] * m as f64 / (k + 1) as f64);
        q[i] = running;
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_wilcoxon_tail_matches_the_tables() {
        // n = 5, all positive: W+ = 15, P = 1/32.
        let (w, p) = wilcoxon_greater(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(w, 15.0);
        assert!((p - 1.0 / 32.0).abs() < 1e-12, "{p}");
        // n = 6 with the smallest negative: W+ = 20; of the 64 sign
        // patterns, W+ >= 20 for all-positive and for this one: 2/64.
        let (w, p) = wilcoxon_greater(&[-0.1, 0.2, 0.3, 0.4, 0.5, 0.6]);
        assert_eq!(w, 20.0);
        assert!((p - 2.0 / 64.0).abs() < 1e-12, "{p}");
        // Symmetric differences give no evidence.
        let (_, p) = wilcoxon_greater(&[1.0, -1.5, 2.0, -2.5]);
        assert!(p > 0.4, "{p}");
        assert_eq!(wilcoxon_greater(&[0.0, 0.0]), (0.0, 1.0));
        let (w, _) = wilcoxon_greater(&[-1.0, -2.0]);
        assert!(
            w == 0.0 && w.is_sign_positive(),
            "no day won is W+ = 0, not -0"
        );
    }

    #[test]
    fn the_normal_approximation_agrees_with_the_exact_tail_at_25() {
        let d: Vec<f64> = (1..=25)
            .map(|k| if k % 3 == 0 { -(k as f64) } else { k as f64 })
            .collect();
        let (w, exact) = wilcoxon_greater(&d);
        let approx = normal_upper_tail(25, w, &[1; 25]);
        assert!(w > 200.0);
        assert!(
            (exact - approx).abs() < 0.01,
            "exact {exact} vs approx {approx}"
        );
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
    }

    #[test]
    fn ties_are_counted_exactly_for_a_few_days() {
        // Two tied wins: ranks 1.5 and 1.5; W+ = 3 in 1 of 4 patterns.
        let (w, p) = wilcoxon_greater(&[2.0, 2.0]);
        assert_eq!(w, 3.0);
        assert!((p - 0.25).abs() < 1e-12, "{p}");
    }

    #[test]
    fn benjamini_hochberg_is_monotone_and_bounded() {
        let p = [0.01, 0.04, 0.03, 0.20];
        let q = benjamini_hochberg(&p);
        // Sorted: 0.01 (x4/1 = 0.04), 0.03 (x4/2 = 0.06), 0.04 (x4/3 = 0.0533), 0.2 (x4/4 = 0.2)
        // then the running minimum from the top: 0.04, 0.0533, 0.0533, 0.2.
        let want = [0.04, 0.16 / 3.0, 0.16 / 3.0, 0.2];
        for (a, b) in q.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{q:?}");
        }
        assert!(q.iter().zip(&p).all(|(q, p)| q >= p && *q <= 1.0));
    }
}
