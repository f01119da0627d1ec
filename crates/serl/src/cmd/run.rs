//! `serl run check`: whether a run directory is whole.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

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
    let r = serl_study::rundir::check_run(&a.run_dir)?;
    let state = if r.finished {
        "finished"
    } else {
        "not finished"
    };
    let kind = r.kind.map_or("run", |k| k.name());
    let inner = match r.inner.len() {
        0 => String::new(),
        n => format!(", {n} runs inside checked"),
    };
    println!(
        "{} ({kind}, {state}): {} records read, {} planned outputs{inner}",
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
    let how = match r.kind {
        Some(serl_study::rundir::RunKind::Evolve) => format!(
            "; `serl evolve --resume {}` recomputes unreadable records",
            a.run_dir.display()
        ),
        _ => String::new(),
    };
    println!("{} problems{how}", r.problems.len());
    Ok(ExitCode::from(1))
}
