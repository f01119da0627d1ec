//! `serl bench env`, `sim`, `train` and `team`: whole-pipeline
//! throughput figures. The measuring, and the figures' lines, are the
//! library crates' (`serl_env::bench`, `serl_train::bench`); this prints
//! them, or their JSON.
//! Each figure is the median of several runs on one thread unless it says
//! otherwise.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Static and dynamic environment steps per second, and a full
    /// TWAP + VWAP + AC backtest's wall time with data loading; the dynamic
    /// market on the calibrated flow, or a coarser one.
    Env(FlowArgs),
    /// One simulated day: CPU time, events per second, memory, and how the
    /// cost grows with the number of agents; of the calibrated flow, or of
    /// a coarser one (`[train.hybrid] coarse_flow`).
    Sim(FlowArgs),
    /// PPO training throughput (environment steps per second, updates
    /// included) with the reference setup: MLP [64, 64], 8 static
    /// environments, n_steps 2048, batch 256, 10 epochs; DDQN on the same;
    /// and the same environments stepped without training.
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
    #[arg(long, value_parser = crate::cmd::args::at_least_one::<usize>, default_value_t = 5)]
    pub runs: usize,
    #[arg(long)]
    pub json: bool,
}

/// `serl bench env`'s and `sim`'s options: the common ones and a coarser
/// flow for the simulated market.
#[derive(Args)]
pub struct FlowArgs {
    #[command(flatten)]
    pub common: BenchArgs,
    /// The noise traders' limit orders this many times larger and rarer
    /// (`coarse_flow.noise_limit_mult`).
    #[arg(long, default_value_t = 1.0)]
    pub noise_limit_mult: f64,
    /// The market makers re-quoting this many times less often
    /// (`coarse_flow.mm_interval_mult`).
    #[arg(long, default_value_t = 1.0)]
    pub mm_interval_mult: f64,
    /// One market maker quoting all their depth (`coarse_flow.merge_makers`).
    #[arg(long)]
    pub merge_makers: bool,
    /// Also time this queue-reactive flow (a model file of `serl simulate
    /// calibrate`) in place of the agents: its simulated day (`serl bench
    /// sim`), or the dynamic environment's steps (`serl bench env`).
    #[arg(long)]
    pub queue_reactive: Option<PathBuf>,
}

impl FlowArgs {
    /// The coarsening asked for, checked; `command` names the subcommand
    /// in the error.
    fn coarsening(&self, command: &str) -> Result<serl_env::Coarsening> {
        let flow = serl_env::Coarsening {
            noise_limit_mult: self.noise_limit_mult,
            mm_interval_mult: self.mm_interval_mult,
            merge_makers: self.merge_makers,
        };
        flow.check()
            .map_err(|why| anyhow::anyhow!("serl bench {command}: {why}"))?;
        Ok(flow)
    }
}

pub fn run(cmd: BenchCommand) -> Result<ExitCode> {
    match cmd {
        BenchCommand::Env(e) => {
            let flow = e.coarsening("env")?;
            let model = e.queue_reactive.as_deref().map(read_model).transpose()?;
            let a = e.common;
            let f = serl_study::bench::env_figures(&a.data, a.runs, &flow, model.as_ref())?;
            emit(&f, a.json)
        }
        BenchCommand::Sim(s) => {
            let flow = s.coarsening("sim")?;
            let model = s.queue_reactive.as_deref().map(read_model).transpose()?;
            let a = s.common;
            emit(
                &serl_env::bench::sim_figures(&a.data, a.runs, &flow, model.as_ref())?,
                a.json,
            )
        }
        BenchCommand::Train(a) => emit(&serl_train::bench::train_figures(&a.data, a.runs)?, a.json),
        BenchCommand::Team(a) => emit(&serl_train::bench::team_figures(&a.data, a.runs)?, a.json),
    }
}

/// Figures as JSON, or as their lines.
fn emit<T: serde::Serialize + std::fmt::Display>(figures: &T, json: bool) -> Result<ExitCode> {
    crate::show::json_or(figures, json, || print!("{figures}"))?;
    Ok(ExitCode::SUCCESS)
}

/// A queue-reactive model file (`serl simulate calibrate`'s), read.
fn read_model(path: &std::path::Path) -> Result<serl_env::QueueReactive> {
    serl_env::QueueReactive::read(path).map_err(anyhow::Error::msg)
}
