//! `serl task check`: a batch of probe tasks on an engine (each writes
//! where it ran), which must come back visible here, and the engine's
//! overhead per task.

use std::path::Path;

use serde::Serialize;
use serl_cluster::{probe_task, Cluster, ClusterConfig, EngineKind, Plan, ProbeOutput};

use crate::error::Result;

/// What `serl task check` measured.
#[derive(Serialize)]
pub struct CheckReport {
    /// The engine checked, by its config name.
    pub engine: &'static str,
    /// Probes in the array.
    pub tasks: usize,
    /// Wall seconds of the array of `tasks` probes, submission to the last output.
    pub array_secs: f64,
    /// `array_secs / tasks`.
    pub array_secs_per_task: f64,
    /// Each one-task batch's wall seconds.
    pub single_secs: Vec<f64>,
    /// Their median.
    pub single_median_secs: f64,
    /// Hosts the probes ran on.
    pub hosts: Vec<String>,
}

impl CheckReport {
    /// The check as a one-row table (`serl task check`).
    pub fn table(&self) -> serl_report::Table {
        let mut t = serl_report::Table::new([
            "engine",
            "probes",
            "array (s)",
            "per task (s)",
            "one-task batch, median (s)",
            "hosts",
        ]);
        t.row([
            self.engine.to_string(),
            self.tasks.to_string(),
            format!("{:.2}", self.array_secs),
            format!("{:.3}", self.array_secs_per_task),
            format!("{:.2}", self.single_median_secs),
            self.hosts.join(" "),
        ]);
        t
    }
}

/// Runs `tasks` probes as one array on `cfg`'s engine, then `singles`
/// one-task batches, with their plan in `out`; writes `out/check.json`.
/// `say` hears what is about to run.
pub fn check_engine(
    cfg: &ClusterConfig,
    (tasks, singles): (usize, usize),
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<CheckReport> {
    if tasks == 0 {
        crate::bail!("--tasks must be at least 1");
    }
    if out.join("tasks.jsonl").exists() {
        crate::bail!(
            "{} holds a plan already; give a new directory",
            out.display()
        );
    }
    let program = crate::cluster::task_program(cfg.engine)?;
    let cluster = crate::cluster::cluster_for(cfg, out)?;
    let root = cluster.plan().root().to_path_buf();
    let engine = cfg.engine.name();
    say(&format!(
        "{engine}: {tasks} probes as one array, then {singles} one-task batches"
    ));
    let array_secs = probe_batch(&cluster, &program, "array", tasks)?;
    let mut single_secs = Vec::new();
    for k in 0..singles {
        single_secs.push(probe_batch(&cluster, &program, &format!("single{k}"), 1)?);
    }
    let mut sorted = single_secs.clone();
    sorted.sort_by(f64::total_cmp);
    let report = CheckReport {
        engine,
        tasks,
        array_secs,
        array_secs_per_task: array_secs / tasks as f64,
        single_median_secs: sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN),
        single_secs,
        hosts: probe_hosts(&root)?,
    };
    std::fs::write(
        root.join("check.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(report)
}

/// Plans and runs `n` probes as batch `batch`; its wall seconds. On the
/// local engine each runs as a process of `program`, as a scheduler would.
fn probe_batch(cluster: &Cluster, program: &str, batch: &str, n: usize) -> Result<f64> {
    let tasks = (0..n).map(|k| probe_task(batch, k)).collect();
    let idx = cluster.plan_batch(batch, tasks)?;
    let root = cluster.plan().root().display().to_string();
    let t = std::time::Instant::now();
    if cluster.config().engine == EngineKind::Local {
        for i in &idx {
            let status = std::process::Command::new(program)
                .args(["task", "run", &root, "--index", &i.to_string()])
                .stderr(std::process::Stdio::null())
                .status()?;
            if !status.success() {
                crate::bail!("task {i} of {root} failed");
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
