//! Training throughput figures: `serl bench train` (PPO and DDQN with the
//! reference setup, and the same environments stepped without training) and
//! `serl bench team` (how a team's cost grows with its size). The
//! functions measure and return the figures; printing them is the
//! caller's. Medians, peak memory and the benchmark data are
//! [`serl_env::bench`]'s.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serl_env::bench::{
    bench_reward, load_market, median, peak_rss_mb, reset_peak_rss, BenchMarket,
};
use serl_env::{EnvConfig, MarketConfig, MarketData, ParentOrder, Reward};

use crate::parts::VecEnv;
use crate::{
    env_rng, train, Algo, Critic, ExecutionEnv, HybridMode, RunningNorm, TeamConfig, TeamEnv,
    TrainConfig, TrainEnv, TrainError, TrainSetup,
};

/// What can stop a training benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The data does not load, or no orders can be drawn over it.
    #[error(transparent)]
    Data(#[from] serl_env::bench::BenchError),
    /// A training run fails.
    #[error(transparent)]
    Train(#[from] TrainError),
}

/// PPO training throughput (`serl bench train`).
#[derive(Debug, Clone, Serialize)]
pub struct TrainFigures {
    /// The data, as given.
    pub data: String,
    /// The setup timed, in words.
    pub setup: String,
    /// With the fused learner, which plain MLPs train with.
    pub train_steps_per_second: f64,
    /// With burn's autodiff learner (every other network).
    pub burn_autodiff_steps_per_second: f64,
    /// DDQN on the same environments and network (one 64-row gradient
    /// step per vector step), with its fused learner.
    pub ddqn_fused_steps_per_second: f64,
    /// The same DDQN with burn's autodiff learner.
    pub ddqn_burn_steps_per_second: f64,
    /// Environment steps of one training run.
    pub train_steps_per_run: usize,
    /// The same environments stepped without training.
    pub env_only_steps_per_second: f64,
    /// Runs each median is of.
    pub runs: usize,
}

/// Steps of one training run: 8 environments, n_steps 2048.
const TRAIN_STEPS: usize = 8 * 2048;

/// Measures the [`TrainFigures`] on the data at `path`, medians of `runs`.
pub fn train_figures(path: &Path, runs: usize) -> Result<TrainFigures, BenchError> {
    let BenchMarket { market, orders } = load_market(path)?;
    let env_cfg = EnvConfig {
        decision_minutes: 1,
        ..EnvConfig::default()
    };
    let reward: Arc<dyn Reward> = Arc::new(bench_reward());
    let make_envs = || -> Vec<Box<dyn TrainEnv + '_>> {
        (0..8)
            .map(|_| {
                Box::new(ExecutionEnv::new(
                    &market,
                    &orders,
                    &env_cfg,
                    reward.clone(),
                    Box::new(serl_env::StaticVenue),
                )) as Box<dyn TrainEnv + '_>
            })
            .collect()
    };
    let runs = runs.max(1);
    // The fused learner is what `serl train` uses for this network; burn's
    // autodiff learner is what any other network uses.
    // Rates by (algorithm, fused).
    let mut rates: [[Vec<f64>; 2]; 2] = Default::default();
    let mut env_rates = Vec::new();
    let mut per_run = 0;
    for run in 0..runs {
        for (a, algo) in [Algo::PPO, Algo::DDQN].into_iter().enumerate() {
            for fused in [true, false] {
                let t = Instant::now();
                let out = train(TrainSetup::bare(
                    reference_config(run as u64, algo, fused),
                    make_envs(),
                ))?;
                per_run = out.env_steps;
                rates[a][usize::from(!fused)]
                    .push(out.env_steps as f64 / t.elapsed().as_secs_f64());
            }
        }
        env_rates.push(env_only_rate(make_envs(), run as u64));
    }
    let [[train_rates, burn_rates], [ddqn_fused, ddqn_burn]] = rates;
    Ok(TrainFigures {
        data: path.display().to_string(),
        setup: "PPO, MLP [64, 64] tanh, 8 static envs (1-minute decisions), n_steps 2048, batch 256, 10 epochs, CPU".into(),
        train_steps_per_second: median(train_rates),
        burn_autodiff_steps_per_second: median(burn_rates),
        ddqn_fused_steps_per_second: median(ddqn_fused),
        ddqn_burn_steps_per_second: median(ddqn_burn),
        train_steps_per_run: per_run,
        env_only_steps_per_second: median(env_rates),
        runs,
    })
}

