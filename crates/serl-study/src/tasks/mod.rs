//! Cluster tasks: the kinds a node can run (a registry that `serl task
//! run` dispatches through), a plan's state, a batch's Kubernetes
//! manifest, and the probe check of an engine.
//!
//! A new kind of task is a type implementing [`TaskKind`] and one line in
//! [`KINDS`].

use std::path::Path;

use serl_cluster::{indices, manifest, Plan, Task};

use crate::config::{read_toml, EvolveFile};
use crate::data::StudyData;
use crate::error::{Context, Result};

pub mod shards;
pub mod simulate;

/// A kind of task: its name in a plan's lines, and what a node does with
/// one (reads its input, writes its output through the plan).
pub trait TaskKind {
    /// The `kind` of its lines in `tasks.jsonl`.
    const NAME: &'static str;
    /// Runs `task` of `plan`.
    fn run(plan: &Plan, task: &Task) -> Result<()>;
}

/// A registered kind: its name and how it runs.
pub struct Registered {
    /// The kind's [`TaskKind::NAME`].
    pub name: &'static str,
    run: fn(&Plan, &Task) -> Result<()>,
}

const fn kind<K: TaskKind>() -> Registered {
    Registered {
        name: K::NAME,
        run: K::run,
    }
}

/// Every kind of task this serl runs.
pub const KINDS: &[Registered] = &[
    kind::<Probe>(),
    kind::<EvolveScore>(),
    kind::<EvolveFinal>(),
    kind::<shards::Shard>(),
    kind::<simulate::Day>(),
    kind::<simulate::ImpactSeed>(),
];

/// Runs `task` of `plan` by its kind.
pub fn run_task(plan: &Plan, task: &Task) -> Result<()> {
    match KINDS.iter().find(|k| k.name == task.kind) {
        Some(k) => (k.run)(plan, task),
        None => {
            let names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
            crate::bail!(
                "task {} has kind `{}`, which this serl does not run ({})",
                task.index,
                task.kind,
                names.join(", ")
            )
        }
    }
}

/// A probe: writes where it ran (`serl task check`).
pub struct Probe;

impl TaskKind for Probe {
    const NAME: &'static str = serl_cluster::PROBE_TASK;
    fn run(plan: &Plan, task: &Task) -> Result<()> {
        Ok(serl_cluster::run_probe(plan, task)?)
    }
}

/// An evolve candidate's training and validation.
pub struct EvolveScore;

impl TaskKind for EvolveScore {
    const NAME: &'static str = serl_evolve::SCORE_TASK;
    fn run(plan: &Plan, task: &Task) -> Result<()> {
        run_evolve_task(plan.root(), task)
    }
}

/// An evolve run's final retraining.
pub struct EvolveFinal;

impl TaskKind for EvolveFinal {
    const NAME: &'static str = serl_evolve::FINAL_TASK;
    fn run(plan: &Plan, task: &Task) -> Result<()> {
        run_evolve_task(plan.root(), task)
    }
}

