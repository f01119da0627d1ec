//! Scoring: a design trained on the candidates' budget and validated on
//! held-out orders. [`score`] is a function of the job and the run's
//! inputs alone; where it runs, and what is written, is the
//! executor's (`executor.rs`).

use std::sync::Arc;
use std::time::Instant;

use serl_design::{Design, TermRecorder};
use serl_env::DynamicVenue;
use serl_eval::{summarize, Backtest, OrderResult};
use serl_train::{Algo, Policy};

use crate::candidate::{ScoreJob, Scored};

use crate::error::EvolveError;
use crate::record::{candidate_score, CandidateResult, Validation};
use crate::train::{policy_factory, validation_orders, Scoring, TrainDesign, TrainedDesign};

/// Whether `algo` trains `d` with the fused learner, which gives the same
/// numbers however many trainings share the machine.
pub(crate) fn trains_fused(base: &serl_train::TrainConfig, d: &Design, algo: Algo) -> bool {
    serl_train::reproducible_side_by_side(base, algo, &d.architecture)
}

/// Trains the job's design on the candidates' budget and validates it,
/// scored by [`candidate_score`], with the seconds each part took. A job
/// on a fold trains on the other folds' days and is scored on its own
/// ([`crate::fold`]), unpaired.
pub(crate) fn score(inputs: &Scoring, job: &ScoreJob) -> Result<Scored, EvolveError> {
    let _span = tracing::info_span!("candidate", label = %job.key).entered();
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
    let TrainedDesign {
        policy,
        repaired,
        profile: train_profile,
    } = TrainDesign::new(design).seed(job.seed).run(inputs)?;
    let train_secs = t.elapsed().as_secs_f64();
    let _validating = tracing::info_span!("validation").entered();
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
        return crate::team_validation::validate(inputs, policy, terms);
    }
    let orders = validation_orders(inputs);
    let f = [policy_factory("candidate".into(), policy.clone())];
    // The static episodes are scored with the design's own reward, its
    // terms measured on the way (PA does not depend on the reward).
    let rows = Backtest::new(inputs.market, inputs.env_cfg)
        .reward(terms)
        .run(&orders, &f);
    let refs: Vec<&OrderResult> = rows.iter().collect();
    let s = summarize("candidate", "static", &refs, inputs.cfg.seed);
    let nd = inputs.cfg.dynamic_validation_orders.min(orders.len());
    let dynamic = DynamicVenue {
        market: inputs.market_cfg.clone(),
        seed: inputs.cfg.seed,
    };
    let drows = Backtest::new(inputs.market, inputs.env_cfg)
        .venues(&[&dynamic])
        .run(&orders[..nd], &f);
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
