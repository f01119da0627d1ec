//! `serl backtest`: strategies over parent orders, with a report.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::progress::Meter;
use anyhow::Result;
use clap::Args;
use serl_cluster::EngineKind;
use serl_data::Split;
use serl_env::TeamMode;
use serl_study::backtest::{BacktestData, EnvChoice};
use serl_study::backtest_run::{self, BacktestOverrides, BacktestRequest};
use serl_study::rundir::RunKind;
use serl_study::BacktestFile;

use super::args::{named, positive, warn, OutDir};
use crate::show;

mod team;

#[derive(Args)]
pub struct BacktestArgs {
    /// Bar data: a file or folder (CSV, CSV.gz, LEAN zips).
    #[arg(long, required_unless_present = "lobster")]
    pub data: Option<PathBuf>,
    /// LOBSTER days instead of bars: a sample zip or a folder of them
    /// (the deepest file of each symbol). Orders are drawn from every day;
    /// `--env lobster` fills resting orders by their place in the real
    /// queue, `--env all` compares that with the static and dynamic
    /// models (docs/placement.md).
    #[arg(long, conflicts_with = "data")]
    pub lobster: Option<PathBuf>,
    /// Which dates to draw orders from.
    #[arg(long, default_value = "test")]
    pub split: Split,
    /// twap, vwap, pov[:rate], ac[:risk_aversion], oracle,
    /// twap-passive[:PLACEMENT] (touch, touch+TICKS, mid, mid+BPS),
    /// peg-mid, signal[:tilt] (TWAP tilted by a planted forecast),
    /// policy:RUN_DIR. Repeat for several. With --team, each
    /// baseline plays once per member (N TWAPs, say), and alone on the
    /// whole order for the crowding cost.
    #[arg(long = "strategy", required_unless_present = "teams")]
    pub strategies: Vec<String>,
    /// Where the orders play (static unless a team plays: dynamic): the
    /// historical replay, the simulated market, both, the LOBSTER days'
    /// real queue (with --lobster), or all three.
    #[arg(long, value_parser = named::<EnvChoice>(EnvChoice::names()))]
    pub env: Option<EnvChoice>,
    /// A team trained by `serl train --algo mappo|ippo` (its run
    /// directory): every parent order is worked by --agents members
    /// sharing its policy and hearing each other. Repeat for several;
    /// per-agent and team tables, paired comparisons and the crowding cost
    /// (docs/team.md).
    #[arg(long = "team")]
    pub teams: Vec<PathBuf>,
    /// Members per team (default: the trained team's size). Without
    /// --team, the baselines alone play as teams of N.
    #[arg(long)]
    pub agents: Option<usize>,
    /// How the members share the work (default: as the team trained).
    #[arg(long, value_parser = named::<TeamMode>(&TeamMode::NAMES))]
    pub mode: Option<TeamMode>,
    /// Also play every team that talks with its members hearing nothing
    /// (the gain from communication is the difference).
    #[arg(long)]
    pub silence: bool,
    /// Also play the dynamic market with held-out populations (momentum-
    /// heavy, thin book, informed-heavy: serl_market::held_out_profiles),
    /// which no training saw.
    #[arg(long)]
    pub held_out: bool,
    /// A backtest config with [data], [orders] and [env] tables.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// An orders config (the contents of an [orders] table); overrides the
    /// one in --config.
    #[arg(long)]
    pub orders: Option<PathBuf>,
    /// Order size as a fraction of ADV (overrides the configs).
    #[arg(long, allow_negative_numbers = true, value_parser = positive)]
    pub qty_adv: Option<f64>,
    /// Order size in shares (overrides the configs).
    #[arg(long, allow_negative_numbers = true, value_parser = positive)]
    pub qty_shares: Option<f64>,
    /// Only these symbols.
    #[arg(long = "symbol")]
    pub symbols: Vec<String>,
    /// Minutes between decisions (overrides the config).
    #[arg(long)]
    pub decision_minutes: Option<u16>,
    /// Order seed (overrides the config).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Who replays the orders (overrides `[cluster] engine`): here, or as
    /// `--shards` tasks of a Slurm or HyperQueue array or a Kubernetes
    /// Indexed Job (`docs/cluster.md`).
    #[arg(long, value_parser = named::<EngineKind>(&EngineKind::NAMES))]
    pub engine: Option<EngineKind>,
    /// Shards of contiguous orders, one task each, on a cluster engine.
    #[arg(long, default_value_t = 8)]
    pub shards: usize,
    #[command(flatten)]
    pub output: OutDir,
}

/// The configs a backtest runs with, after every override.
pub fn resolve(a: &BacktestArgs) -> Result<BacktestFile> {
    let overrides = BacktestOverrides {
        orders: a.orders.clone(),
        qty_adv: a.qty_adv,
        qty_shares: a.qty_shares,
        symbols: a.symbols.clone(),
        seed: a.seed,
        decision_minutes: a.decision_minutes,
        engine: a.engine,
    };
    Ok(backtest_run::resolve(
        a.config.as_deref(),
        &a.teams,
        &overrides,
    )?)
}

pub fn run(a: BacktestArgs) -> Result<ExitCode> {
    let cfg = resolve(&a)?;
    a.output.claim(RunKind::Backtest, false)?;
    if !a.teams.is_empty() || a.agents.is_some() {
        return team::run(&a, &cfg);
    }
    let request = BacktestRequest {
        strategies: &a.strategies,
        env: a.env.unwrap_or(EnvChoice::STATIC),
        shards: a.shards,
        out: &a.output.out,
    };
    request.check(a.lobster.is_some())?;
    let t0 = std::time::Instant::now();
    let (lobster, bars) = (a.lobster.as_deref(), a.data.as_deref());
    let data = BacktestData::load(lobster, bars, a.split, &cfg, &warn)?;
    eprintln!(
        "loaded {} sessions of {} symbols in {:.2}s; {} orders from the {} split",
        data.ds.sessions.len(),
        data.ds.symbols().len(),
        t0.elapsed().as_secs_f64(),
        data.orders.len(),
        data.split
    );
    let t1 = std::time::Instant::now();
    let meter = Meter::new("backtest", "orders", data.orders.len() as u64);
    let progress = |n| meter.inc(n);
    let results = backtest_run::play(&data, &cfg, &request, &progress, &|l| eprintln!("{l}"))?;
    meter.finish();
    let secs = t1.elapsed().as_secs_f64();
    let report = data.report(&results, &cfg, &a.output.out)?;
    show::summaries(&report);
    println!(
        "{} episodes in {:.2}s; report: {}",
        results.len(),
        secs,
        a.output.out.join("report.html").display()
    );
    Ok(ExitCode::SUCCESS)
}
