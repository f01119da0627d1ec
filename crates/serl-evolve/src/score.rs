//! Scoring: a design trained on the candidates' budget and validated on
//! held-out orders. [`score`] is a function of the job and the run's
//! inputs alone; where it runs, and what is written, is the
//! executor's (`executor.rs`).

use std::sync::Arc;
use std::time::Instant;

use serl_design::{Design, TermRecorder};
use serl_env::{DynamicVenue, StaticVenue, Venue};
use serl_eval::{run_backtest, summarize, OrderResult};
use serl_train::{Algo, Policy};

use crate::candidate::{CandidateResult, ScoreJob, Scored, Validation};
use crate::error::EvolveError;
use crate::train::{policy_factory, train_design, validation_orders, Scoring};

/// Whether `algo` trains `d` with the fused learner, which gives the same
/// numbers however many trainings share the machine.
pub(crate) fn trains_fused(base: &serl_train::TrainConfig, d: &Design, algo: Algo) -> bool {
    serl_train::reproducible_side_by_side(base, algo, &d.architecture)
}

/// A candidate's score from its validation PA (bps) and its designer's
/// success rate (in (0, 1]: 1 / attempts, averaged over its modules).
///
/// The paper's PA × success rate for a PA of zero or more; PA / success
/// rate below zero. Both halves meet at 0, so the score rises with PA at
/// any success rate, and with the success rate at any PA: a design that
/// needed more attempts never scores higher than the same PA in fewer.
/// (PA × success alone would rank a losing design *higher* the more
/// attempts it took: -4 × 0.5 = -2 > -4.)
pub fn candidate_score(pa: f64, success_rate: f64) -> f64 {
    let s = success_rate.clamp(1e-6, 1.0);
    if pa >= 0.0 {
        pa * s
    } else {
        pa / s
    }
}

/// Trains the job's design on the candidates' budget and validates it,
/// scored by [`candidate_score`], with the seconds each part took. A job
/// on a fold trains on the other folds' days and is scored on its own
/// ([`crate::fold`]), unpaired.
pub(crate) fn score(inputs: &Scoring, job: &ScoreJob) -> Result<Scored, EvolveError> {
    let Some(fold) = job.fold else {
        return score_on(inputs, job);
    };
    let (train, val, record) =
        crate::fold::fold_orders(inputs.train_orders, inputs.val_orders, fold);
    let on_fold = Scoring {
        train_orders: &train,
        val_orders: &val,
        pairing: None,
        ..*inputs
    };
    let mut scored = score_on(&on_fold, job)?;
    scored.result.fold = Some(record);
    Ok(scored)
}

/// [`score`] on the orders `inputs` holds.
fn score_on(inputs: &Scoring, job: &ScoreJob) -> Result<Scored, EvolveError> {
    let design = &job.design;
    let t = Instant::now();
    let (policy, repaired, train_profile) = train_design(
        inputs,
        design,
        Algo::Ppo,
        inputs.cfg.train.total_steps,
        job.seed,
        None,
        0,
    )?;
    let train_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let terms = Arc::new(TermRecorder::new(&design.reward));
    // The plan's reward variables read as in training.
    let scored: Arc<dyn serl_env::Reward> = match inputs.cfg.train.with_design(design).plan {
        Some(plan) => Arc::new(serl_design::PlannedReward::new(plan, terms.clone())),
        None => terms.clone(),
    };
    let v = validate(inputs, &policy, &*scored);
    let result = CandidateResult {
        design: Some(design.clone()),
        reward_terms: Some(terms.stats()),
        score: Some(candidate_score(v.pa, job.success_rate)),
        validation: Some(v),
        repaired,
        train_secs,
        train_profile,
        ..CandidateResult::invalid(job.key.clone(), job.iteration, job.success_rate)
    };
    Ok(Scored {
        result,
        eval_secs: t.elapsed().as_secs_f64(),
    })
}

/// The policy's validation metrics: PA and the rest on the validation
/// orders in the static replay, scored with `terms` (the design's reward,
/// whose terms it measures), and the illusory gain on the first of them
/// replayed in the dynamic market.
pub(crate) fn validate(
    inputs: &Scoring,
    policy: &Policy,
    terms: &dyn serl_env::Reward,
) -> Validation {
    if policy.meta.team.is_some() {
        return crate::team_test::validate(inputs, policy, terms);
    }
    let orders = validation_orders(inputs);
    let f = [policy_factory("candidate".into(), policy.clone())];
    let reward = inputs.env_cfg.default_reward();
    // The static episodes are scored with the design's own reward, its
    // terms measured on the way (PA does not depend on the reward).
    let rows = run_backtest(
        inputs.market,
        &orders,
        &f,
        &[&StaticVenue as &dyn Venue],
        inputs.env_cfg,
        terms,
        &|_| {},
    );
    let refs: Vec<&OrderResult> = rows.iter().collect();
    let s = summarize("candidate", "static", &refs, inputs.cfg.seed);
    let nd = inputs.cfg.dynamic_validation_orders.min(orders.len());
    let dynamic = DynamicVenue {
        market: inputs.market_cfg.clone(),
        seed: inputs.cfg.seed,
    };
    let drows = run_backtest(
        inputs.market,
        &orders[..nd],
        &f,
        &[&dynamic as &dyn Venue],
        inputs.env_cfg,
        &reward,
        &|_| {},
    );
    let mean = |v: &[OrderResult]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().map(|r| r.pa_bps).sum::<f64>() / v.len() as f64
        }
    };
    let pa_dynamic = mean(&drows);
    let static_subset = mean(
        &rows
            .iter()
            .filter(|r| drows.iter().any(|d| d.order_id == r.order_id))
            .cloned()
            .collect::<Vec<_>>(),
    );
    Validation {
        pa: s.pa.mean,
        pa_std: s.pa_std,
        wr: s.wr,
        glr: s.glr.unwrap_or(0.0),
        afi: s.afi,
        illusory_gain: static_subset - pa_dynamic,
        pa_dynamic,
        days: crate::paired::day_means(&rows),
        stock_days: crate::paired::stock_day_means(&rows),
    }
}

#[cfg(test)]
mod tests {
    use super::candidate_score;

    #[test]
    fn the_score_rises_with_pa_and_with_the_success_rate_on_both_sides_of_zero() {
        let pas = [-40.0, -4.0, -0.5, 0.0, 0.5, 4.0, 40.0];
        let rates = [0.2, 1.0 / 3.0, 0.5, 0.75, 1.0];
        for &s in &rates {
            for w in pas.windows(2) {
                assert!(
                    candidate_score(w[0], s) < candidate_score(w[1], s),
                    "{w:?} at {s}"
                );
            }
        }
        for &pa in &pas {
            for w in rates.windows(2) {
                let (lo, hi) = (candidate_score(pa, w[0]), candidate_score(pa, w[1]));
                if pa == 0.0 {
                    assert_eq!(lo, hi);
                } else {
                    assert!(lo < hi, "PA {pa}: {lo} at {} vs {hi} at {}", w[0], w[1]);
                }
            }
        }
        // The paper's rule where PA is positive; a full success is the PA.
        assert_eq!(candidate_score(4.0, 0.5), 2.0);
        assert_eq!(candidate_score(-4.0, 1.0), -4.0);
        assert_eq!(candidate_score(-4.0, 0.5), -8.0);
    }
}
