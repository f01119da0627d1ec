//! Execution metrics, exactly as `docs/metrics.md` defines them, with
//! bootstrap confidence intervals and paired differences.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serl_env::{ExecutionOutcome, OrderSide, ParentOrder, PlacementStats};

/// One order executed by one strategy in one environment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OrderResult {
    /// The strategy's label.
    pub strategy: String,
    /// The venue's name (`static`, `dynamic`).
    pub env: String,
    /// The order's id.
    pub order_id: u64,
    /// The stock.
    pub symbol: String,
    /// The session.
    pub date: chrono::NaiveDate,
    /// Buy or sell.
    pub side: OrderSide,
    /// The order's size, shares.
    pub qty: f64,
    /// The order's window, minutes (its horizon).
    pub horizon_min: u16,
    /// Shares filled.
    pub filled: f64,
    /// Average fill price; `None` when nothing filled.
    pub avg_price: Option<f64>,
    /// The benchmark price PA is measured against.
    pub bench_price: f64,
    /// The price when the order arrived.
    pub arrival_price: f64,
    /// The price each share left at the horizon is charged at in the
    /// whole-order PA (docs/metrics.md).
    #[serde(default)]
    pub horizon_price: f64,
    /// Price advantage of the whole parent order over the benchmark, bps
    /// (shares left at the horizon charged as if crossed there); positive
    /// is good. The headline PA (docs/metrics.md).
    pub pa_bps: f64,
    /// Price advantage of the filled shares alone, bps (0 when nothing
    /// filled): the paper's PA.
    #[serde(default)]
    pub pa_filled_bps: f64,
    /// Implementation shortfall of the whole order against the arrival
    /// price, bps; positive is a cost.
    pub is_bps: f64,
    /// Unfilled share of the order.
    pub unfilled: f64,
    /// The episode's summed reward.
    pub reward: f64,
    /// What placement earned and cost (passive share, spread captured,
    /// adverse selection, final cross).
    #[serde(default)]
    pub placement: PlacementStats,
    /// Inventory left (share of the order) after each step; kept only for
    /// the first few orders ([`crate::EXAMPLE_ORDERS`]), for the report's
    /// plots.
    #[serde(skip)]
    pub inventory_path: Vec<f32>,
}

impl OrderResult {
    /// The result of `strategy` at venue `env` on order `o`.
    pub fn new(strategy: &str, env: &str, o: &ParentOrder, out: ExecutionOutcome) -> Self {
        let avg = out.avg_price();
        let (pa, is) = (out.pa_bps(), out.is_bps());
        OrderResult {
            strategy: strategy.to_string(),
            env: env.to_string(),
            order_id: o.id,
            symbol: o.symbol.to_string(),
            date: o.date,
            side: o.side,
            qty: o.qty,
            horizon_min: o.end_minute.saturating_sub(o.start_minute),
            filled: out.filled,
            avg_price: avg,
            bench_price: out.bench_price,
            arrival_price: out.arrival_price,
            horizon_price: out.horizon_price,
            pa_bps: pa,
            pa_filled_bps: out.filled_pa_bps(),
            is_bps: is,
            // Fills are sums of floating-point slices: treat dust as filled.
            unfilled: {
                let u = (o.qty - out.filled) / o.qty;
                if u < 1e-9 {
                    0.0
                } else {
                    u
                }
            },
            reward: out.reward,
            placement: out.placement,
            inventory_path: out.inventory_path,
        }
    }
}

/// A mean with its bootstrap 95% confidence interval.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Estimate {
    /// The sample mean.
    pub mean: f64,
    /// Lower end of the interval (2.5th percentile).
    pub lo: f64,
    /// Upper end of the interval (97.5th percentile).
    pub hi: f64,
}

impl Estimate {
    /// Whether the interval excludes zero.
    pub fn significant(&self) -> bool {
        self.lo > 0.0 || self.hi < 0.0
    }
}

impl std::fmt::Display for Estimate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.2} [{:.2}, {:.2}]", self.mean, self.lo, self.hi)
    }
}

/// The mean; 0 for no values.
pub fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        0.0
    } else {
        x.iter().sum::<f64>() / x.len() as f64
    }
}

/// The sample standard deviation; 0 for fewer than two values.
pub fn std_dev(x: &[f64]) -> f64 {
    if x.len() < 2 {
        return 0.0;
    }
    let m = mean(x);
    (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64).sqrt()
}

/// Percentile bootstrap of the mean: `resamples` draws, deterministic in
/// `seed`.
pub fn bootstrap_mean(x: &[f64], resamples: usize, seed: u64) -> Estimate {
    let m = mean(x);
    if x.len() < 2 {
        return Estimate {
            mean: m,
            lo: m,
            hi: m,
        };
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let n = x.len();
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| x[rng.random_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * (resamples - 1) as f64).round() as usize).min(resamples - 1)];
    Estimate {
        mean: m,
        lo: at(0.025),
        hi: at(0.975),
    }
}

/// The metrics of one strategy in one environment.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The strategy's label.
    pub strategy: String,
    /// The venue's name.
    pub env: String,
    /// Orders summarised.
    pub orders: usize,
    /// PA of the whole parent order, bps, with its bootstrap CI.
    pub pa: Estimate,
    /// Mean PA of the filled shares alone, bps (the paper's PA).
    pub pa_filled: f64,
    /// Standard deviation of PA over orders, bps.
    pub pa_std: f64,
    /// Share of orders with PA > 0.
    pub wr: f64,
    /// mean(PA | PA>0) / mean(|PA| | PA<0); `None` without losses.
    pub glr: Option<f64>,
    /// Mean unfilled share.
    pub afi: f64,
    /// Mean filled share: 1 − AFI.
    pub fill_rate: f64,
    /// Implementation shortfall, bps.
    pub is: Estimate,
    /// Mean episode reward.
    pub reward: f64,
    /// Placement's figures, each the mean over orders (the adverse moves
    /// over the orders with passive fills).
    pub placement: PlacementStats,
}

