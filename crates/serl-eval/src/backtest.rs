//! Running strategies over parent orders, in parallel, in one or more
//! environments.

use rayon::prelude::*;
use serl_env::{
    run_static, EnvConfig, ExecutionOutcome, MarketData, ParentOrder, Reward, SessionView, Strategy,
};

use crate::metrics::OrderResult;

/// An environment that plays whole episodes. The static replay is
/// [`StaticRunner`]; the dynamic market plugs in through the same trait.
pub trait EpisodeRunner: Sync {
    fn name(&self) -> &str;
    fn run(
        &self,
        strategy: &mut dyn Strategy,
        view: &SessionView,
        order: &ParentOrder,
        cfg: &EnvConfig,
        reward: &dyn Reward,
        record_path: bool,
    ) -> ExecutionOutcome;
}

/// The static historical replay.
pub struct StaticRunner;

impl EpisodeRunner for StaticRunner {
    fn name(&self) -> &str {
        "static"
    }
    fn run(
        &self,
        strategy: &mut dyn Strategy,
        view: &SessionView,
        order: &ParentOrder,
        cfg: &EnvConfig,
        reward: &dyn Reward,
        record_path: bool,
    ) -> ExecutionOutcome {
        run_static(strategy, view, order, cfg, reward, record_path)
    }
}

/// The dynamic multi-agent market. Each episode simulates the order's
/// session with a seed derived from `seed` and the order id, so that every
/// strategy meets the same simulated day.
pub struct DynamicRunner {
    pub market: serl_env::MarketConfig,
    pub seed: u64,
}

impl EpisodeRunner for DynamicRunner {
    fn name(&self) -> &str {
        "dynamic"
    }
    fn run(
        &self,
        strategy: &mut dyn Strategy,
        view: &SessionView,
        order: &ParentOrder,
        cfg: &EnvConfig,
        reward: &dyn Reward,
        record_path: bool,
    ) -> ExecutionOutcome {
        let seed = self.seed ^ order.id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        serl_env::run_dynamic(
            strategy,
            view,
            order,
            cfg,
            &self.market,
            reward,
            seed,
            record_path,
        )
    }
}

/// A named way to make fresh strategy instances (one per worker).
pub struct StrategyFactory {
    pub label: String,
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
    envs: &[&dyn EpisodeRunner],
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
                            let outcome = env.run(s.as_mut(), view, o, cfg, reward, record);
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
