//! The scheduler's jobs a coordinator submitted, one JSON line each in
//! `tasks/jobs.jsonl`, so that a coordinator resuming the run (after the
//! last one was killed between or during batches) cancels the arrays its
//! predecessor left in the queue itself, from their recorded ids, rather
//! than asking the user to `scancel` them. Tasks already done stay done
//! (their outputs are on disk); a cancelled task is planned again.

use std::io::Write;
use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::config::EngineKind;

/// The file of a run's submitted jobs, under `tasks/`.
pub const JOBS_FILE: &str = "jobs.jsonl";

/// One submitted array.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// The engine's name (`slurm`).
    pub engine: String,
    /// The scheduler's job id.
    pub id: String,
    /// The batch it ran.
    pub batch: String,
    /// The submission's attempt (0: the first).
    pub attempt: usize,
}

/// Appends `job` to the run's list (a failure to record is a warning:
/// the job itself runs either way).
pub(crate) fn record(root: &Path, job: &Job) {
    let path = root.join("tasks").join(JOBS_FILE);
    let line = match serde_json::to_string(job) {
        Ok(l) => l,
        Err(_) => return,
    };
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = written {
        tracing::warn!("{}: {e} (job {} is not recorded)", path.display(), job.id);
    }
}

/// The jobs recorded in `root` (unreadable lines left out).
pub fn recorded(root: &Path) -> Vec<Job> {
    std::fs::read_to_string(root.join("tasks").join(JOBS_FILE))
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Cancels the recorded jobs of `engine` that the scheduler still holds
/// (pending or running): what an earlier coordinator of this run left
/// behind. Returns one line per cancelled job.
pub(crate) fn cancel_leftovers(root: &Path, engine: EngineKind) -> Vec<String> {
    if engine != EngineKind::Slurm {
        return Vec::new();
    }
    let jobs: Vec<Job> = recorded(root)
        .into_iter()
        .filter(|j| j.engine == engine.name())
        .collect();
    if jobs.is_empty() {
        return Vec::new();
    }
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    let Ok(out) = Command::new("squeue")
        .args(["-h", "-o", "%A %F %T", "-j", &ids.join(",")])
        .output()
    else {
        return Vec::new();
    };
    // `%F` is an array's job id (shared by its tasks), `%A` a task's own.
    let live: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect();
    let mut said = Vec::new();
    for job in jobs.iter().filter(|j| live.contains(&j.id)) {
        let cancelled = Command::new("scancel")
            .arg(&job.id)
            .status()
            .is_ok_and(|s| s.success());
        if cancelled {
            said.push(format!(
                "cancelled Slurm job {} (batch {}, attempt {}) left in the queue by an earlier coordinator of this run",
                job.id, job.batch, job.attempt
            ));
        }
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_recorded_one_per_line_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tasks")).unwrap();
        let job = |id: &str| Job {
            engine: "slurm".into(),
            id: id.into(),
            batch: "i0".into(),
            attempt: 0,
        };
        record(dir.path(), &job("41"));
        record(dir.path(), &job("42"));
        assert_eq!(recorded(dir.path()), vec![job("41"), job("42")]);
        assert!(cancel_leftovers(dir.path(), EngineKind::Hyperqueue).is_empty());
    }
}
