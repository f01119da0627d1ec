//! Whole-pipeline throughput figures of the environments and the simulator
//! (`serl bench env` and `serl bench sim`), and what the benchmarks of the
//! crates above share: the benchmark data, medians and peak memory.
//!
//! Each figure is the median of several runs on one thread unless it says
//! otherwise. The functions measure and return the figures; printing them
//! is the caller's.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use serl_data::{DataConfig, DataError, Dataset, Split};

use crate::{
    calibrate, generate_orders, run_dynamic, run_static, Coarsening, DefaultReward, EnvConfig,
    EnvError, MarketConfig, MarketData, OrderConfig, ParentOrder, Reward, Sides, Strategy,
    Terminal, Twap,
};

/// What can stop a benchmark before it measures anything.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The data does not load.
    #[error("loading {}", path.display())]
    Load {
        /// The data asked for.
        path: PathBuf,
        /// Why it does not load.
        #[source]
        source: DataError,
    },
    /// No orders can be drawn over the data.
    #[error(transparent)]
    Orders(#[from] EnvError),
    /// The data has no session to simulate.
    #[error("no session")]
    NoSession,
    /// The last session has no prepared view.
    #[error("no session view")]
    NoSessionView,
}

/// The median of `v` (the upper one of an even count); NaN when empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// This process's peak resident memory so far, MB; `None` off Linux.
pub fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Starts [`peak_rss_mb`] afresh from the current size, so that a later
/// reading is the peak of what runs in between (Linux resets the peak on
/// "5"; elsewhere nothing happens).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The reward every benchmark scores steps with.
pub fn bench_reward() -> DefaultReward {
    DefaultReward {
        inventory_penalty: 2.0,
        terminal_penalty: 50.0,
    }
}

/// The dataset at `path`, loaded with the default data settings; the error
/// names the path.
pub fn load_dataset(path: &Path) -> Result<Dataset, BenchError> {
    serl_data::load(path, &DataConfig::default()).map_err(|source| BenchError::Load {
        path: path.to_path_buf(),
        source,
    })
}

/// A benchmark's market: the sessions of a dataset prepared, and the
/// default parent orders (1% of ADV, both sides) over all of it.
pub struct BenchMarket {
    /// Every session prepared.
    pub market: MarketData,
    /// The default orders over the whole dataset.
    pub orders: Vec<ParentOrder>,
}

/// The [`BenchMarket`] of the data at `path`.
pub fn load_market(path: &Path) -> Result<BenchMarket, BenchError> {
    let data_cfg = DataConfig::default();
    let ds = load_dataset(path)?;
    let orders = generate_orders(&ds, Split::All, &data_cfg, &OrderConfig::default())?;
    let market = MarketData::new(&ds, &data_cfg);
    Ok(BenchMarket { market, orders })
}

/// Backtests TWAP, VWAP and AC over the orders in the static replay, on
/// every core, with these settings and reward; returns the result rows.
pub type BacktestFn = dyn Fn(&MarketData, &[ParentOrder], &EnvConfig, &dyn Reward) -> usize;

/// The baselines the env figures time besides TWAP. They live in
/// `serl-eval`, which is built on this crate, so the caller hands them in.
pub struct EnvBaselines<'a> {
    /// The TWAP + VWAP + AC backtest.
    pub backtest: &'a BacktestFn,
    /// A TWAP whose every step's share rests at the touch.
    pub passive_twap: &'a dyn Fn() -> Box<dyn Strategy>,
}

/// Environment throughput (`serl bench env`).
#[derive(Debug, Clone, Serialize)]
pub struct EnvFigures {
    /// The data, as given.
    pub data: String,
    /// TWAP in the static replay, 1-minute decisions, steps per second.
    pub static_steps_per_second_one_core: f64,
    /// Steps of one run over every order.
    pub static_steps: u64,
    /// Passive TWAP resting at the touch, the same orders and steps.
    pub static_placing_steps_per_second_one_core: f64,
    /// Orders each strategy of the backtest worked.
    pub backtest_orders_per_strategy: usize,
    /// TWAP + VWAP + AC backtest's wall time, data loading included.
    pub backtest_wall_seconds_with_loading: f64,
    /// TWAP in the dynamic market, 5-minute decisions, steps per second.
    pub dynamic_steps_per_second_one_core: f64,
    /// Episodes (each a simulated day) of a dynamic run.
    pub dynamic_episodes: usize,
    /// The same dynamic run with a queue-reactive flow in place of the
    /// agents, when one was given (`serl bench env --queue-reactive`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_queue_reactive_steps_per_second_one_core: Option<f64>,
    /// The order flow the dynamic market played: the calibrated one, or a
    /// coarser one as training may use (`[train.hybrid] coarse_flow`).
    pub flow: Coarsening,
    /// Runs each median is of.
    pub runs: usize,
}

