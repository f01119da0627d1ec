//! `serl task`: what a cluster's array job runs (one task of a run's
//! plan), the plan's state, and a batch's Kubernetes manifest.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serl_cluster::EngineKind;
use serl_study::tasks::open_plan;

use super::args::{named, OutDir};

#[derive(Subcommand)]
pub enum TaskCommand {
    /// Run one task of RUN_DIR/tasks.jsonl and write its output: the
    /// command every engine's array runs.
    Run(RunArgs),
    /// Each batch of the plan: its tasks, done and pending.
    List {
        /// The run directory.
        run_dir: PathBuf,
    },
    /// Check a cluster before a long run: a batch of probe tasks (each
    /// writes where it ran) must come back visible here; reports the
    /// engine's overhead per task.
    Check(CheckArgs),
    /// The Kubernetes Indexed Job for a batch's pending tasks (the run's
    /// `[cluster.kubernetes]`), for `kubectl apply -f`.
    Manifest {
        /// The run directory.
        run_dir: PathBuf,
        /// The batch (see `serl task list`).
        #[arg(long)]
        batch: String,
        /// Write it here instead of to stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Args)]
#[command(mut_arg("out", |a| a.help("A directory on the shared filesystem for the probes' plan")))]
pub struct CheckArgs {
    /// The engine to check.
    #[arg(long, value_parser = named::<EngineKind>(&EngineKind::NAMES))]
    pub engine: EngineKind,
    /// A config whose `[cluster]` table to use (partition, retries, ...).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Probes submitted as one array.
    #[arg(long, default_value_t = 20)]
    pub tasks: usize,
    /// One-task batches submitted one after another: the overhead of one
    /// task, as a median.
    #[arg(long, default_value_t = 20)]
    pub singles: usize,
    #[command(flatten)]
    pub output: OutDir,
}

#[derive(Args)]
pub struct RunArgs {
    /// The run directory (the one holding tasks.jsonl and evolve.toml).
    pub run_dir: PathBuf,
    /// The task's index in the plan (default: from the engine's array
    /// variable, SLURM_ARRAY_TASK_ID, HQ_TASK_ID or JOB_COMPLETION_INDEX).
    #[arg(long, conflicts_with = "indices")]
    pub index: Option<usize>,
    /// The batch's indices (`5-9,12`); the engine's array variable is the
    /// position in this list.
    #[arg(long)]
    pub indices: Option<String>,
    /// The variable the position is read from (default: the first set of
    /// SLURM_ARRAY_TASK_ID, HQ_TASK_ID, JOB_COMPLETION_INDEX).
    #[arg(long)]
    pub position_var: Option<String>,
    /// Run it even if its output is there (the output is the same).
    #[arg(long)]
    pub force: bool,
}

pub fn run(c: TaskCommand) -> Result<ExitCode> {
    match c {
        TaskCommand::Run(a) => run_one(a),
        TaskCommand::List { run_dir } => list(&run_dir),
        TaskCommand::Check(a) => check(a),
        TaskCommand::Manifest {
            run_dir,
            batch,
            out,
        } => write_manifest(&run_dir, &batch, out.as_deref()),
    }
}

/// The trace `serl task run` writes beside its fellow tasks' when its
/// coordinator traces and the command line names none
/// (`serl_study::process::task_trace`).
pub fn own_trace(c: &TaskCommand) -> Option<PathBuf> {
    let TaskCommand::Run(a) = c else {
        return None;
    };
    let (indices, var) = (a.indices.as_deref(), a.position_var.as_deref());
    let index = serl_cluster::task_index(a.index, indices, var).ok()?;
    serl_study::process::task_trace(&a.run_dir, index)
}

fn run_one(a: RunArgs) -> Result<ExitCode> {
    let (indices, var) = (a.indices.as_deref(), a.position_var.as_deref());
    let index = serl_cluster::task_index(a.index, indices, var)?;
    serl_study::tasks::run_one(&a.run_dir, index, a.force, &|l| eprintln!("{l}"))?;
    Ok(ExitCode::SUCCESS)
}

fn list(run_dir: &Path) -> Result<ExitCode> {
    let table = serl_study::tasks::batches_table(&open_plan(run_dir)?);
    println!("{}", crate::show::boxed(&table));
    Ok(ExitCode::SUCCESS)
}

fn write_manifest(run_dir: &Path, batch: &str, out: Option<&Path>) -> Result<ExitCode> {
    let yaml = serl_study::tasks::batch_manifest(run_dir, batch)?;
    match out {
        Some(p) => std::fs::write(p, yaml).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{yaml}"),
    }
    Ok(ExitCode::SUCCESS)
}

fn check(a: CheckArgs) -> Result<ExitCode> {
    let mut cfg = serl_study::tasks::cluster_config(a.config.as_deref())?;
    cfg.engine = a.engine;
    let say = |l: &str| eprintln!("{l}");
    a.output
        .claim(serl_study::rundir::RunKind::TaskCheck, false)?;
    let out = &a.output.out;
    let report = serl_study::tasks::check_engine(&cfg, (a.tasks, a.singles), out, &say)?;
    println!("{}", crate::show::boxed(&report.table()));
    println!(
        "every probe's output is visible here; {}",
        std::path::absolute(out)?.join("check.json").display()
    );
    Ok(ExitCode::SUCCESS)
}