/// The metrics of `rows` (one strategy at one venue); `seed` seeds the
/// bootstraps.
pub fn summarize(strategy: &str, env: &str, rows: &[&OrderResult], seed: u64) -> Summary {
    let pa: Vec<f64> = rows.iter().map(|r| r.pa_bps).collect();
    let is: Vec<f64> = rows.iter().map(|r| r.is_bps).collect();
    let gains: Vec<f64> = pa.iter().copied().filter(|v| *v > 0.0).collect();
    let losses: Vec<f64> = pa
        .iter()
        .copied()
        .filter(|v| *v < 0.0)
        .map(f64::abs)
        .collect();
    let afi = mean(&rows.iter().map(|r| r.unfilled).collect::<Vec<_>>());
    Summary {
        strategy: strategy.into(),
        env: env.into(),
        orders: rows.len(),
        pa: bootstrap_mean(&pa, 1000, seed),
        pa_filled: mean(&rows.iter().map(|r| r.pa_filled_bps).collect::<Vec<_>>()),
        pa_std: std_dev(&pa),
        wr: if pa.is_empty() {
            0.0
        } else {
            gains.len() as f64 / pa.len() as f64
        },
        glr: (!losses.is_empty() && !gains.is_empty()).then(|| mean(&gains) / mean(&losses)),
        afi,
        fill_rate: 1.0 - afi,
        is: bootstrap_mean(&is, 1000, seed ^ 0x5eed),
        reward: mean(&rows.iter().map(|r| r.reward).collect::<Vec<_>>()),
        placement: mean_placement(rows),
    }
}

/// Placement's figures averaged over `rows`: the per-share ones over the
/// orders that filled, an adverse move over those that had passive fills,
/// the final cross over all.
fn mean_placement(rows: &[&OrderResult]) -> PlacementStats {
    let filled = |f: &dyn Fn(&PlacementStats) -> f64| {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| r.filled > 0.0)
            .map(|r| f(&r.placement))
            .collect();
        mean(&v)
    };
    let of = |f: &dyn Fn(&PlacementStats) -> f64| {
        mean(&rows.iter().map(|r| f(&r.placement)).collect::<Vec<_>>())
    };
    let some = |f: &dyn Fn(&PlacementStats) -> Option<f64>| {
        let v: Vec<f64> = rows.iter().filter_map(|r| f(&r.placement)).collect();
        (!v.is_empty()).then(|| mean(&v))
    };
    PlacementStats {
        passive_share: filled(&|p| p.passive_share),
        spread_captured_bps: filled(&|p| p.spread_captured_bps),
        adverse_1m_bps: some(&|p| p.adverse_1m_bps),
        adverse_5m_bps: some(&|p| p.adverse_5m_bps),
        final_cross_share: of(&|p| p.final_cross_share),
        final_cross_bps: of(&|p| p.final_cross_bps),
    }
}

/// Paired difference of PA between two strategies over the orders both ran.
#[derive(Debug, Clone, Serialize)]
pub struct PairedDiff {
    /// The strategy compared.
    pub strategy: String,
    /// The strategy it is compared with (TWAP in reports).
    pub reference: String,
    /// The venue.
    pub env: String,
    /// Orders both ran.
    pub orders: usize,
    /// mean(PA_strategy − PA_reference), bps, with its bootstrap CI.
    pub diff: Estimate,
}

/// Each result of `a` whose order `b` also ran, with PA(a) − PA(b) on it,
/// in `a`'s order.
pub(crate) fn paired<'r>(
    a: &'r [&'r OrderResult],
    b: &[&OrderResult],
) -> impl Iterator<Item = (&'r OrderResult, f64)> {
    let by_id: std::collections::HashMap<u64, f64> =
        b.iter().map(|r| (r.order_id, r.pa_bps)).collect();
    a.iter()
        .filter_map(move |r| by_id.get(&r.order_id).map(|pb| (*r, r.pa_bps - pb)))
}

/// PA of the strategy of `a` minus that of `b`, order by order, over the
/// orders both ran; `None` when either is empty. `seed` seeds the
/// bootstrap.
pub fn paired_diff(a: &[&OrderResult], b: &[&OrderResult], seed: u64) -> Option<PairedDiff> {
    let d: Vec<f64> = paired(a, b).map(|(_, d)| d).collect();
    let (first_a, first_b) = (a.first()?, b.first()?);
    Some(PairedDiff {
        strategy: first_a.strategy.clone(),
        reference: first_b.strategy.clone(),
        env: first_a.env.clone(),
        orders: d.len(),
        diff: bootstrap_mean(&d, 1000, seed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bootstrap_interval_brackets_the_mean_and_is_deterministic() {
        let x: Vec<f64> = (0..200).map(|i| (i % 17) as f64 - 8.0).collect();
        let a = bootstrap_mean(&x, 500, 3);
        assert!(a.lo < a.mean && a.mean < a.hi);
        assert_eq!(a, bootstrap_mean(&x, 500, 3));
        assert!(!bootstrap_mean(&[1.0, -1.0, 1.0, -1.0], 500, 3).significant());
        assert!(bootstrap_mean(&[5.0, 6.0, 5.5, 6.5, 5.2], 500, 3).significant());
    }

    #[test]
    fn std_of_a_constant_is_zero() {
        assert_eq!(std_dev(&[2.0, 2.0, 2.0]), 0.0);
        assert!((std_dev(&[1.0, 3.0]) - 2f64.sqrt()).abs() < 1e-12);
    }
}
