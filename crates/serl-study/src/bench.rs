//! `serl bench env`: the environments' figures (`serl_env::bench`), with
//! the baselines from `serl-eval` that serl-env cannot name itself.

use std::path::Path;

use serl_env::bench::{BenchError, EnvBaselines, EnvFigures};
use serl_env::{EnvConfig, MarketData, ParentOrder, Reward};

/// The environment figures of the data at `data`, medians of `runs`; the
/// dynamic market's with `queue_reactive`'s flow too, when one is given.
pub fn env_figures(
    data: &Path,
    runs: usize,
    flow: &serl_env::Coarsening,
    queue_reactive: Option<&serl_env::QueueReactive>,
) -> Result<EnvFigures, BenchError> {
    let baselines = EnvBaselines {
        backtest: &backtest_baselines,
        passive_twap: &|| {
            Box::new(serl_eval::PassiveTwap {
                placement: serl_env::Placement::Passive { ticks: 0 },
            })
        },
    };
    serl_env::bench::env_figures(data, runs, &baselines, (flow, queue_reactive))
}

/// TWAP, VWAP and AC over `orders` in the static replay, on every core, as
/// `serl backtest` runs them; the result rows.
fn backtest_baselines(
    md: &MarketData,
    orders: &[ParentOrder],
    env: &EnvConfig,
    reward: &dyn Reward,
) -> usize {
    let factories: Vec<serl_eval::StrategyFactory> = ["twap", "vwap", "ac"]
        .iter()
        .map(|s| {
            serl_eval::StrategyFactory::from_spec(
                serl_eval::StrategySpec::parse(s).expect("known strategy"),
            )
        })
        .collect();
    serl_eval::Backtest::new(md, env)
        .venues(&[&serl_env::StaticVenue])
        .reward(reward)
        .run(orders, &factories)
        .len()
}
