//! `serl bench team`: how a team's cost grows with its size. For N = 2,
//! 4, 8 and 16 agents: joint steps per second of one team episode in the
//! dynamic market (every member stepped at once), and MAPPO training steps
//! per second with its updates; and the peak memory while the team of 16
//! runs.

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;
use serl_data::{DataConfig, Split};
use serl_env::{generate_orders, DefaultReward, EnvConfig, MarketConfig, MarketData, OrderConfig};
use serl_train::{
    Critic, HybridMode, TeamConfig, TeamEnv, TrainConfig, TrainEnv, TrainSetup, TrainVenue,
};

use super::bench::{median, peak_rss_mb, BenchArgs};

/// One team size's figures.
#[derive(Serialize)]
struct TeamRow {
    agents: usize,
    /// Joint steps (every member once) per second, one team, one thread.
    joint_steps_per_second: f64,
    /// The same in member decisions per second.
    agent_steps_per_second: f64,
    /// MAPPO training, updates included: joint steps per second.
    train_steps_per_second: f64,
    /// Seconds per joint step over those of a team of 2, divided by N / 2:
    /// at most 1 when the cost grows at most linearly.
    cost_vs_linear: f64,
}

#[derive(Serialize)]
struct TeamFigures {
    data: String,
    setup: String,
    rows: Vec<TeamRow>,
    /// Peak resident memory while the team of 16 ran (the data loaded).
    peak_rss_mb: Option<f64>,
    runs: usize,
}

const SIZES: [usize; 4] = [2, 4, 8, 16];

pub fn team(a: BenchArgs) -> Result<ExitCode> {
    let data_cfg = DataConfig::default();
    let ds = serl_data::load(&a.data, &data_cfg)
        .with_context(|| format!("loading {}", a.data.display()))?;
    // At most 48 orders spread over the data: every one of their sessions
    // is calibrated before timing, which a large dataset would make long.
    let orders = serl_env::spread_orders(
        &generate_orders(&ds, Split::All, &data_cfg, &OrderConfig::default())?,
        48,
    );
    let market = MarketData::new(&ds, &data_cfg);
    // A session's market is calibrated once (a pilot day) and cached: do it
    // for every session first, so the figures time steps, not pilots.
    let mut seen = std::collections::HashSet::new();
    for o in &orders {
        if let Some(view) = market
            .get(&o.symbol, o.date)
            .filter(|_| seen.insert((o.symbol.clone(), o.date)))
        {
            serl_env::calibrate(view, &MarketConfig::default());
        }
    }
    let runs = a.runs.max(1);
    let mut rows = Vec::new();
    for n in SIZES {
        if n == SIZES[SIZES.len() - 1] {
            // Linux resets the peak resident size on "5": the figure after
            // the loop is then the team of 16's own.
            let _ = std::fs::write("/proc/self/clear_refs", "5");
        }
        rows.push(measure(&market, &orders, n, runs)?);
    }
    let base = rows[0].joint_steps_per_second;
    for r in &mut rows {
        r.cost_vs_linear = (base / r.joint_steps_per_second) / (r.agents as f64 / SIZES[0] as f64);
    }
    let f = TeamFigures {
        data: a.data.display().to_string(),
        setup: "cooperative team, 1% ADV parent orders, 5-minute decisions, dynamic market (default population); training: MAPPO, MLP [64, 64], 2 dynamic team envs, n_steps 64, batch 256, 4 epochs, 4 updates".into(),
        rows,
        peak_rss_mb: peak_rss_mb(),
        runs,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        print_figures(&f);
    }
    Ok(ExitCode::SUCCESS)
}

/// A team of `n`'s figures: joint steps alone and MAPPO training, medians
/// of `runs`.
fn measure(
    market: &MarketData,
    orders: &[serl_env::ParentOrder],
    n: usize,
    runs: usize,
) -> Result<TeamRow> {
    let env_cfg = EnvConfig {
        decision_minutes: 5,
        ..EnvConfig::default()
    };
    let cfg = team_config(n);
    let make = |seed: u64| -> Box<dyn TrainEnv + '_> {
        let reward = std::sync::Arc::new(DefaultReward {
            inventory_penalty: 2.0,
            terminal_penalty: 50.0,
        });
        let venue = TrainVenue::Dynamic(Box::default());
        let mut e = TeamEnv::new(market, orders, &env_cfg, reward, venue, &cfg);
        e.reset(&mut serl_train::env_rng(seed, 0));
        Box::new(e)
    };
    let mut env_rates = Vec::new();
    let mut train_rates = Vec::new();
    for run in 0..runs {
        env_rates.push(joint_rate(make(run as u64).as_mut(), n));
        let t = Instant::now();
        let out = serl_train::train(TrainSetup {
            config: TrainConfig {
                seed: run as u64,
                ..cfg.clone()
            },
            envs: vec![make(run as u64), make(run as u64 + 100)],
            validate: None,
            run_dir: None,
            resume: false,
            on_update: None,
            reward_critic: None,
        })?;
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

fn print_figures(f: &TeamFigures) {
    println!("{}", f.setup);
    println!(
        "{:>7} {:>16} {:>16} {:>18} {:>16}",
        "agents", "joint steps/s", "agent steps/s", "train steps/s", "cost vs linear"
    );
    for r in &f.rows {
        println!(
            "{:>7} {:>16.0} {:>16.0} {:>18.0} {:>16.2}",
            r.agents,
            r.joint_steps_per_second,
            r.agent_steps_per_second,
            r.train_steps_per_second,
            r.cost_vs_linear
        );
    }
    if let Some(m) = f.peak_rss_mb {
        println!("peak memory during the team of 16: {m:.0} MB (the loaded data included)");
    }
    println!(
        "medians of {} runs; one team per thread for the joint steps",
        f.runs
    );
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
    let mut rng = serl_train::env_rng(9, 9);
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
