//! What an evolve run says around its work, in words the command line
//! and the Python package share: who designs on what, that a resumed run
//! had finished, and how to go on after a signal.

use std::path::Path;

use serl_cluster::Cluster;

use crate::data::StudyData;

/// The run's first lines: who designs, on how many orders, where (and the
/// cluster's engine, when one trains).
pub fn start_lines(
    designer: &str,
    data: &StudyData,
    out: &Path,
    cluster: Option<&Cluster>,
) -> Vec<String> {
    let mut lines = vec![format!(
        "designer: {designer}; {} / {} / {} train / validation / test orders over {} symbols; run directory {}",
        data.train.len(),
        data.val.len(),
        data.test.len(),
        data.symbols,
        out.display()
    )];
    if let Some(c) = cluster {
        lines.push(format!(
            "engine: {}; tasks in {}",
            c.config().engine.name(),
            out.join(serl_cluster::PLAN_FILE).display()
        ));
    }
    lines
}

/// Said when `--resume` finds a run that had finished (its report).
pub fn finished_before(out: &Path) -> Option<String> {
    let report = out.join("report.md");
    report.exists().then(|| {
        format!(
            "{} has finished before (its report: {}): nothing is trained again; its records are read back and its summary printed",
            out.display(),
            report.display()
        )
    })
}

/// What a signal's stop says: how to resume, once the run has a config
/// to resume from (`evolve.toml`).
pub fn resume_hint(out: &Path) -> String {
    if out.join("evolve.toml").exists() {
        format!("resume with `serl evolve --resume {}`", out.display())
    } else {
        "stopped before the run began: nothing to resume".into()
    }
}
