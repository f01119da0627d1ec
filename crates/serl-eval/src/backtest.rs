//! Running strategies over parent orders, in parallel, at one or more
//! venues (`serl_env::Venue`: the static replay, the dynamic market).

use rayon::prelude::*;
use serl_env::{play, EnvConfig, MarketData, ParentOrder, Reward, StaticVenue, Strategy, Venue};

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

/// A backtest over one market: strategies (or teams) played over parent
/// orders at one or more venues, in parallel. Its settings are named as
/// they are set, each with a default:
///
/// ```text
/// let rows = Backtest::new(&market, &env_cfg)   // the static replay,
///     .venues(&[&StaticVenue, &dynamic])       // or these venues,
///     .reward(&terms)                          // the env's reward unless given,
///     .progress(&|n| bar.inc(n))               // silent unless given
///     .run(&orders, &strategies);
/// ```
#[derive(Clone)]
pub struct Backtest<'a> {
    pub(crate) market: &'a MarketData,
    pub(crate) env: &'a EnvConfig,
    pub(crate) venues: Vec<&'a dyn Venue>,
    pub(crate) reward: Option<&'a dyn Reward>,
    pub(crate) progress: Option<&'a (dyn Fn(u64) + Sync)>,
}

/// The static replay, [`Backtest`]'s venue unless told otherwise.
static STATIC_REPLAY: StaticVenue = StaticVenue;

impl<'a> Backtest<'a> {
    /// A backtest of `market`'s sessions under `env`: at the static replay,
    /// scored by `env`'s default reward, reporting no progress.
    pub fn new(market: &'a MarketData, env: &'a EnvConfig) -> Self {
        Backtest {
            market,
            env,
            venues: vec![&STATIC_REPLAY],
            reward: None,
            progress: None,
        }
    }

    /// Plays every order at each of `venues`, in place of the static replay.
    pub fn venues(mut self, venues: &[&'a dyn Venue]) -> Self {
        self.venues = venues.to_vec();
        self
    }

    /// Scores the episodes with `reward` (the order's PA does not depend
    /// on it; the reward columns and a reward's recorded terms do).
    pub fn reward(mut self, reward: &'a dyn Reward) -> Self {
        self.reward = Some(reward);
        self
    }

    /// Calls `progress(1)` as each parent order finishes.
    pub fn progress(mut self, progress: &'a (dyn Fn(u64) + Sync)) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Runs every strategy on every order at every venue, the rows sorted by
    /// venue, strategy and order. Orders whose session is missing from the
    /// market are skipped (the generator only draws from loaded sessions,
    /// so this means a caller mixed datasets).
    pub fn run(&self, orders: &[ParentOrder], strategies: &[StrategyFactory]) -> Vec<OrderResult> {
        self.scored(|reward| play_strategies(self, orders, strategies, reward))
    }

    /// Calls `f` with the reward the episodes are scored by: the one given,
    /// or the env's own.
    pub(crate) fn scored<T>(&self, f: impl FnOnce(&dyn Reward) -> T) -> T {
        match self.reward {
            Some(reward) => f(reward),
            None => f(&self.env.default_reward()),
        }
    }

    /// Calls the progress callback, where one was given.
    pub(crate) fn done(&self, orders: u64) {
        if let Some(p) = self.progress {
            p(orders);
        }
    }
}

/// [`Backtest::run`]'s work.
fn play_strategies(
    b: &Backtest,
    orders: &[ParentOrder],
    strategies: &[StrategyFactory],
    reward: &dyn Reward,
) -> Vec<OrderResult> {
    let (market, cfg, envs) = (b.market, b.env, &b.venues);
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
                b.done(1);
                rows
            },
        )
        .flatten()
        .collect();
    out.sort_by(|a, b| (&a.env, &a.strategy, a.order_id).cmp(&(&b.env, &b.strategy, b.order_id)));
    out
}