/// Measures the [`EnvFigures`] on the data at `path`, medians of `runs`
/// (at most 3 for the backtest and the dynamic market, which are slow);
/// the dynamic market with `flow`, and with `queue_reactive`'s flow too
/// when one is given.
pub fn env_figures(
    path: &Path,
    runs: usize,
    baselines: &EnvBaselines,
    (flow, queue_reactive): (&Coarsening, Option<&serl_market::QueueReactive>),
) -> Result<EnvFigures, BenchError> {
    let reward = bench_reward();
    let runs = runs.max(1);
    let (walls, backtest_orders) = backtest_walls(path, runs.min(3), baselines, &reward)?;

    let BenchMarket { market, orders } = load_market(path)?;
    let one_minute = EnvConfig {
        decision_minutes: 1,
        ..EnvConfig::default()
    };
    let (rates, steps) = static_rates(&market, &orders, &one_minute, &reward, runs, &mut || {
        Box::new(Twap)
    });
    // The same with every step's share resting at the touch (the static
    // fill model, docs/placement.md) and the leftovers crossed at the end.
    let placing = EnvConfig {
        terminal: Terminal::ForceLiquidate,
        ..one_minute.clone()
    };
    let (placing_rates, _) = static_rates(&market, &orders, &placing, &reward, runs, &mut || {
        (baselines.passive_twap)()
    });
    let sample: Vec<_> = orders.iter().take(8).collect();
    let agents = flow.apply(&MarketConfig::default());
    let dyn_rates = dynamic_rates(&market, &sample, &reward, runs.min(3), &agents);
    let queue_reactive = queue_reactive.map(|model| {
        let qr = MarketConfig {
            queue_reactive: Some(Box::new(model.clone())),
            ..MarketConfig::default()
        };
        median(dynamic_rates(&market, &sample, &reward, runs.min(3), &qr))
    });
    Ok(EnvFigures {
        data: path.display().to_string(),
        static_steps_per_second_one_core: median(rates),
        static_steps: steps,
        static_placing_steps_per_second_one_core: median(placing_rates),
        backtest_orders_per_strategy: backtest_orders,
        backtest_wall_seconds_with_loading: median(walls),
        dynamic_steps_per_second_one_core: median(dyn_rates),
        dynamic_episodes: sample.len(),
        dynamic_queue_reactive_steps_per_second_one_core: queue_reactive,
        flow: *flow,
        runs,
    })
}

/// Wall seconds of `runs` full baseline backtests of buy orders, loading
/// included, as the CLI runs one; and the orders a strategy worked.
fn backtest_walls(
    path: &Path,
    runs: usize,
    baselines: &EnvBaselines,
    reward: &DefaultReward,
) -> Result<(Vec<f64>, usize), BenchError> {
    let data_cfg = DataConfig::default();
    let mut walls = Vec::new();
    let mut n_orders = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let ds = load_dataset(path)?;
        let oc = OrderConfig {
            sides: Sides::Buy,
            ..Default::default()
        };
        let orders = generate_orders(&ds, Split::All, &data_cfg, &oc)?;
        let md = MarketData::new(&ds, &data_cfg);
        let rows = (baselines.backtest)(&md, &orders, &EnvConfig::default(), reward);
        std::hint::black_box(rows);
        n_orders = orders.len();
        walls.push(t.elapsed().as_secs_f64());
    }
    Ok((walls, n_orders))
}

