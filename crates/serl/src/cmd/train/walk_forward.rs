//! `serl train --walk-forward`: a policy per rolling window
//! (`serl_study::walk_forward`), each with its progress bar, and the
//! windows' table and the pooled summaries printed.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use serl_data::Dataset;
use serl_study::TrainFile;

use crate::show;

/// Runs the walk-forward evaluation of `cfg` on `ds` into `out`.
pub fn run(cfg: &TrainFile, data: (&Dataset, &Path), out: &Path, resume: bool) -> Result<ExitCode> {
    let hooks = super::hooks();
    let starting = |w: &serl_eval::walk_forward::Window, dir: &Path| {
        eprintln!(
            "window {}: train {}, test {}: {}",
            w.index,
            w.train_span(),
            w.test_span(),
            dir.display()
        );
    };
    let done = serl_study::walk_forward::run(cfg, data, (out, resume), &hooks, &starting)?;
    print!("{}", serl_study::walk_forward::windows_table(&done.windows));
    show::summaries(&done.pooled);
    println!("report: {}", out.join("walk-forward.html").display());
    Ok(ExitCode::SUCCESS)
}
