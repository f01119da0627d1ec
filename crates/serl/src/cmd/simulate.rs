//! `serl simulate`: a real symbol-day in the multi-agent market, checked
//! against the real day and against the stylized facts of real markets.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serl_cluster::EngineKind;
use serl_study::rundir::RunKind;
use serl_study::simulate::{ImpactRequest, SessionRequest};

use super::args::{named, warn, OutDir};

mod calibrate;
mod fills;
mod realism;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub command: Option<SimulateCommand>,
    #[command(flatten)]
    pub session: SessionArgs,
    /// Simulated days (seeds) the checks pool over.
    #[arg(long, value_parser = crate::cmd::args::at_least_one::<u64>, default_value_t = 20)]
    pub seeds: u64,
    #[arg(long, required = true)]
    pub out: Option<PathBuf>,
    /// Write over the run already in --out: its files are removed first
    /// (a folder serl did not write is refused even so).
    #[arg(long)]
    pub force: bool,
}

#[derive(clap::Subcommand)]
pub enum SimulateCommand {
    /// The metaorder impact study: TWAP buys and sells of 1-20% of the
    /// day's volume against the same seeds without them.
    Impact(ImpactArgs),
    /// Realism of the simulated order flow against real LOBSTER days: the
    /// agent-based market, the queue-reactive flow and a parametric
    /// Poisson baseline, each
    /// calibrated to the same symbol-day, scored statistic by statistic
    /// (L1 and Wasserstein-1 with bootstrap CIs).
    Realism(realism::RealismArgs),
    /// Passive fills against the real queue: the same resting orders in a
    /// LOBSTER day's queue, the static replay's bar rule and the
    /// agent-based market calibrated to the day, their fill probability
    /// within 1, 5 and 30 minutes, time to fill and adverse moves.
    Fills(fills::FillsArgs),
    /// Fit the queue-reactive order flow (Huang, Lehalle & Rosenbaum: each
    /// level's limit, cancel and market order rates by its queue's size)
    /// to LOBSTER days: one model file per symbol, for `[market]
    /// queue_reactive = "FILE"`.
    Calibrate(calibrate::CalibrateArgs),
}

/// Which real session to simulate.
#[derive(Args)]
pub struct SessionArgs {
    #[arg(long, required = true)]
    pub data: Option<PathBuf>,
    #[arg(long, required = true)]
    pub symbol: Option<String>,
    /// The session, YYYY-MM-DD.
    #[arg(long, required = true)]
    pub date: Option<chrono::NaiveDate>,
    /// A TOML with [data] and [market] tables (see configs/market.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A LOBSTER sample (zip or message CSV) to calibrate the noise
    /// traders' order size and cancellation rate from.
    #[arg(long)]
    pub lobster: Option<PathBuf>,
    /// Who simulates the seeds (overrides `[cluster] engine`): here, or
    /// one task per seed on a cluster, planned in the output directory
    /// (`docs/cluster.md`).
    #[arg(long, value_parser = named::<EngineKind>(&EngineKind::NAMES))]
    pub engine: Option<EngineKind>,
}

#[derive(Args)]
pub struct ImpactArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Seeds per metaorder size (each runs a buy and a sell).
    #[arg(long, value_parser = crate::cmd::args::at_least_one::<u64>, default_value_t = 30)]
    pub seeds: u64,
    /// Metaorder sizes as shares of the day's volume.
    #[arg(long, value_delimiter = ',', default_value = "0.01,0.02,0.05,0.1,0.2")]
    pub sizes: Vec<f64>,
    /// The execution window, minutes since the open.
    #[arg(long, default_value_t = 30)]
    pub start_minute: usize,
    #[arg(long, default_value_t = 150)]
    pub end_minute: usize,
    #[command(flatten)]
    pub output: OutDir,
}

impl SessionArgs {
    fn request(self) -> Result<SessionRequest> {
        let (Some(data), Some(symbol), Some(date)) = (self.data, self.symbol, self.date) else {
            anyhow::bail!("--data, --symbol and --date are required");
        };
        Ok(SessionRequest {
            data,
            symbol,
            date,
            config: self.config,
            seed: self.seed,
            lobster: self.lobster,
            engine: self.engine,
        })
    }
}

pub fn run(a: SimulateArgs) -> Result<ExitCode> {
    match a.command {
        Some(SimulateCommand::Impact(i)) => return run_impact(i),
        Some(SimulateCommand::Realism(r)) => return realism::run(r),
        Some(SimulateCommand::Fills(f)) => return fills::run(f),
        Some(SimulateCommand::Calibrate(c)) => return calibrate::run(c),
        None => {}
    }
    let out = a.out.clone().context("--out is required")?;
    serl_study::process::claim_run(&out, RunKind::Simulate, (a.force, false))?;
    let session = serl_study::simulate::load_session(a.session.request()?, &warn)?;
    let bar = crate::progress::Meter::new("simulate", "seeds", a.seeds);
    let said = |l: &str| bar.say(l);
    let summary = serl_study::simulate::simulate(&session, a.seeds, &out, &|| bar.inc(1), &said);
    bar.finish();
    let summary = summary?;
    for c in summary.calibration.iter().chain(&summary.stylized_facts) {
        println!("{c}");
    }
    println!("report: {}", out.join("report.html").display());
    Ok(ExitCode::SUCCESS)
}

fn run_impact(a: ImpactArgs) -> Result<ExitCode> {
    let session = serl_study::simulate::load_session(a.session.request()?, &warn)?;
    let request = ImpactRequest {
        seeds: a.seeds,
        sizes: a.sizes.clone(),
        start_minute: a.start_minute,
        end_minute: a.end_minute,
    };
    let spec = request.spec(&session);
    a.output.claim(RunKind::Impact, false)?;
    let out = &a.output.out;
    let bar = crate::progress::Meter::new("impact", "seeds", spec.seeds);
    let said = |l: &str| bar.say(l);
    let done = serl_study::simulate::impact(&session, &spec, out, &|| bar.inc(1), &said);
    bar.finish();
    crate::show::lines(done?.lines());
    println!("report: {}", out.join("report.html").display());
    Ok(ExitCode::SUCCESS)
}
