//! `serl task`: what a cluster's array job runs (one task of a run's
//! plan), the plan's state, and a batch's Kubernetes manifest.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use comfy_table::Table;
use serl_cluster::{
    indices, manifest, probe_task, run_probe, Cluster, ClusterConfig, EngineKind, Plan,
    ProbeOutput, Task, POSITION_VARS, PROBE_TASK,
};

use super::evolve::{EvolveFile, StudyData};
use super::read_toml;

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
pub struct CheckArgs {
    /// The engine to check.
    #[arg(long, value_enum)]
    pub engine: super::evolve::EngineChoice,
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
    /// A directory on the shared filesystem for the probes' plan.
    #[arg(long)]
    pub out: PathBuf,
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

/// The index this process runs: `--index`, or the engine's position
/// (through `--indices` when given).
fn resolve_index(a: &RunArgs) -> Result<usize> {
    if let Some(i) = a.index {
        return Ok(i);
    }
    let found = match &a.position_var {
        Some(var) => std::env::var(var).ok().map(|v| (var.as_str(), v)),
        None => serl_cluster::task_position(),
    };
    let Some((var, value)) = found else {
        bail!(
            "which task? give --index I, or run under an engine that sets {}",
            a.position_var
                .clone()
                .unwrap_or_else(|| format!("one of {}", POSITION_VARS.join(", ")))
        );
    };
    let position: usize = value
        .trim()
        .parse()
        .with_context(|| format!("{var} is `{value}`, not an array position"))?;
    match &a.indices {
        None => Ok(position),
        Some(list) => {
            let list = indices::parse(list)?;
            list.get(position).copied().with_context(|| {
                format!(
                    "{var} is {position}, but --indices lists {} tasks",
                    list.len()
                )
            })
        }
    }
}

fn open_plan(run_dir: &Path) -> Result<Plan> {
    let plan = Plan::open(run_dir)?;
    if plan.tasks().is_empty() {
        bail!(
            "{} has no tasks.jsonl, or an empty one: only a run with [cluster] engine = \"slurm\", \"hyperqueue\" or \"kubernetes\" plans tasks",
            run_dir.display()
        );
    }
    Ok(plan)
}

fn run_one(a: RunArgs) -> Result<ExitCode> {
    let index = resolve_index(&a)?;
    let plan = open_plan(&a.run_dir)?;
    let task = plan.task(index)?;
    let out = plan.output_path(task);
    if out.exists() && !a.force {
        eprintln!("task {index}: done already ({})", out.display());
        return Ok(ExitCode::SUCCESS);
    }
    let t = std::time::Instant::now();
    let host = serl_cluster::hostname().unwrap_or_else(|| "unknown host".into());
    eprintln!(
        "task {index} ({} of batch {}, seed {}) on {host}: {}",
        task.kind,
        task.batch,
        task.seed,
        task.output.display()
    );
    match task.kind.as_str() {
        PROBE_TASK => run_probe(&plan, task)?,
        serl_evolve::SCORE_TASK | serl_evolve::FINAL_TASK => run_evolve_task(&a.run_dir, task)?,
        super::shards::SHARD_TASK => super::shards::run_task(&plan, task)?,
        super::sim_tasks::DAY_TASK | super::sim_tasks::IMPACT_TASK => {
            super::sim_tasks::run_task(&plan, task)?
        }
        other => bail!(
            "task {index} has kind `{other}`, which this serl does not run ({}, {}, {}, {}, {} and {PROBE_TASK})",
            serl_evolve::SCORE_TASK,
            serl_evolve::FINAL_TASK,
            super::shards::SHARD_TASK,
            super::sim_tasks::DAY_TASK,
            super::sim_tasks::IMPACT_TASK,
        ),
    }
    eprintln!(
        "task {index}: wrote {} in {:.1}s",
        out.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs an evolve task with the run's data and orders, from its saved
/// config.
fn run_evolve_task(run_dir: &Path, task: &Task) -> Result<()> {
    let saved = run_dir.join("evolve.toml");
    if !saved.exists() {
        bail!(
            "{} has no evolve.toml: task {} needs the run's config",
            run_dir.display(),
            task.index
        );
    }
    let cfg: EvolveFile = read_toml(&saved)?;
    let study = StudyData::load(&cfg, false)?;
    let inputs = serl_evolve::TaskInputs {
        env_cfg: &cfg.env,
        market_cfg: &cfg.market,
        market: &study.market,
        train_orders: &study.train,
        val_orders: &study.val,
    };
    serl_evolve::run_task(&inputs, run_dir, task)
        .with_context(|| format!("task {} of {}", task.index, run_dir.display()))
}

fn list(run_dir: &Path) -> Result<ExitCode> {
    let plan = open_plan(run_dir)?;
    let mut batches: Vec<&str> = Vec::new();
    for t in plan.tasks() {
        if !batches.contains(&t.batch.as_str()) {
            batches.push(&t.batch);
        }
    }
    let mut table = Table::new();
    table.set_header(["batch", "kind", "tasks", "indices", "done", "pending"]);
    for b in batches {
        let idx = plan.batch(b);
        let tasks: Vec<&Task> = idx.iter().filter_map(|&i| plan.task(i).ok()).collect();
        let pending: Vec<usize> = tasks
            .iter()
            .filter(|t| !plan.is_done(t))
            .map(|t| t.index)
            .collect();
        table.add_row([
            b.to_string(),
            tasks.first().map_or(String::new(), |t| t.kind.clone()),
            tasks.len().to_string(),
            indices::format(&idx),
            (tasks.len() - pending.len()).to_string(),
            if pending.is_empty() {
                "-".into()
            } else {
                indices::format(&pending)
            },
        ]);
    }
    println!("{table}");
    Ok(ExitCode::SUCCESS)
}

fn write_manifest(run_dir: &Path, batch: &str, out: Option<&Path>) -> Result<ExitCode> {
    let plan = open_plan(run_dir)?;
    if plan.batch(batch).is_empty() {
        bail!(
            "{} has no batch `{batch}`; `serl task list {}` shows its batches",
            run_dir.display(),
            run_dir.display()
        );
    }
    let pending: Vec<usize> = plan
        .batch(batch)
        .into_iter()
        .filter(|&i| plan.task(i).is_ok_and(|t| !plan.is_done(t)))
        .collect();
    if pending.is_empty() {
        bail!("every task of batch `{batch}` is done");
    }
    // The coordinator's setup: its [cluster] table and working directory.
    let setup = serl_cluster::Setup::read(run_dir)?;
    let root = std::path::absolute(run_dir)?;
    let mut command = super::evolve::task_runner("serl", &root);
    command.extend(["--indices".to_string(), indices::format(&pending)]);
    command.extend(["--position-var".to_string(), "JOB_COMPLETION_INDEX".into()]);
    let yaml = manifest::indexed_job(&manifest::JobSpec {
        name: &manifest::job_name(&root, batch, "manual"),
        config: &setup.config,
        completions: pending.len(),
        workdir: &setup.workdir,
        command: &command,
    });
    match out {
        Some(p) => std::fs::write(p, yaml).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{yaml}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// What `serl task check` measured.
#[derive(serde::Serialize)]
struct CheckReport {
    engine: &'static str,
    tasks: usize,
    /// Wall seconds of the array of `tasks` probes, submission to the last output.
    array_secs: f64,
    /// `array_secs / tasks`.
    array_secs_per_task: f64,
    /// Each one-task batch's wall seconds.
    single_secs: Vec<f64>,
    /// Their median.
    single_median_secs: f64,
    /// Hosts the probes ran on.
    hosts: Vec<String>,
}

fn check(a: CheckArgs) -> Result<ExitCode> {
    let mut cfg: ClusterConfig = match &a.config {
        Some(p) => read_toml::<EvolveFile>(p)?.cluster,
        None => ClusterConfig::default(),
    };
    cfg.engine = a.engine.into();
    if a.tasks == 0 {
        bail!("--tasks must be at least 1");
    }
    if a.out.join("tasks.jsonl").exists() {
        bail!(
            "{} holds a plan already; give a new directory",
            a.out.display()
        );
    }
    let program = super::evolve::task_program(cfg.engine)?;
    let cluster = super::evolve::cluster_for(&cfg, &a.out)?;
    let root = cluster.plan().root().to_path_buf();
    let engine = cfg.engine.name();
    eprintln!(
        "{engine}: {} probes as one array, then {} one-task batches",
        a.tasks, a.singles
    );
    let array_secs = probe_batch(&cluster, &program, "array", a.tasks)?;
    let mut single_secs = Vec::new();
    for k in 0..a.singles {
        single_secs.push(probe_batch(&cluster, &program, &format!("single{k}"), 1)?);
    }
    let mut sorted = single_secs.clone();
    sorted.sort_by(f64::total_cmp);
    let report = CheckReport {
        engine,
        tasks: a.tasks,
        array_secs,
        array_secs_per_task: array_secs / a.tasks as f64,
        single_median_secs: sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN),
        single_secs,
        hosts: probe_hosts(&root)?,
    };
    std::fs::write(
        root.join("check.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    print_check(&report);
    println!(
        "every probe's output is visible here; {}",
        root.join("check.json").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Plans and runs `n` probes as batch `batch`; its wall seconds.
fn probe_batch(cluster: &Cluster, program: &str, batch: &str, n: usize) -> Result<f64> {
    let tasks = (0..n).map(|k| probe_task(batch, k)).collect();
    let idx = cluster.plan_batch(batch, tasks)?;
    let root = cluster.plan().root().display().to_string();
    let t = std::time::Instant::now();
    if cluster.config().engine == EngineKind::Local {
        // The local path as a scheduler would use it: a process per task.
        for i in &idx {
            let status = std::process::Command::new(program)
                .args(["task", "run", &root, "--index", &i.to_string()])
                .stderr(std::process::Stdio::null())
                .status()?;
            if !status.success() {
                bail!("task {i} of {root} failed");
            }
        }
    } else {
        cluster.run_batch(batch, &idx)?;
    }
    Ok(t.elapsed().as_secs_f64())
}

/// The hosts the probes of the plan in `root` ran on.
fn probe_hosts(root: &Path) -> Result<Vec<String>> {
    let plan = Plan::open(root)?;
    let mut hosts: Vec<String> = plan
        .tasks()
        .iter()
        .filter_map(|t| std::fs::read_to_string(plan.output_path(t)).ok())
        .filter_map(|text| serde_json::from_str::<ProbeOutput>(&text).ok())
        .map(|p| p.host)
        .collect();
    hosts.sort();
    hosts.dedup();
    Ok(hosts)
}

fn print_check(r: &CheckReport) {
    let mut table = Table::new();
    table.set_header([
        "engine",
        "probes",
        "array (s)",
        "per task (s)",
        "one-task batch, median (s)",
        "hosts",
    ]);
    table.add_row([
        r.engine.to_string(),
        r.tasks.to_string(),
        format!("{:.2}", r.array_secs),
        format!("{:.3}", r.array_secs_per_task),
        format!("{:.2}", r.single_median_secs),
        r.hosts.join(" "),
    ]);
    println!("{table}");
}