/// Steps per second of `strategy()` over every order in the static
/// environment, one run after another on this thread, and the steps a run
/// took.
fn static_rates(
    md: &MarketData,
    orders: &[ParentOrder],
    env: &EnvConfig,
    reward: &DefaultReward,
    runs: usize,
    strategy: &mut dyn FnMut() -> Box<dyn Strategy>,
) -> (Vec<f64>, u64) {
    let mut rates = Vec::new();
    let mut steps = 0u64;
    for _ in 0..runs {
        steps = 0;
        let mut s = strategy();
        let t = Instant::now();
        for o in orders {
            let v = md
                .get(&o.symbol, o.date)
                .expect("session of a generated order");
            steps += run_static(s.as_mut(), v, o, env, reward, false).steps as u64;
        }
        rates.push(steps as f64 / t.elapsed().as_secs_f64());
    }
    (rates, steps)
}

/// Steps per second of TWAP over `sample` in the dynamic `market` with
/// 5-minute decisions, `runs` times.
fn dynamic_rates(
    md: &MarketData,
    sample: &[&ParentOrder],
    reward: &DefaultReward,
    runs: usize,
    market: &MarketConfig,
) -> Vec<f64> {
    let five = EnvConfig::default();
    let mut rates = Vec::new();
    for _ in 0..runs {
        let (t, mut n) = (Instant::now(), 0u64);
        for o in sample {
            let v = md
                .get(&o.symbol, o.date)
                .expect("session of a generated order");
            n += run_dynamic(&mut Twap, v, o, &five, (market, o.id), reward, false).steps as u64;
        }
        rates.push(n as f64 / t.elapsed().as_secs_f64());
    }
    rates
}

/// One population size's simulated day.
#[derive(Debug, Clone, Serialize)]
pub struct SimRow {
    /// Agents in the simulated market.
    pub agents: usize,
    /// Seconds of CPU per simulated day (09:30-16:00).
    pub seconds_per_day: f64,
    /// Seconds fitting the noise rates, once per session.
    pub fit_seconds: f64,
    /// Events the day processed.
    pub events: u64,
    /// Events per second.
    pub events_per_second: f64,
}

/// Simulator cost by population (`serl bench sim`).
#[derive(Debug, Clone, Serialize)]
pub struct SimFigures {
    /// The session simulated, `SYMBOL DATE`.
    pub session: String,
    /// One row per population size.
    pub rows: Vec<SimRow>,
    /// The queue-reactive flow's day, when one was given (`agents`: 0).
    pub queue_reactive: Option<SimRow>,
    /// Peak resident memory of the process, data loading included.
    pub peak_rss_mb: Option<f64>,
    /// Runs each median is of.
    pub runs: usize,
    /// The flow simulated: the calibrated one (the default) or coarser.
    pub flow: Coarsening,
}

/// Simulates the last session of the data at `path` with 250 to 2,000
/// agents, medians of `runs` seeds, with the order flow made coarser by
/// `flow` (the default: the calibrated flow); and with `queue_reactive`,
/// the same day of that queue-reactive flow.
pub fn sim_figures(
    path: &Path,
    runs: usize,
    flow: &Coarsening,
    queue_reactive: Option<&serl_market::QueueReactive>,
) -> Result<SimFigures, BenchError> {
    let data_cfg = DataConfig::default();
    let ds = load_dataset(path)?;
    let md = MarketData::new(&ds, &data_cfg);
    let s = ds.sessions.last().ok_or(BenchError::NoSession)?;
    let view = md.get(&s.symbol, s.date).ok_or(BenchError::NoSessionView)?;
    let runs = runs.max(1);
    // An RMSC04-like population is about 1,000 agents: mostly noise, some
    // value traders, a couple of market makers; ours adds a few momentum
    // and informed traders.
    let rows = [250usize, 500, 1000, 2000]
        .into_iter()
        .map(|agents| {
            let base = flow.apply(&MarketConfig {
                noise_agents: agents * 85 / 100,
                value_agents: agents * 9 / 100,
                momentum_agents: agents * 3 / 100,
                informed_agents: agents - agents * 97 / 100 - 2,
                market_makers: 2,
                ..MarketConfig::default()
            });
            time_day(view, &base, runs, agents)
        })
        .collect();
    let queue_reactive = queue_reactive.map(|model| {
        let base = MarketConfig {
            queue_reactive: Some(Box::new(model.clone())),
            ..MarketConfig::default()
        };
        time_day(view, &base, runs, 0)
    });
    Ok(SimFigures {
        session: format!("{} {}", s.symbol, s.date),
        rows,
        queue_reactive,
        peak_rss_mb: peak_rss_mb(),
        runs,
        flow: *flow,
    })
}

