//! What can go wrong in a run, and the run directory's JSON files.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum EvolveError {
    /// The `[evolve]` table, or a design built from it, is invalid.
    #[error("evolve config: {0}")]
    Config(String),
    /// A training failed.
    #[error(transparent)]
    Train(#[from] serl_train::TrainError),
    /// A file of the run directory could not be read or written.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The designer could not answer at all (not a rejected module).
    #[error("the designer failed: {0}")]
    Designer(String),
    /// A batch of tasks did not finish on the cluster.
    #[error("cluster: {0}")]
    Cluster(String),
    /// A run's evidence file is missing or unreadable.
    #[error("evidence: {0}")]
    Evidence(String),
    /// Every candidate of every iteration was invalid (or stopped by the
    /// pre-screen).
    #[error("no candidate was valid in {0} iterations (each failed a module, or was stopped by the pre-screen); see the attempts in the run directory")]
    NoValidDesign(usize),
}

pub(crate) fn file_err(path: &Path, e: impl std::fmt::Display) -> EvolveError {
    EvolveError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Writes `v` as pretty JSON, atomically, creating the folders above it.
pub(crate) fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<(), EvolveError> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| file_err(d, e))?;
    }
    let text = serde_json::to_string_pretty(v).map_err(|e| file_err(path, e))?;
    serl_report::write_atomic(path, text.as_bytes()).map_err(|e| file_err(path, e))
}

/// A JSON file the run wrote earlier; `None` when absent, or when it is
/// there but unreadable, which is said and listed as a repair
/// ([`crate::repairs`]): the caller recomputes it either way.
pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    match crate::repairs::read_record(path) {
        Ok(v) => v,
        Err(problem) => {
            crate::repairs::note(path, &problem);
            None
        }
    }
}
