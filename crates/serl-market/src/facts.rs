//! Stylized facts of returns and books, for checking that a simulated
//! market looks like a real one.
//!
//! [`stylized_facts`] and [`Check`] are re-exported at the crate root; the
//! estimators behind them stay inside the crate.

use serde::Serialize;

/// Arithmetic mean of `x` (0 for an empty slice).
pub(crate) fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len().max(1) as f64
}

/// Excess kurtosis (0 for a Gaussian).
pub(crate) fn excess_kurtosis(x: &[f64]) -> f64 {
    let m = mean(x);
    let (mut m2, mut m4) = (0.0, 0.0);
    for v in x {
        let d = v - m;
        m2 += d * d;
        m4 += d * d * d * d;
    }
    let n = x.len().max(1) as f64;
    let (m2, m4) = (m2 / n, m4 / n);
    if m2 <= 0.0 {
        0.0
    } else {
        m4 / (m2 * m2) - 3.0
    }
}

/// Hill estimator of the tail exponent of |x| over the top `frac` of
/// observations.
pub(crate) fn hill_exponent(x: &[f64], frac: f64) -> f64 {
    let mut a: Vec<f64> = x.iter().map(|v| v.abs()).filter(|v| *v > 0.0).collect();
    a.sort_by(|p, q| q.total_cmp(p));
    let k = ((a.len() as f64 * frac) as usize)
        .max(2)
        .min(a.len().saturating_sub(1));
    if k < 2 {
        return f64::NAN;
    }
    let xk = a[k];
    let s: f64 = a[..k].iter().map(|v| (v / xk).ln()).sum();
    if s <= 0.0 {
        f64::NAN
    } else {
        k as f64 / s
    }
}

/// Autocorrelation at `lag`.
pub(crate) fn autocorr(x: &[f64], lag: usize) -> f64 {
    if x.len() <= lag + 1 {
        return 0.0;
    }
    let m = mean(x);
    let var: f64 = x.iter().map(|v| (v - m) * (v - m)).sum();
    if var <= 0.0 {
        return 0.0;
    }
    let cov: f64 = (lag..x.len()).map(|i| (x[i] - m) * (x[i - lag] - m)).sum();
    cov / var
}

/// Sums consecutive blocks of `k` returns (within each day).
pub(crate) fn aggregate(days: &[Vec<f64>], k: usize) -> Vec<f64> {
    days.iter()
        .flat_map(|d| d.chunks_exact(k).map(|c| c.iter().sum::<f64>()))
        .collect()
}

/// One pass/fail check of a simulated market, as a report lists it: a
/// stylized fact ([`stylized_facts`]) or a comparison with the real day
/// ([`compare_days`](crate::compare_days)).
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What is checked, in words (e.g. "heavy tails: Hill tail exponent").
    pub name: String,
    /// The measured value, formatted for a report (units in the text).
    pub value: String,
    /// What passes, in words (e.g. "between 2 and 5").
    pub target: String,
    /// Whether `value` meets `target`.
    pub pass: bool,
}

/// A check's line: `PASS` or `FAIL`, what is checked, the value and the
/// target, in columns.
impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verdict = if self.pass { "PASS" } else { "FAIL" };
        write!(
            f,
            "{verdict} {:<55} {:<40} target {}",
            self.name, self.value, self.target
        )
    }
}

/// The stylized-fact checks over several simulated days of 1-minute
/// returns (one vector per day, any unit: bps from
/// [`minute_returns_bps`](crate::minute_returns_bps)) and the average depth
/// of the top 5 levels, shares ([`mean_depth`](crate::mean_depth)): heavy
/// tails, aggregational Gaussianity, no return autocorrelation, volatility
/// clustering and a hump-shaped book, six [`Check`]s in that order.
pub fn stylized_facts(days: &[Vec<f64>], depth: &[f64; 5]) -> Vec<Check> {
    let r: Vec<f64> = days.iter().flatten().copied().collect();
    let n = r.len().max(1) as f64;
    let band = 2.0 / n.sqrt();
    let k1 = excess_kurtosis(&r);
    let hill = hill_exponent(&r, 0.05);
    let k30 = excess_kurtosis(&aggregate(days, 30));
    // Per-day autocorrelations pooled as a mean, so day boundaries do not
    // count as lags.
    let ac = |f: &dyn Fn(&[f64]) -> f64| mean(&days.iter().map(|d| f(d)).collect::<Vec<_>>());
    let acs: Vec<f64> = (1..=10).map(|l| ac(&|d: &[f64]| autocorr(d, l))).collect();
    let abs_days: Vec<Vec<f64>> = days
        .iter()
        .map(|d| d.iter().map(|v| v.abs()).collect())
        .collect();
    let abs_acs: Vec<f64> = (1..=10)
        .map(|l| mean(&abs_days.iter().map(|d| autocorr(d, l)).collect::<Vec<_>>()))
        .collect();
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let hump = depth[1..].iter().any(|d| *d >= depth[0]);
    let decreasing = depth.windows(2).all(|w| w[1] < w[0]);
    vec![
        Check {
            name: "heavy tails: excess kurtosis of 1-minute returns".into(),
            value: format!("{k1:.2}"),
            target: "> 1".into(),
            pass: k1 > 1.0,
        },
        Check {
            name: "heavy tails: Hill tail exponent (top 5%)".into(),
            value: format!("{hill:.2}"),
            target: "between 2 and 5".into(),
            pass: (2.0..=5.0).contains(&hill),
        },
        Check {
            name: "aggregational Gaussianity: kurtosis at 30 minutes".into(),
            value: format!("{k30:.2}"),
            target: format!("below the 1-minute {k1:.2}"),
            pass: k30 < k1,
        },
        Check {
            name: "no return autocorrelation, lags 1-10".into(),
            value: fmt(&acs),
            target: format!(
                "inside ±{:.3}",
                (2.0 / (n / days.len().max(1) as f64).sqrt())
            ),
            pass: acs
                .iter()
                .all(|a| a.abs() < 2.0 / (n / days.len().max(1) as f64).sqrt()),
        },
        Check {
            name: "volatility clustering: autocorrelation of |r|, lags 1-10".into(),
            value: fmt(&abs_acs),
            target: format!("positive and above {band:.3}"),
            pass: abs_acs.iter().all(|a| *a > band),
        },
        Check {
            name: "depth profile, top 5 levels".into(),
            value: fmt(depth),
            target: "hump-shaped or flat, not strictly decreasing".into(),
            pass: hump && !decreasing,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimators_on_known_series() {
        let flat = vec![1.0; 100];
        assert_eq!(excess_kurtosis(&flat), 0.0);
        let alt: Vec<f64> = (0..200)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert!(autocorr(&alt, 1) < -0.9);
        // A Pareto tail with exponent 3: x = u^(-1/3).
        let pareto: Vec<f64> = (1..20000)
            .map(|i| (i as f64 / 20000.0).powf(-1.0 / 3.0))
            .collect();
        let h = hill_exponent(&pareto, 0.05);
        assert!((h - 3.0).abs() < 0.3, "{h}");
    }
}
