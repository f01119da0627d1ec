//! `serl bench env`, `sim`, `train` and `team` (in `bench_team.rs`):
//! whole-pipeline throughput figures.
//! Each figure is the median of several runs on one thread unless it says
//! otherwise.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use serl_data::{DataConfig, Split};
use serl_env::{
    generate_orders, run_dynamic, run_static, DefaultReward, EnvConfig, MarketConfig, MarketData,
    OrderConfig, Sides, Twap,
};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Static and dynamic environment steps per second, and a full
    /// TWAP + VWAP + AC backtest's wall time with data loading.
    Env(BenchArgs),
    /// One simulated day: CPU time, events per second, memory, and how the
    /// cost grows with the number of agents.
    Sim(BenchArgs),
    /// PPO training throughput (environment steps per second, updates
    /// included) with the reference setup: MLP [64, 64], 8 static
    /// environments, n_steps 2048, batch 256, 10 epochs; and the same
    /// environments stepped without training.
    Train(BenchArgs),
    /// Teams of 2, 4, 8 and 16 agents in the dynamic market: joint steps
    /// per second, MAPPO training steps per second (updates included),
    /// how the cost grows with N, and peak memory.
    Team(BenchArgs),
}

#[derive(Args)]
pub struct BenchArgs {
    /// Bar data (default: the bundled sample).
    #[arg(long, default_value = "data/lean")]
    pub data: PathBuf,
    /// Runs per figure; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    #[arg(long)]
    pub json: bool,
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

pub(super) fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

pub fn run(cmd: BenchCommand) -> Result<ExitCode> {
    match cmd {
        BenchCommand::Env(a) => env(a),
        BenchCommand::Sim(a) => sim(a),
        BenchCommand::Train(a) => train(a),
        BenchCommand::Team(a) => super::bench_team::team(a),
    }
}

#[derive(Serialize)]
struct EnvFigures {
    data: String,
    static_steps_per_second_one_core: f64,
    static_steps: u64,
    /// Passive TWAP resting at the touch, the same orders and steps.
    static_placing_steps_per_second_one_core: f64,
    backtest_orders_per_strategy: usize,
    backtest_wall_seconds_with_loading: f64,
    dynamic_steps_per_second_one_core: f64,
    dynamic_episodes: usize,
    runs: usize,
}

fn env(a: BenchArgs) -> Result<ExitCode> {
    let data_cfg = DataConfig::default();
    let reward = DefaultReward {
        inventory_penalty: 2.0,
        terminal_penalty: 50.0,
    };
    let runs = a.runs.max(1);

    // A full baseline backtest, loading included, as the CLI runs it.
    let mut walls = Vec::new();
    let mut n_orders = 0;
    for _ in 0..runs.min(3) {
        let t = Instant::now();
        let ds = serl_data::load(&a.data, &data_cfg)
            .with_context(|| format!("loading {}", a.data.display()))?;
        let oc = OrderConfig {
            sides: Sides::Buy,
            ..Default::default()
        };
        let orders = generate_orders(&ds, Split::All, &data_cfg, &oc)?;
        let md = MarketData::new(&ds, &data_cfg);
        let factories: Vec<serl_eval::StrategyFactory> = ["twap", "vwap", "ac"]
            .iter()
            .map(|s| {
                serl_eval::StrategyFactory::from_spec(
                    serl_eval::StrategySpec::parse(s).expect("known strategy"),
                )
            })
            .collect();
        let env = EnvConfig::default();
        let r = serl_eval::run_backtest(
            &md,
            &orders,
            &factories,
            &[&serl_env::StaticVenue],
            &env,
            &reward,
            &|_| {},
        );
        std::hint::black_box(r.len());
        n_orders = orders.len();
        walls.push(t.elapsed().as_secs_f64());
    }

    let ds = serl_data::load(&a.data, &data_cfg)?;
    let md = MarketData::new(&ds, &data_cfg);
    let orders = generate_orders(&ds, Split::All, &data_cfg, &OrderConfig::default())?;
    let one_minute = EnvConfig {
        decision_minutes: 1,
        ..EnvConfig::default()
    };
    let (rates, steps) = static_rates(&md, &orders, &one_minute, &reward, runs, &mut || {
        Box::new(Twap)
    });
    // The same with every step's share resting at the touch (the static
    // fill model, docs/placement.md) and the leftovers crossed at the end.
    let placing = EnvConfig {
        terminal: serl_env::Terminal::ForceLiquidate,
        ..one_minute.clone()
    };
    let (placing_rates, _) = static_rates(&md, &orders, &placing, &reward, runs, &mut || {
        Box::new(serl_eval::PassiveTwap {
            placement: serl_env::Placement::Passive { ticks: 0 },
        })
    });

    let market = MarketConfig::default();
    let five = EnvConfig::default();
    let sample: Vec<_> = orders.iter().take(8).collect();
    let mut dyn_rates = Vec::new();
    for _ in 0..runs.min(3) {
        let (t, mut n) = (Instant::now(), 0u64);
        for o in &sample {
            let v = md
                .get(&o.symbol, o.date)
                .expect("session of a generated order");
            n += run_dynamic(&mut Twap, v, o, &five, &market, &reward, o.id, false).steps as u64;
        }
        dyn_rates.push(n as f64 / t.elapsed().as_secs_f64());
    }
    let f = EnvFigures {
        data: a.data.display().to_string(),
        static_steps_per_second_one_core: median(rates),
        static_steps: steps,
        static_placing_steps_per_second_one_core: median(placing_rates),
        backtest_orders_per_strategy: n_orders,
        backtest_wall_seconds_with_loading: median(walls),
        dynamic_steps_per_second_one_core: median(dyn_rates),
        dynamic_episodes: sample.len(),
        runs,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        println!("data                                 {}", f.data);
        println!(
            "static env, 1-minute steps, 1 core   {:.2} M steps/s ({} steps a run)",
            f.static_steps_per_second_one_core / 1e6,
            f.static_steps
        );
        println!(
            "  resting at the touch (passive TWAP) {:.2} M steps/s",
            f.static_placing_steps_per_second_one_core / 1e6
        );
        println!(
            "TWAP+VWAP+AC backtest, loading incl. {:.2} s wall ({} orders per strategy, all cores)",
            f.backtest_wall_seconds_with_loading, f.backtest_orders_per_strategy
        );
        println!("dynamic env, 5-minute steps, 1 core  {:.0} steps/s ({} episodes, each a simulated day)", f.dynamic_steps_per_second_one_core, f.dynamic_episodes);
        println!("medians of {} runs", f.runs);
    }
    Ok(ExitCode::SUCCESS)
}

/// Steps per second of `strategy()` over every order in the static
/// environment, one run after another on this thread, and the steps a run
/// took.
fn static_rates(
    md: &MarketData,
    orders: &[serl_env::ParentOrder],
    env: &EnvConfig,
    reward: &DefaultReward,
    runs: usize,
    strategy: &mut dyn FnMut() -> Box<dyn serl_env::Strategy>,
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

#[derive(Serialize)]
struct SimRow {
    agents: usize,
    seconds_per_day: f64,
    fit_seconds: f64,
    events: u64,
    events_per_second: f64,
}

#[derive(Serialize)]
struct SimFigures {
    session: String,
    rows: Vec<SimRow>,
    peak_rss_mb: Option<f64>,
    runs: usize,
}

fn sim(a: BenchArgs) -> Result<ExitCode> {
    let data_cfg = DataConfig::default();
    let ds = serl_data::load(&a.data, &data_cfg)
        .with_context(|| format!("loading {}", a.data.display()))?;
    let md = MarketData::new(&ds, &data_cfg);
    let s = ds.sessions.last().context("no session")?;
    let view = md.get(&s.symbol, s.date).context("no session view")?;
    let mut rows = Vec::new();
    // An RMSC04-like population is about 1,000 agents: mostly noise, some
    // value traders, a couple of market makers; ours adds a few momentum
    // and informed traders.
    for agents in [250usize, 500, 1000, 2000] {
        let base = MarketConfig {
            noise_agents: agents * 85 / 100,
            value_agents: agents * 9 / 100,
            momentum_agents: agents * 3 / 100,
            informed_agents: agents - agents * 97 / 100 - 2,
            market_makers: 2,
            ..MarketConfig::default()
        };
        // The first calibration of a session runs the pilot days that fit
        // the noise rates; it is timed apart from the day itself.
        let t = Instant::now();
        let (cal, cfg) = serl_env::calibrate(view, &base);
        let fit_seconds = t.elapsed().as_secs_f64();
        let mut secs = Vec::new();
        let mut events = 0;
        for seed in 0..a.runs.max(1) as u64 {
            let t = Instant::now();
            let mut sim = serl_market::Simulator::new(&cal, &cfg, seed);
            sim.run_until(390 * 60_000_000 - 1);
            events = sim.events();
            std::hint::black_box(sim.finish());
            secs.push(t.elapsed().as_secs_f64());
        }
        let sec = median(secs);
        rows.push(SimRow {
            agents,
            seconds_per_day: sec,
            fit_seconds,
            events,
            events_per_second: events as f64 / sec,
        });
    }
    let f = SimFigures {
        session: format!("{} {}", s.symbol, s.date),
        rows,
        peak_rss_mb: peak_rss_mb(),
        runs: a.runs.max(1),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        println!(
            "one simulated day of {} (09:30-16:00), one thread, median of {} runs",
            f.session, f.runs
        );
        println!(
            "{:>7} {:>12} {:>10} {:>14} {:>22}",
            "agents", "s per day", "events", "M events/s", "s to fit (once/session)"
        );
        for r in &f.rows {
            println!(
                "{:>7} {:>12.3} {:>10} {:>14.2} {:>22.3}",
                r.agents,
                r.seconds_per_day,
                r.events,
                r.events_per_second / 1e6,
                r.fit_seconds
            );
        }
        if let Some(m) = f.peak_rss_mb {
            println!("peak memory of this process: {m:.0} MB (data loading included)");
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct TrainFigures {
    data: String,
    setup: String,
    /// With the fused learner, which plain MLPs train with.
    train_steps_per_second: f64,
    /// With burn's autodiff learner (every other network).
    burn_autodiff_steps_per_second: f64,
    train_steps_per_run: usize,
    env_only_steps_per_second: f64,
    runs: usize,
}

fn train(a: BenchArgs) -> Result<ExitCode> {
    use serl_train::parts::VecEnv;
    use serl_train::{ExecutionEnv, TrainConfig, TrainEnv, TrainSetup, TrainVenue};
    let data_cfg = DataConfig::default();
    let ds = serl_data::load(&a.data, &data_cfg)
        .with_context(|| format!("loading {}", a.data.display()))?;
    let orders = generate_orders(&ds, Split::All, &data_cfg, &OrderConfig::default())?;
    let market = MarketData::new(&ds, &data_cfg);
    let env_cfg = EnvConfig {
        decision_minutes: 1,
        ..EnvConfig::default()
    };
    let reward: std::sync::Arc<dyn serl_env::Reward> = std::sync::Arc::new(DefaultReward {
        inventory_penalty: 2.0,
        terminal_penalty: 50.0,
    });
    let make_envs = || -> Vec<Box<dyn TrainEnv + '_>> {
        (0..8)
            .map(|_| {
                Box::new(ExecutionEnv::new(
                    &market,
                    &orders,
                    &env_cfg,
                    reward.clone(),
                    TrainVenue::Static,
                )) as Box<dyn TrainEnv + '_>
            })
            .collect()
    };
    let runs = a.runs.max(1);
    // The fused learner is what `serl train` uses for this network; burn's
    // autodiff learner is what any other network uses.
    let mut train_rates = Vec::new();
    let mut burn_rates = Vec::new();
    let mut env_rates = Vec::new();
    let mut per_run = 0;
    for run in 0..runs {
        for fused in [true, false] {
            let mut cfg = TrainConfig {
                total_steps: 8 * 2048,
                n_envs: 8,
                seed: run as u64,
                ..Default::default()
            };
            cfg.ppo.n_steps = 2048;
            cfg.ppo.fused = fused;
            cfg.hybrid.mode = serl_train::HybridMode::StaticOnly;
            let t = Instant::now();
            let out = serl_train::train(TrainSetup {
                config: cfg,
                envs: make_envs(),
                validate: None,
                run_dir: None,
                resume: false,
                on_update: None,
                reward_critic: None,
            })?;
            per_run = out.env_steps;
            let rate = out.env_steps as f64 / t.elapsed().as_secs_f64();
            if fused {
                train_rates.push(rate);
            } else {
                burn_rates.push(rate);
            }
        }

        let mut norm = serl_train::RunningNorm::new(serl_env::OBS_DIM);
        let mut venv = VecEnv::new(make_envs(), run as u64, 1, &mut norm, true);
        let t = Instant::now();
        let mut steps = 0usize;
        let actions = vec![0.02; venv.len()];
        while steps < 8 * 2048 {
            venv.step(&actions, &mut norm, true);
            steps += venv.len();
        }
        env_rates.push(steps as f64 / t.elapsed().as_secs_f64());
    }
    let f = TrainFigures {
        data: a.data.display().to_string(),
        setup: "PPO, MLP [64, 64] tanh, 8 static envs (1-minute decisions), n_steps 2048, batch 256, 10 epochs, CPU".into(),
        train_steps_per_second: median(train_rates),
        burn_autodiff_steps_per_second: median(burn_rates),
        train_steps_per_run: per_run,
        env_only_steps_per_second: median(env_rates),
        runs,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        println!("{}", f.setup);
        println!(
            "training, updates included: {:.0} env steps/s (fused learner; median of {runs}, {} steps each)",
            f.train_steps_per_second, f.train_steps_per_run
        );
        println!(
            "the same with burn's autodiff learner: {:.0} env steps/s",
            f.burn_autodiff_steps_per_second
        );
        println!(
            "the same 8 environments without training: {:.0} env steps/s",
            f.env_only_steps_per_second
        );
    }
    Ok(ExitCode::SUCCESS)
}