/// Runs an evolve task with the run's data and orders, from its saved
/// config.
fn run_evolve_task(run_dir: &Path, task: &Task) -> Result<()> {
    let saved = run_dir.join("evolve.toml");
    if !saved.exists() {
        crate::bail!(
            "{} has no evolve.toml: task {} needs the run's config",
            run_dir.display(),
            task.index
        );
    }
    let cfg: EvolveFile = read_toml(&saved)?;
    let study = StudyData::load(&cfg, false, &|w| eprintln!("warning: {w}"))?;
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

/// The plan of the run in `run_dir`, which must have tasks.
pub fn open_plan(run_dir: &Path) -> Result<Plan> {
    let plan = Plan::open(run_dir)?;
    if plan.tasks().is_empty() {
        crate::bail!(
            "{} has no tasks.jsonl, or an empty one: only a run with [cluster] engine = \"slurm\", \"hyperqueue\" or \"kubernetes\" plans tasks",
            run_dir.display()
        );
    }
    Ok(plan)
}

/// One batch of a plan: its kind, its tasks, and which are pending.
pub struct BatchState {
    /// The batch's name.
    pub batch: String,
    /// Its tasks' kind (empty when it has none).
    pub kind: String,
    /// Its tasks' indices in the plan.
    pub indices: Vec<usize>,
    /// The indices of its tasks not yet done.
    pub pending: Vec<usize>,
}

/// Each batch of `plan`, in the order they were planned.
pub fn batches(plan: &Plan) -> Vec<BatchState> {
    let mut names: Vec<&str> = Vec::new();
    for t in plan.tasks() {
        if !names.contains(&t.batch.as_str()) {
            names.push(&t.batch);
        }
    }
    names
        .into_iter()
        .map(|b| {
            let indices = plan.batch(b);
            let tasks: Vec<&Task> = indices.iter().filter_map(|&i| plan.task(i).ok()).collect();
            BatchState {
                batch: b.to_string(),
                kind: tasks.first().map_or(String::new(), |t| t.kind.clone()),
                pending: tasks
                    .iter()
                    .filter(|t| !plan.is_done(t))
                    .map(|t| t.index)
                    .collect(),
                indices,
            }
        })
        .collect()
}

/// [`batches`] as a table: each batch's kind, tasks, and which are done
/// and pending (`serl task list`).
pub fn batches_table(plan: &Plan) -> serl_report::Table {
    let mut t = serl_report::Table::new(["batch", "kind", "tasks", "indices", "done", "pending"]);
    for b in batches(plan) {
        let pending = match b.pending.is_empty() {
            true => "-".into(),
            false => serl_cluster::indices::format(&b.pending),
        };
        t.row([
            b.batch,
            b.kind,
            b.indices.len().to_string(),
            serl_cluster::indices::format(&b.indices),
            (b.indices.len() - b.pending.len()).to_string(),
            pending,
        ]);
    }
    t
}

/// Runs task `index` of the plan in `run_dir` and writes its output, as
/// an engine's array runs it (`serl task run`); a task whose output is
/// there already is done unless `force`. `say` hears what runs where, and
/// how long it took.
pub fn run_one(run_dir: &Path, index: usize, force: bool, say: &dyn Fn(&str)) -> Result<()> {
    let plan = open_plan(run_dir)?;
    let task = plan.task(index)?;
    let out = plan.output_path(task);
    if out.exists() && !force {
        say(&format!("task {index}: done already ({})", out.display()));
        return Ok(());
    }
    let t = std::time::Instant::now();
    let host = serl_cluster::hostname().unwrap_or_else(|| "unknown host".into());
    let (kind, batch, seed) = (&task.kind, &task.batch, task.seed);
    let output = task.output.display();
    say(&format!(
        "task {index} ({kind} of batch {batch}, seed {seed}) on {host}: {output}"
    ));
    run_task(&plan, task)?;
    let secs = t.elapsed().as_secs_f64();
    say(&format!(
        "task {index}: wrote {} in {secs:.1}s",
        out.display()
    ));
    Ok(())
}

/// The Kubernetes Indexed Job for the pending tasks of `batch` of the run
/// in `run_dir`, with the coordinator's `[cluster]` table.
pub fn batch_manifest(run_dir: &Path, batch: &str) -> Result<String> {
    let plan = open_plan(run_dir)?;
    if plan.batch(batch).is_empty() {
        crate::bail!(
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
        crate::bail!("every task of batch `{batch}` is done");
    }
    // The coordinator's setup: its [cluster] table and working directory.
    let setup = serl_cluster::Setup::read(run_dir)?;
    let root = std::path::absolute(run_dir)?;
    let mut command = crate::cluster::task_runner("serl", &root);
    command.extend(["--indices".to_string(), indices::format(&pending)]);
    command.extend(["--position-var".to_string(), "JOB_COMPLETION_INDEX".into()]);
    Ok(manifest::indexed_job(&manifest::JobSpec {
        name: &manifest::job_name(&root, batch, "manual"),
        config: &setup.config,
        completions: pending.len(),
        workdir: &setup.workdir,
        command: &command,
    }))
}

mod check;
pub use check::{check_engine, CheckReport};

/// The `[cluster]` table of the config at `path`, or the default one.
pub fn cluster_config(path: Option<&Path>) -> Result<serl_cluster::ClusterConfig> {
    Ok(match path {
        Some(p) => read_toml::<EvolveFile>(p)?.cluster,
        None => serl_cluster::ClusterConfig::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_registered_once() {
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KINDS.len(), "{names:?}");
        for kind in [
            "evolve.score",
            "evolve.final",
            "backtest.shard",
            "simulate.day",
        ] {
            assert!(names.contains(&kind), "{kind} is not registered");
        }
    }

    #[test]
    fn a_task_of_an_unknown_kind_is_refused_with_the_kinds_this_serl_runs() {
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan::open(dir.path()).unwrap();
        let task: Task = serde_json::from_value(serde_json::json!({
            "index": 3, "batch": "b", "kind": "nope", "seed": 1,
            "output": "out.json", "input": null
        }))
        .unwrap();
        let e = run_task(&plan, &task).unwrap_err().to_string();
        assert!(e.starts_with("task 3 has kind `nope`"), "{e}");
        assert!(e.contains("backtest.shard"), "{e}");
    }
}