/// The reference setup in the static replay only, for PPO or DDQN, with
/// the fused learner or burn's autodiff one.
fn reference_config(seed: u64, algo: Algo, fused: bool) -> TrainConfig {
    let mut cfg = TrainConfig {
        algo,
        total_steps: TRAIN_STEPS,
        n_envs: 8,
        seed,
        ..Default::default()
    };
    cfg.ppo.n_steps = 2048;
    cfg.ppo.fused = fused;
    cfg.table_mut::<crate::DdqnLearner>().fused = fused;
    cfg.hybrid.mode = HybridMode::StaticOnly;
    cfg
}

/// Steps per second of `envs` stepped together as a rollout steps them,
/// with a fixed action and no network, for as many steps as a training run.
fn env_only_rate(envs: Vec<Box<dyn TrainEnv + '_>>, seed: u64) -> f64 {
    let mut norm = RunningNorm::new(serl_env::OBS_DIM);
    let mut venv = VecEnv::new(envs, seed, 1, &mut norm, true);
    let t = Instant::now();
    let mut steps = 0usize;
    let actions = vec![0.02; venv.len()];
    while steps < TRAIN_STEPS {
        venv.step(&actions, &mut norm, true);
        steps += venv.len();
    }
    steps as f64 / t.elapsed().as_secs_f64()
}

/// One team size's figures.
#[derive(Debug, Clone, Serialize)]
pub struct TeamRow {
    /// Members of the team.
    pub agents: usize,
    /// Joint steps (every member once) per second, one team, one thread.
    pub joint_steps_per_second: f64,
    /// The same in member decisions per second.
    pub agent_steps_per_second: f64,
    /// MAPPO training, updates included: joint steps per second.
    pub train_steps_per_second: f64,
    /// Seconds per joint step over those of a team of 2, divided by N / 2:
    /// at most 1 when the cost grows at most linearly.
    pub cost_vs_linear: f64,
}

/// How a team's cost grows with its size (`serl bench team`).
#[derive(Debug, Clone, Serialize)]
pub struct TeamFigures {
    /// The data, as given.
    pub data: String,
    /// The setup timed, in words.
    pub setup: String,
    /// One row per team size.
    pub rows: Vec<TeamRow>,
    /// Peak resident memory while the team of 16 ran (the data loaded).
    pub peak_rss_mb: Option<f64>,
    /// Runs each median is of.
    pub runs: usize,
}

/// The team sizes timed, smallest first (the cost is relative to it).
pub const TEAM_SIZES: [usize; 4] = [2, 4, 8, 16];

/// Measures the [`TeamFigures`] on the data at `path`, medians of `runs`:
/// for each of [`TEAM_SIZES`], joint steps per second of one team episode
/// in the dynamic market and MAPPO training steps per second.
pub fn team_figures(path: &Path, runs: usize) -> Result<TeamFigures, BenchError> {
    let BenchMarket { market, orders } = load_market(path)?;
    // At most 48 orders spread over the data: every one of their sessions
    // is calibrated before timing, which a large dataset would make long.
    let orders = serl_env::spread_orders(&orders, 48);
    calibrate_sessions(&market, &orders);
    let runs = runs.max(1);
    let mut rows = Vec::new();
    for n in TEAM_SIZES {
        if n == TEAM_SIZES[TEAM_SIZES.len() - 1] {
            // The figure after the loop is then the largest team's own.
            reset_peak_rss();
        }
        rows.push(measure_team(&market, &orders, n, runs)?);
    }
    let base = rows[0].joint_steps_per_second;
    for r in &mut rows {
        r.cost_vs_linear =
            (base / r.joint_steps_per_second) / (r.agents as f64 / TEAM_SIZES[0] as f64);
    }
    Ok(TeamFigures {
        data: path.display().to_string(),
        setup: "cooperative team, 1% ADV parent orders, 5-minute decisions, dynamic market (default population); training: MAPPO, MLP [64, 64], 2 dynamic team envs, n_steps 64, batch 256, 4 epochs, 4 updates".into(),
        rows,
        peak_rss_mb: peak_rss_mb(),
        runs,
    })
}

/// A session's market is calibrated once (a pilot day) and cached: doing
/// it for every session of `orders` first makes the figures time steps,
/// not pilots.
fn calibrate_sessions(market: &MarketData, orders: &[ParentOrder]) {
    let mut seen = std::collections::HashSet::new();
    for o in orders {
        if let Some(view) = market
            .get(&o.symbol, o.date)
            .filter(|_| seen.insert((o.symbol.clone(), o.date)))
        {
            serl_env::calibrate(view, &MarketConfig::default());
        }
    }
}

