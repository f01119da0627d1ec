//! `serl run check`: whether a run directory is whole.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum RunCommand {
    /// Verify an evolve run directory: every record readable, every
    /// output its task plan promises present, the data unchanged since
    /// the run began; lists the repairs it has had. Exits 1 with a list
    /// when something is wrong.
    Check(CheckArgs),
}

#[derive(Args)]
pub struct CheckArgs {
    /// The run directory.
    pub run_dir: PathBuf,
}

pub fn run(c: RunCommand) -> Result<ExitCode> {
    let RunCommand::Check(a) = c;
    let r = serl_study::rundir::check_run(&a.run_dir)?;
    let state = if r.finished {
        "finished"
    } else {
        "not finished"
    };
    println!(
        "{} ({state}): {} records read, {} planned outputs",
        a.run_dir.display(),
        r.records,
        r.planned
    );
    if let Some(h) = serl_study::rundir::RunLock::holder_of(&a.run_dir) {
        println!("held by {h}");
    }
    for rep in &r.repairs {
        println!("repaired: {rep}");
    }
    if r.whole() {
        println!("whole");
        return Ok(ExitCode::SUCCESS);
    }
    for p in &r.problems {
        println!("problem: {p}");
    }
    println!(
        "{} problems; `serl evolve --resume {}` recomputes unreadable records",
        r.problems.len(),
        a.run_dir.display()
    );
    Ok(ExitCode::from(1))
}
