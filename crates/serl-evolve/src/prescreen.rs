//! `[evolve.budget.prescreen]`: a cheap look at each designed candidate
//! before its full training. Every design of a round, and plain PPO once,
//! trains for `steps` and is validated on `validation_orders`; a design
//! more than `margin` bps below plain PPO on that short run is stopped
//! there (kept in the run directory with its short score, never trained
//! further), and the budget goes to the others.
//!
//! The short runs are scoring tasks like any (`scores/screen-KEY.json`),
//! so they run side by side or on the cluster, and a resumed run reads
//! them back and screens the same designs out.

use std::collections::HashMap;
use std::path::Path;

use serl_design::Design;

use crate::budget::PrescreenConfig;
use crate::candidate::ScoreJob;
use crate::error::EvolveError;
use crate::executor::Executor;
use crate::record::{CandidateResult, Screened};
use crate::train::Scoring;

/// The key of a candidate's short run.
fn screen_key(key: &str) -> String {
    format!("screen-{key}")
}

/// Screens `jobs`: returns those that train in full, and what the screen
/// said of every one of them, by key.
pub(crate) fn screen(
    scoring: &Scoring,
    executor: &dyn Executor,
    run_dir: &Path,
    p: &PrescreenConfig,
    jobs: Vec<ScoreJob>,
    iteration: usize,
) -> Result<(Vec<ScoreJob>, HashMap<String, Screened>), EvolveError> {
    if jobs.is_empty() {
        return Ok((jobs, HashMap::new()));
    }
    let mut short = scoring.cfg.clone();
    short.train.total_steps = p.steps;
    short.validation_orders = p.validation_orders;
    short.dynamic_validation_orders = 0;
    let short_scoring = Scoring {
        cfg: &short,
        ..*scoring
    };
    let plain = ScoreJob {
        design: Design::baseline(),
        key: screen_key("baseline"),
        iteration: 0,
        success_rate: 1.0,
        seed: scoring.cfg.seed ^ 0xBA5E,
        fold: None,
    };
    let mut screens: Vec<ScoreJob> = vec![plain];
    screens.extend(jobs.iter().map(|j| ScoreJob {
        key: screen_key(&j.key),
        ..j.clone()
    }));
    let results = executor.score(
        &short_scoring,
        run_dir,
        &format!("i{iteration}-screen"),
        &screens,
        &|| {},
    )?;
    let pa = |r: &CandidateResult| r.validation.as_ref().map_or(f64::NEG_INFINITY, |v| v.pa);
    let plain_pa = pa(&results[0].result);
    let mut said = HashMap::new();
    let mut passed = Vec::new();
    for (job, r) in jobs.into_iter().zip(results[1..].iter().map(|s| &s.result)) {
        let s = Screened {
            pa: pa(r),
            plain_pa,
            passed: pa(r) >= plain_pa - p.margin,
            secs: r.train_secs,
        };
        said.insert(job.key.clone(), s);
        if s.passed {
            passed.push(job);
        }
    }
    tracing::info!(
        iteration,
        passed = passed.len(),
        screened = said.len(),
        "pre-screen against plain PPO at {plain_pa:.3} bps"
    );
    Ok((passed, said))
}

/// A candidate the pre-screen stopped: its design, no full score, the
/// short run's seconds.
pub(crate) fn stopped(
    key: String,
    iteration: usize,
    success_rate: f64,
    design: Design,
    s: Screened,
) -> CandidateResult {
    let mut c = CandidateResult::invalid(key, iteration, success_rate);
    c.design = Some(design);
    c.train_secs = s.secs;
    c.prescreen = Some(s);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_candidate_keeps_its_design_and_costs_its_short_run() {
        let s = Screened {
            pa: -3.0,
            plain_pa: 1.0,
            passed: false,
            secs: 2.5,
        };
        let c = stopped("i0_c1".into(), 0, 1.0, Design::baseline(), s);
        assert!(c.score.is_none() && c.design.is_some());
        assert_eq!(c.train_secs, 2.5);
        assert_eq!(c.prescreen, Some(s));
    }
}
