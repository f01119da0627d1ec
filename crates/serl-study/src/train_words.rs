//! What a training says around its work, in words the command line and
//! the Python package share: what it loaded, that a resumed run had
//! finished, how to go on after a signal, and what to run next.

use std::path::Path;

use serl_train::TrainConfig;

use crate::config::TrainFile;
use crate::train::{Loaded, SeedRun};

impl Loaded {
    /// The orders and environments a training is about to use.
    pub fn line(&self, train: &TrainConfig) -> String {
        format!(
            "{} train orders, {} validation orders over {} symbols; {} environments ({} dynamic)",
            self.train_orders,
            self.val_orders,
            self.symbols,
            train.n_envs,
            train.dynamic_envs()
        )
    }
}

/// Said when `--resume` finds a run that had finished (its
/// `final.json`), unless `--total-steps` trains it on.
pub fn finished_before(out: &Path, total_steps: Option<usize>) -> Option<String> {
    (total_steps.is_none() && out.join("final.json").is_file()).then(|| {
        format!(
            "{} has finished before (its report: {}): nothing is trained again; its summary follows (--total-steps N trains on to N steps)",
            out.display(),
            out.join("report.md").display()
        )
    })
}

/// What a signal's stop says: how to resume, once the run has a config
/// to resume from (`train.toml`).
pub fn resume_hint(out: &Path, seeds: usize, walk_forward: bool) -> String {
    if !out.join("train.toml").exists() {
        return "stopped before training began: nothing to resume".into();
    }
    let seeds = if seeds > 1 {
        format!(" --seeds {seeds}")
    } else {
        String::new()
    };
    let wf = if walk_forward { " --walk-forward" } else { "" };
    format!(
        "resume with `serl train --resume --out {}{seeds}{wf}`",
        out.display()
    )
}

/// The backtest to run next on a trained policy (or team).
pub fn next_step(cfg: &TrainFile, data: &Path, out: &Path) -> String {
    let (data, out) = (data.display(), out.display());
    if cfg.train.learning_team().is_some() {
        format!("backtest the team: serl backtest --data {data} --split test --team {out} --strategy twap --silence --out {out}/backtest")
    } else {
        format!("backtest it: serl backtest --data {data} --split test --strategy twap --strategy policy:{out} --out {out}/backtest")
    }
}

/// The backtest to run next on the policies of `--seeds N`.
pub fn seeds_next_step(runs: &[SeedRun], data: &Path, out: &Path) -> String {
    let dirs: Vec<String> = runs
        .iter()
        .map(|r| format!("--strategy policy:{}", r.run_dir))
        .collect();
    format!(
        "backtest them: serl backtest --data {} --split test --strategy twap {} --out {}/backtest",
        data.display(),
        dirs.join(" "),
        out.display()
    )
}