/// A team of `n`'s figures: joint steps alone and MAPPO training, medians
/// of `runs`.
fn measure_team(
    market: &MarketData,
    orders: &[ParentOrder],
    n: usize,
    runs: usize,
) -> Result<TeamRow, BenchError> {
    let env_cfg = EnvConfig {
        decision_minutes: 5,
        ..EnvConfig::default()
    };
    let cfg = team_config(n);
    let make = |seed: u64| -> Box<dyn TrainEnv + '_> {
        let reward = Arc::new(bench_reward());
        let venue = Box::new(serl_env::DynamicVenue {
            market: Default::default(),
            seed: 0,
        });
        let mut e = TeamEnv::new(market, orders, &env_cfg, reward, venue, &cfg);
        e.reset(&mut env_rng(seed, 0));
        Box::new(e)
    };
    let mut env_rates = Vec::new();
    let mut train_rates = Vec::new();
    for run in 0..runs {
        env_rates.push(joint_rate(make(run as u64).as_mut(), n));
        let t = Instant::now();
        let config = TrainConfig {
            seed: run as u64,
            ..cfg.clone()
        };
        let out = train(TrainSetup::bare(
            config,
            vec![make(run as u64), make(run as u64 + 100)],
        ))?;
        train_rates.push(out.env_steps as f64 / t.elapsed().as_secs_f64());
    }
    let joint = median(env_rates);
    Ok(TeamRow {
        agents: n,
        joint_steps_per_second: joint,
        agent_steps_per_second: joint * n as f64,
        train_steps_per_second: median(train_rates),
        cost_vs_linear: 0.0,
    })
}

/// MAPPO with a cooperative team of `n` in the dynamic market only.
fn team_config(n: usize) -> TrainConfig {
    let mut cfg = TrainConfig {
        n_envs: 2,
        total_steps: 2 * 64 * 4,
        team: Some(TeamConfig {
            agents: n,
            critic: Critic::Centralized,
            peers: 0,
            ..TeamConfig::default()
        }),
        ..Default::default()
    };
    cfg.ppo.n_steps = 64;
    cfg.ppo.epochs = 4;
    cfg.hybrid.mode = HybridMode::DynamicOnly;
    cfg
}

/// Joint steps per second of one team stepped alone, at an even pace,
/// over about 240 steps (three whole days at 5-minute decisions).
fn joint_rate(env: &mut dyn TrainEnv, n: usize) -> f64 {
    let mut rng = env_rng(9, 9);
    let mut rewards = vec![0.0; n];
    let actions = vec![(1.0 / 78.0, 0u8); n];
    let t = Instant::now();
    let mut steps = 0;
    while steps < 240 {
        if env.step_agents(&actions, &mut rewards) {
            env.reset(&mut rng);
        }
        steps += 1;
    }
    steps as f64 / t.elapsed().as_secs_f64()
}

/// The figures as `serl bench train` prints them.
impl std::fmt::Display for TrainFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.setup)?;
        writeln!(
            f,
            "training, updates included: {:.0} env steps/s (fused learner; median of {}, {} steps each)",
            self.train_steps_per_second, self.runs, self.train_steps_per_run
        )?;
        writeln!(
            f,
            "the same with burn's autodiff learner: {:.0} env steps/s",
            self.burn_autodiff_steps_per_second
        )?;
        writeln!(
            f,
            "DDQN on the same: {:.0} env steps/s fused, {:.0} with burn's autodiff learner",
            self.ddqn_fused_steps_per_second, self.ddqn_burn_steps_per_second
        )?;
        writeln!(
            f,
            "the same 8 environments without training: {:.0} env steps/s",
            self.env_only_steps_per_second
        )
    }
}

/// The figures as `serl bench team` prints them.
impl std::fmt::Display for TeamFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.setup)?;
        writeln!(
            f,
            "{:>7} {:>16} {:>16} {:>18} {:>16}",
            "agents", "joint steps/s", "agent steps/s", "train steps/s", "cost vs linear"
        )?;
        for r in &self.rows {
            writeln!(
                f,
                "{:>7} {:>16.0} {:>16.0} {:>18.0} {:>16.2}",
                r.agents,
                r.joint_steps_per_second,
                r.agent_steps_per_second,
                r.train_steps_per_second,
                r.cost_vs_linear
            )?;
        }
        if let Some(m) = self.peak_rss_mb {
            writeln!(
                f,
                "peak memory during the team of 16: {m:.0} MB (the loaded data included)"
            )?;
        }
        writeln!(
            f,
            "medians of {} runs; one team per thread for the joint steps",
            self.runs
        )
    }
}
