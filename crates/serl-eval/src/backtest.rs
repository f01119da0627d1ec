//! Running strategies over parent orders, in parallel, at one or more
//! venues (`serl_env::Venue`: the static replay, the dynamic market).

use rayon::prelude::*;
use serl_env::{play, EnvConfig, MarketData, ParentOrder, Reward, Strategy, Venue};

use crate::metrics::OrderResult;

/// A named way to make fresh strategy instances (one per worker).
pub struct StrategyFactory {
    /// The strategy's name in results and reports.
    pub label: String,
    /// Makes a fresh instance; each backtest worker calls it once.
    pub make: Box<dyn Fn() -> Box<dyn Strategy> + Send + Sync>,
}

impl StrategyFactory {
    /// Fresh instances of a named baseline.
    pub fn from_spec(spec: crate::StrategySpec) -> Self {
        StrategyFactory {
            label: spec.label(),
            make: Box::new(move || spec.build()),
        }
    }
}

/// How many of the first orders keep their inventory path for the report.
pub const EXAMPLE_ORDERS: usize = 4;

/// Runs every strategy on every order in every environment. Orders whose
/// session is missing from `market` are skipped (the generator only draws
/// from loaded sessions, so this means a caller mixed datasets).
pub fn run_backtest(
    market: &MarketData,
    orders: &[ParentOrder],
    strategies: &[StrategyFactory],
    envs: &[&dyn Venue],
    cfg: &EnvConfig,
    reward: &dyn Reward,
    progress: &(dyn Fn(u64) + Sync),
) -> Vec<OrderResult> {
    let example_ids: Vec<u64> = orders.iter().take(EXAMPLE_ORDERS).map(|o| o.id).collect();
    let mut out: Vec<OrderResult> = orders
        .par_iter()
        .map_init(
            || {
                strategies
                    .iter()
                    .map(|f| (f.label.clone(), (f.make)()))
                    .collect::<Vec<_>>()
            },
            |strats, o| {
                let mut rows = Vec::with_capacity(strats.len() * envs.len());
                if let Some(view) = market.get(&o.symbol, o.date) {
                    let record = example_ids.contains(&o.id);
                    for env in envs {
                        for (label, s) in strats.iter_mut() {
                            s.reset(view, o, cfg);
                            let mut episode = env.open(view, o, cfg);
                            let outcome = play(episode.as_mut(), s.as_mut(), reward, record);
                            rows.push(OrderResult::new(label, env.name(), o, outcome));
                        }
                    }
                }
                progress(1);
                rows
            },
        )
        .flatten()
        .collect();
    out.sort_by(|a, b| (&a.env, &a.strategy, a.order_id).cmp(&(&b.env, &b.strategy, b.order_id)));
    out
}
