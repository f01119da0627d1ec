//! The evidence stage of a run: the finalists retrained from fresh seeds,
//! the scripted baselines on the validation orders, the evidence file and
//! the recommendation (`evidence.rs` holds what is computed from the
//! rows; this file runs what produces them).

use std::path::Path;

use crate::candidate::ScoreJob;

use crate::error::EvolveError;
use crate::evidence::{Assessing, SelectionEvidence};
use crate::executor::Executor;
use crate::record::CandidateResult;
use crate::train::Scoring;

/// Mixed into `[evolve] seed` for the finalists' fresh seeds.
const RESCORE_SEED_MIX: u64 = 0x2E5C_0AE5;

/// Mixed into `[evolve] seed` for the folds' trainings.
const FOLD_SEED_MIX: u64 = 0xF01D_C0DE;

/// Mixed into `[evolve] seed` for the SPA test's bootstrap.
const EVIDENCE_SEED_MIX: u64 = 0x5E1E_C7ED;

/// Where the stage works: the run's scoring inputs, its executor and its
/// directory.
pub(crate) type Weighing<'a> = (&'a Scoring<'a>, &'a dyn Executor, &'a Path);

/// The `[evolve.select] finalists` best designs by selection score,
/// retrained on the candidates' budget from fresh seeds and validated
/// again (`scores/rescore_<key>.json`): how much of their lead was the
/// luck of their training.
fn rescore_finalists(
    (scoring, executor, dir): Weighing,
    all: &[CandidateResult],
) -> Result<Vec<CandidateResult>, EvolveError> {
    let cfg = scoring.cfg;
    let jobs: Vec<ScoreJob> = crate::evidence::finalists(all, cfg.select.finalists)
        .into_iter()
        .enumerate()
        .map(|(i, c)| ScoreJob {
            design: c.design.clone().expect("scored candidates have designs"),
            key: format!("{}{}", crate::evidence::RESCORE_PREFIX, c.key),
            iteration: c.iteration,
            success_rate: c.success_rate,
            seed: cfg.seed ^ RESCORE_SEED_MIX ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            fold: None,
        })
        .collect();
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let scored = executor.score(scoring, dir, "finalists", &jobs, &|| {})?;
    Ok(scored.into_iter().map(|s| s.result).collect())
}

/// With `[evolve.select] folds = k`: the finalists and plain PPO each
/// trained k times on the candidates' budget (k × `seeds`), each time
/// without one block of the non-test days, and scored on it
/// (`scores/fold<f>_<key>.json`, `fold<f>s<s>_<key>.json` for the further
/// seeds, each with the days it trained and was scored on).
fn score_folds(
    (scoring, executor, dir): Weighing,
    all: &[CandidateResult],
    plain: &CandidateResult,
) -> Result<Vec<CandidateResult>, EvolveError> {
    let cfg = scoring.cfg;
    let of = cfg.select.folds;
    if of < 2 {
        return Ok(Vec::new());
    }
    let mut designs: Vec<&CandidateResult> = crate::evidence::finalists(all, cfg.select.finalists);
    designs.push(plain);
    let mut jobs = Vec::new();
    for k in 0..cfg.select.seeds {
        for index in 0..of {
            for (i, c) in designs.iter().enumerate() {
                let Some(design) = c.design.clone() else {
                    continue;
                };
                let n = (k * of + index) * designs.len() + i;
                let mix = (n as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                jobs.push(ScoreJob {
                    design,
                    key: crate::fold::fold_key(index, k, &c.key),
                    iteration: c.iteration,
                    success_rate: c.success_rate,
                    seed: cfg.seed ^ FOLD_SEED_MIX ^ mix,
                    fold: Some(crate::fold::Fold { index, of }),
                });
            }
        }
    }
    let scored = executor.score(scoring, dir, "folds", &jobs, &|| {})?;
    Ok(scored.into_iter().map(|s| s.result).collect())
}

/// The evidence of every scored design, plain PPO and the scripted
/// baselines on the validation days (written to the run directory), what
/// it says of the choice of `chosen`, and the recommendation. Validation
/// only: the test split plays no part.
pub(crate) fn weigh(
    weighing: Weighing,
    all: &[CandidateResult],
    plain: &CandidateResult,
    chosen: &str,
) -> Result<SelectionEvidence, EvolveError> {
    let (scoring, _, dir) = weighing;
    let baselines = crate::final_stage::validate_baselines(scoring)?;
    let rescored = rescore_finalists(weighing, all)?;
    let folded = score_folds(weighing, all, plain)?;
    let rows = crate::evidence::rows(all, &rescored, &folded, plain, &baselines);
    let cfg = scoring.cfg;
    let plain_final = crate::final_stage::plain_final(cfg);
    let e = crate::evidence::assess(
        &rows,
        &Assessing {
            chosen,
            settings: &cfg.select,
            seed: cfg.seed ^ EVIDENCE_SEED_MIX,
            plain_final: &plain_final,
            best_final: crate::confirm::BEST,
        },
    );
    crate::evidence::write(dir, &rows, &e)?;
    Ok(e)
}
