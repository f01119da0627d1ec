//! # serl-cluster: the same runs, cut into tasks that a scheduler runs
//!
//! serl does not schedule: the work of a run that parallelises (an evolve
//! round's candidate trainings, an ES generation's offspring, the final
//! retrainings) becomes a deterministic list of tasks in the run directory,
//! `tasks.jsonl` ([`Plan`]), and an engine the cluster already has runs
//! them ([`Cluster`]):
//!
//! | `[cluster] engine` | a batch runs as | waits with |
//! |---|---|---|
//! | `local` | rayon threads in the coordinator (no tasks written) | — |
//! | `slurm` | one array job, `sbatch --array` | `--wait` |
//! | `hyperqueue` | one array, `hq submit --array` | `--wait` |
//! | `kubernetes` | one Indexed Job ([`manifest`]), `kubectl apply` | polling for the outputs |
//!
//! Every engine runs the same command, `serl task run RUN_DIR --indices
//! LIST`, which takes its position in the array from
//! `SLURM_ARRAY_TASK_ID`, `HQ_TASK_ID` or `JOB_COMPLETION_INDEX` ([`task_position`]).
//!
//! A task's result depends only on its line of the plan (its kind, seed
//! and input), never on the machine or the order: it is written
//! atomically to its `output` as the task's last act, so a scheduler's
//! retry writes the same file, and a resumed coordinator submits only the
//! tasks without one. After a batch, the coordinator checks each output is
//! visible to it: one that the scheduler calls done but that is not there
//! means the run directory is not on a shared filesystem, and says so.
//!
//! This crate knows nothing of what a task does: `serl-evolve` plans and
//! reads them, and the binary's `serl task run` runs them.

#![deny(missing_docs)]

mod config;
mod engine;
mod error;
pub mod indices;
mod jobs;
pub mod manifest;
mod plan;
mod probe;

pub use config::{ClusterConfig, EngineKind, HyperQueueConfig, KubernetesConfig, SlurmConfig};
pub use engine::{BatchReport, Cluster, Setup, SETUP_FILE};
pub use error::ClusterError;
pub use jobs::{recorded as recorded_jobs, Job, JOBS_FILE};
pub use plan::{NewTask, Plan, Task, PLAN_FILE};
pub use probe::{hostname, probe_task, run_probe, ProbeOutput, PROBE_TASK};

/// The environment variables engines hand a task its array position in,
/// in the order they are read.
pub const POSITION_VARS: [&str; 3] = ["SLURM_ARRAY_TASK_ID", "HQ_TASK_ID", "JOB_COMPLETION_INDEX"];

/// The array position the engine gave this process: the first of
/// [`POSITION_VARS`] that is set, with its name.
pub fn task_position() -> Option<(&'static str, String)> {
    POSITION_VARS
        .iter()
        .find_map(|&v| std::env::var(v).ok().map(|value| (v, value)))
}

/// The plan index a process runs: `index` when given, else its array
/// position (read from `position_var`, or the first of
/// [`POSITION_VARS`] set), mapped through the batch's `indices` list
/// (`5-9,12`) when given.
pub fn task_index(
    index: Option<usize>,
    indices: Option<&str>,
    position_var: Option<&str>,
) -> Result<usize, ClusterError> {
    if let Some(i) = index {
        return Ok(i);
    }
    let found = match position_var {
        Some(var) => std::env::var(var).ok().map(|v| (var, v)),
        None => task_position(),
    };
    let Some((var, value)) = found else {
        let vars = position_var.map_or_else(
            || format!("one of {}", POSITION_VARS.join(", ")),
            str::to_string,
        );
        return Err(ClusterError::Position(format!(
            "which task? give --index I, or run under an engine that sets {vars}"
        )));
    };
    let position: usize = value.trim().parse().map_err(|e| {
        ClusterError::Position(format!("{var} is `{value}`, not an array position: {e}"))
    })?;
    let Some(list) = indices else {
        return Ok(position);
    };
    let list = indices::parse(list)?;
    list.get(position).copied().ok_or_else(|| {
        ClusterError::Position(format!(
            "{var} is {position}, but --indices lists {} tasks",
            list.len()
        ))
    })
}
