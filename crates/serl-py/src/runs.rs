//! `serl.run_train` and `serl.run_evolve`: the workflows `serl train` and
//! `serl evolve` run, called from Python through the same library
//! functions (`serl_study::train::run`, `serl_study::evolve::run`), with
//! the run folder locked and recorded as the binary does. They print
//! nothing; the run's files are its record (`serl.load_run` reads them).

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use serde::Deserialize;
use serl_study::evolve::{EvolveHooks, EvolveRequest};
use serl_study::evolve_overrides::{EvolveOverrides, EvolveStart};
use serl_study::rundir::{OutRule, RunKind, RunLock};
use serl_study::train::{RunRequest, TrainingHooks};
use serl_study::train_overrides::{Learner, TrainOverrides, TrainRequest};
use serl_train::Algo;

use crate::error::{chain, Fail};

fn fail(e: serl_study::StudyError) -> Fail {
    Fail::new(chain(&e))
}

/// Locks `out` and records the run's kind, as the binary does; the lock
/// is held until the returned guard drops.
fn claim(out: &Path, kind: RunKind, resume: bool, command: &str) -> Result<RunLock, Fail> {
    let rule = OutRule::from_flags(false, resume);
    serl_study::rundir::claim(out, kind, rule, command, &|_| {}).map_err(fail)
}

fn learner(algo: Option<&str>) -> Result<Option<Learner>, Fail> {
    let Some(name) = algo else { return Ok(None) };
    match name.parse::<Algo>() {
        Ok(algo) => Ok(Some(Learner::Single(algo))),
        Err(_) => Err(Fail::new(format!(
            "algo `{name}`: one of {} (a team trains with `serl train --algo mappo|ippo`)",
            Algo::keys().join(", ")
        ))),
    }
}

/// What the Python side asks of a run: `serl train`'s and `serl
/// evolve`'s flags of the same names, as JSON (unknown keys refused).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunOptions {
    config: Option<PathBuf>,
    data: Option<PathBuf>,
    algo: Option<String>,
    total_steps: Option<usize>,
    seed: Option<u64>,
    #[serde(default)]
    resume: bool,
}

impl RunOptions {
    fn parse(json: &str) -> Result<Self, Fail> {
        serde_json::from_str(json).map_err(|e| Fail::new(format!("run options: {e}")))
    }
}

/// Trains one policy into `out` as `serl train` does (`options`: JSON of
/// `config`, `data`, `algo`, `total_steps`, `seed`, `resume`); returns the
/// run's figures as JSON (`env_steps`, `secs`, `best_val_pa`).
#[pyfunction]
pub fn run_train(py: Python<'_>, out: PathBuf, options: &str) -> PyResult<String> {
    let RunOptions {
        config,
        data,
        algo,
        total_steps,
        seed,
        resume,
    } = RunOptions::parse(options)?;
    let overrides = TrainOverrides {
        algo: learner(algo.as_deref())?,
        total_steps,
        seed,
        ..Default::default()
    };
    let request = TrainRequest {
        out: &out,
        resume,
        config: config.as_deref(),
        data,
        overrides: &overrides,
    };
    let command = format!("python: serl.run_train(out={})", out.display());
    let summary = py.detach(|| -> Result<String, Fail> {
        // As the binary: a run already in `out` is named before the config.
        serl_study::rundir::check_out(&out, RunKind::Train, OutRule::from_flags(false, resume))
            .map_err(fail)?;
        let cfg = serl_study::train_overrides::resolve(&request).map_err(fail)?;
        let _lock = claim(&out, RunKind::Train, resume, &command)?;
        let hooks = TrainingHooks {
            on_update: Box::new(|_| Box::new(|_| {})),
            around: Box::new(|f| f()),
        };
        let run = RunRequest {
            out: &out,
            resume,
            total_steps,
        };
        let done = serl_study::train::run(&cfg, &run, &hooks, &|_| {}, &|_| {}).map_err(fail)?;
        Ok(serde_json::json!({
            "env_steps": done.env_steps,
            "secs": done.secs,
            "best_val_pa": done.best_val,
        })
        .to_string())
    })?;
    Ok(summary)
}

/// Runs SE-RL into `out` as `serl evolve` does (`options`: JSON of
/// `config`, `data`, `seed`, `resume`); returns JSON: the best design's
/// key, its validation score, whether the test is sealed, and the
/// recommendation's lines.
#[pyfunction]
pub fn run_evolve(py: Python<'_>, out: PathBuf, options: &str) -> PyResult<String> {
    let RunOptions {
        config,
        data,
        algo,
        total_steps,
        seed,
        resume,
    } = RunOptions::parse(options)?;
    if algo.is_some() || total_steps.is_some() {
        let msg = "run options: algo and total_steps are run_train's; an evolve run sets its trainings in its config's [evolve.train]";
        return Err(Fail::new(msg).into());
    }
    let overrides = EvolveOverrides {
        data,
        seed,
        ..Default::default()
    };
    let command = format!("python: serl.run_evolve(out={})", out.display());
    let summary = py.detach(|| -> Result<String, Fail> {
        serl_study::rundir::check_out(&out, RunKind::Evolve, OutRule::from_flags(false, resume))
            .map_err(fail)?;
        let start = if resume {
            EvolveStart::Resume(&out)
        } else {
            EvolveStart::New {
                out: &out,
                config: config.as_deref(),
                force: false,
            }
        };
        let (out, cfg) = serl_study::evolve_overrides::resolve(start, &overrides).map_err(fail)?;
        let _lock = claim(&out, RunKind::Evolve, resume, &command)?;
        let request = EvolveRequest {
            seeds: 0,
            walk_forward: false,
            open_test: false,
            new_run: !resume,
            replay_from: None,
        };
        let quiet =
            |_: &serl_evolve::EvolveConfig| -> serl_evolve::OnEvent<'_> { Box::new(|_| {}) };
        let hooks = EvolveHooks {
            warn: &|_| {},
            starting: &|_, _, _| {},
            shown: &quiet,
            ablation: &|_, _| {},
            reported: &|_, _, _| {},
            confirm_step: &|_| {},
        };
        let run = serl_study::evolve::run(&out, &cfg, &request, &hooks).map_err(fail)?;
        Ok(serde_json::json!({
            "best": run.outcome.best.key,
            "validation_score": run.outcome.best.selection_score(),
            "sealed": run.finished.is_none(),
            "recommendation": run.outcome.evidence.lines(),
            "report": out.join("report.html"),
        })
        .to_string())
    })?;
    Ok(summary)
}
