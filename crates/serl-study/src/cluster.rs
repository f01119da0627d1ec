//! How a study reaches a cluster: the command every engine's array runs
//! (`serl task run ROOT`), and the cluster of a run directory.

use std::path::Path;

use serl_cluster::{Cluster, ClusterConfig, EngineKind};

use crate::error::Result;

/// The command line that runs one task of the run in `root`, before
/// `--indices`: `serl task run ROOT`.
pub(crate) fn task_runner(program: &str, root: &Path) -> Vec<String> {
    vec![
        program.to_string(),
        "task".into(),
        "run".into(),
        root.display().to_string(),
    ]
}

/// The program that runs a task on `engine`: this very binary (on a
/// shared filesystem), or the `serl` on a Kubernetes pod's PATH.
pub(crate) fn task_program(engine: EngineKind) -> Result<String> {
    Ok(match engine {
        EngineKind::Kubernetes => "serl".to_string(),
        _ => std::env::current_exe()?.display().to_string(),
    })
}

/// The cluster of a run in `out`: its plan there, its tasks run by
/// [`task_program`] in this working directory (and traced beside this
/// process when it traces).
pub(crate) fn cluster_for(cfg: &ClusterConfig, out: &Path) -> Result<Cluster> {
    let root = std::path::absolute(out)?;
    crate::process::trace_tasks_in(&root);
    let runner = task_runner(&task_program(cfg.engine)?, &root);
    Ok(Cluster::new(
        cfg.clone(),
        &root,
        runner,
        &std::env::current_dir()?,
    )?)
}

/// [`cluster_for`], where `[cluster] engine` is not `local` (which runs
/// everything in this process).
pub fn cluster_of(cfg: &ClusterConfig, out: &Path) -> Result<Option<Cluster>> {
    if cfg.engine == EngineKind::Local {
        return Ok(None);
    }
    cluster_for(cfg, out).map(Some)
}
