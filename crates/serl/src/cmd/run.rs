//! `serl run check`: whether a run directory is whole.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use super::args::check_exit;

#[derive(Subcommand)]
pub enum RunCommand {
    /// Verify a run directory of any kind serl writes (evolve, train,
    /// walk-forward, backtest, simulate, study, finetune, …): every record
    /// readable, what a finished run of its kind writes present, the runs
    /// inside it checked too; for an evolve run, every output its task
    /// plan promises and the data unchanged since it began, and the
    /// repairs it has had. Exits 1 with a list when something is wrong.
    Check(CheckArgs),
}

#[derive(Args)]
pub struct CheckArgs {
    /// The run directory.
    pub run_dir: PathBuf,
}

pub fn run(c: RunCommand) -> Result<ExitCode> {
    let RunCommand::Check(a) = c;
    let report = serl_study::rundir::check_run(&a.run_dir)?;
    crate::show::lines(report.lines(&a.run_dir));
    Ok(check_exit(report.whole()))
}
