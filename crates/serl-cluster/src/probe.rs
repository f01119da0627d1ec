//! The probe task: does nothing but say where it ran. `serl task check`
//! runs a batch of them to check a cluster (every node sees the run
//! directory) and to measure an engine's overhead per task.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{io_err, ClusterError};
use crate::plan::{NewTask, Plan, Task};

/// The probe's kind.
pub const PROBE_TASK: &str = "cluster.probe";

/// What a probe writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeOutput {
    /// The node's host name.
    pub host: String,
    /// The task's working directory.
    pub cwd: String,
}

/// Probe `k` of batch `batch`.
pub fn probe_task(batch: &str, k: usize) -> NewTask {
    NewTask {
        kind: PROBE_TASK.into(),
        seed: k as u64,
        output: Path::new("probes").join(format!("{batch}-{k}.json")),
        input: serde_json::json!({ "probe": k }),
    }
}

/// This machine's name: the kernel's, else `$HOSTNAME` (which shells set
/// but do not export, so a batch job often lacks it); none when neither is
/// known.
pub fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// Runs a probe: writes its output.
pub fn run_probe(plan: &Plan, task: &Task) -> Result<(), ClusterError> {
    let out = ProbeOutput {
        host: hostname().unwrap_or_default(),
        cwd: std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
    };
    let text = serde_json::to_string(&out).map_err(|e| io_err(&plan.output_path(task), e))?;
    plan.write_output(task, text.as_bytes())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_machine_has_a_name_without_a_newline() {
        if let Some(h) = super::hostname() {
            assert!(!h.is_empty() && !h.contains('\n'), "{h:?}");
        }
        #[cfg(target_os = "linux")]
        assert!(super::hostname().is_some(), "linux names itself in /proc");
    }
}