/// One market's day on `view`: the median seconds of `runs` seeds, its
/// events, and the calibration's pilot days timed apart.
fn time_day(view: &crate::SessionView, base: &MarketConfig, runs: usize, agents: usize) -> SimRow {
    // The first calibration of a session runs the pilot days that fit
    // the noise rates; it is timed apart from the day itself.
    let t = Instant::now();
    let (cal, cfg) = calibrate(view, base);
    let fit_seconds = t.elapsed().as_secs_f64();
    let mut secs = Vec::new();
    let mut events = 0;
    for seed in 0..runs as u64 {
        let t = Instant::now();
        let mut sim = serl_market::Simulator::new(&cal, &cfg, seed);
        sim.run_until(390 * 60_000_000 - 1);
        events = sim.events();
        std::hint::black_box(sim.finish());
        secs.push(t.elapsed().as_secs_f64());
    }
    let sec = median(secs);
    SimRow {
        agents,
        seconds_per_day: sec,
        fit_seconds,
        events,
        events_per_second: events as f64 / sec,
    }
}

/// What a coarser flow changes, in a line (none for the calibrated flow).
fn flow_line(f: &mut std::fmt::Formatter<'_>, c: &Coarsening) -> std::fmt::Result {
    if *c == Coarsening::default() {
        return Ok(());
    }
    let merged = if c.merge_makers {
        ", makers merged into one"
    } else {
        ""
    };
    writeln!(
        f,
        "coarser flow: noise limit orders x{}, makers' re-quotes every x{} their interval{merged}",
        c.noise_limit_mult, c.mm_interval_mult
    )
}

/// The figures as `serl bench env` prints them.
impl std::fmt::Display for EnvFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "data                                 {}", self.data)?;
        writeln!(
            f,
            "static env, 1-minute steps, 1 core   {:.2} M steps/s ({} steps a run)",
            self.static_steps_per_second_one_core / 1e6,
            self.static_steps
        )?;
        writeln!(
            f,
            "  resting at the touch (passive TWAP) {:.2} M steps/s",
            self.static_placing_steps_per_second_one_core / 1e6
        )?;
        writeln!(
            f,
            "TWAP+VWAP+AC backtest, loading incl. {:.2} s wall ({} orders per strategy, all cores)",
            self.backtest_wall_seconds_with_loading, self.backtest_orders_per_strategy
        )?;
        writeln!(
            f,
            "dynamic env, 5-minute steps, 1 core  {:.0} steps/s ({} episodes, each a simulated day)",
            self.dynamic_steps_per_second_one_core, self.dynamic_episodes
        )?;
        if let Some(rate) = self.dynamic_queue_reactive_steps_per_second_one_core {
            writeln!(f, "  the queue-reactive flow in place    {rate:.0} steps/s")?;
        }
        flow_line(f, &self.flow)?;
        writeln!(f, "medians of {} runs", self.runs)
    }
}

/// The figures as `serl bench sim` prints them.
impl std::fmt::Display for SimFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "one simulated day of {} (09:30-16:00), one thread, median of {} runs",
            self.session, self.runs
        )?;
        flow_line(f, &self.flow)?;
        writeln!(
            f,
            "{:>7} {:>12} {:>10} {:>14} {:>22}",
            "agents", "s per day", "events", "M events/s", "s to fit (once/session)"
        )?;
        for r in self.rows.iter().chain(&self.queue_reactive) {
            let who = if r.agents == 0 {
                "QR flow".to_string()
            } else {
                r.agents.to_string()
            };
            writeln!(
                f,
                "{:>7} {:>12.3} {:>10} {:>14.2} {:>22.3}",
                who,
                r.seconds_per_day,
                r.events,
                r.events_per_second / 1e6,
                r.fit_seconds
            )?;
        }
        if let Some(m) = self.peak_rss_mb {
            writeln!(
                f,
                "peak memory of this process: {m:.0} MB (data loading included)"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_takes_the_upper_middle_and_nan_when_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(Vec::new()).is_nan());
    }

    #[test]
    fn a_missing_dataset_names_its_path() {
        let err = load_dataset(Path::new("/no/such/data")).expect_err("no data");
        assert!(err.to_string().contains("/no/such/data"), "{err}");
    }
}
