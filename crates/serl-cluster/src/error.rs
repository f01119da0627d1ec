//! What can go wrong planning and running tasks.

use std::path::Path;

/// Why a plan could not be read or a batch did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A line of `tasks.jsonl` is not a task.
    #[error("{path}, line {line}: {message}")]
    Plan {
        /// The plan.
        path: String,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// An index past the plan's end.
    #[error("{plan} has {count} tasks (0 to {last}); there is no task {index}", last = count.saturating_sub(1))]
    NoSuchTask {
        /// The plan.
        plan: String,
        /// The index asked for.
        index: usize,
        /// Tasks in the plan.
        count: usize,
    },
    /// A resumed run would write a different task at an index it planned.
    #[error(
        "{plan}: task {index} ({output}) is not the task this run now plans for it ({field} differs); \
         the run's config or serl changed since it was planned: start a new run directory"
    )]
    Changed {
        /// The plan.
        plan: String,
        /// The task's index.
        index: usize,
        /// Its output.
        output: String,
        /// The first field that differs.
        field: String,
    },
    /// The `[cluster]` table is invalid.
    #[error("[cluster] {0}")]
    Config(String),
    /// Which task a process is to run cannot be told.
    #[error("{0}")]
    Position(String),
    /// The scheduler's command could not be started.
    #[error("could not run `{program}` ({message}); is {engine} installed and on PATH?")]
    Submit {
        /// The engine.
        engine: &'static str,
        /// The program.
        program: String,
        /// What went wrong.
        message: String,
    },
    /// The scheduler refused the submission (nothing ran).
    #[error("{program} refused the batch: {message}")]
    Rejected {
        /// The program.
        program: String,
        /// What it said.
        message: String,
    },
    /// A task kept failing.
    #[error(
        "task {index} ({output}) failed {attempts} times{reason}; its log, {log}, ends:\n{tail}"
    )]
    TaskFailed {
        /// The task's index.
        index: usize,
        /// Why the scheduler stopped it, when its log says (`: the
        /// scheduler stopped it at its time limit ...`), else empty.
        reason: String,
        /// Its output.
        output: String,
        /// How often it was submitted.
        attempts: usize,
        /// Its log file.
        log: String,
        /// The log's last lines.
        tail: String,
    },
    /// The scheduler said a task succeeded but its output is not there.
    #[error(
        "the scheduler says task {index} succeeded, but its output {output} is not visible here: \
         the run directory must be on a filesystem that every node shares (NFS, Lustre, GPFS) \
         at the same path"
    )]
    NotShared {
        /// The task's index.
        index: usize,
        /// Its output.
        output: String,
    },
    /// Outputs did not appear in time (Kubernetes, which serl only waits on).
    #[error("{missing} tasks of batch {batch} gave no output within {secs} s (first: task {first}); see {hint}")]
    Timeout {
        /// The batch.
        batch: String,
        /// Tasks without output.
        missing: usize,
        /// The first of them.
        first: usize,
        /// Seconds waited.
        secs: u64,
        /// Where to look.
        hint: String,
    },
}

pub(crate) fn io_err(path: &Path, e: impl std::fmt::Display) -> ClusterError {
    ClusterError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}
