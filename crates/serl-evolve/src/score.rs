//! Training and scoring: a design trained on the candidates' budget and
//! validated on held-out orders, several side by side where that gives
//! the same numbers.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use serl_design::{Design, SmokeReport, TermRecorder};
use serl_env::{
    spread_orders, DynamicVenue, EnvConfig, MarketConfig, MarketData, ParentOrder, StaticVenue,
    Venue,
};
use serl_eval::{run_backtest, summarize, OrderResult};
use serl_train::{Algo, Policy, TrainProfile, TrainSession};

use crate::candidate::{CandidateResult, ModuleRecord, Validation};
use crate::config::EvolveConfig;
use crate::error::{read_json, write_json, EvolveError};

/// What training and scoring a design needs: the inputs without the
/// designer, shared by candidates training in parallel.
#[derive(Clone, Copy)]
pub(crate) struct Scoring<'a> {
    pub(crate) cfg: &'a EvolveConfig,
    pub(crate) env_cfg: &'a EnvConfig,
    pub(crate) market_cfg: &'a MarketConfig,
    pub(crate) market: &'a MarketData,
    pub(crate) train_orders: &'a [ParentOrder],
    pub(crate) val_orders: &'a [ParentOrder],
    /// Where batches run when not here (`[cluster]`).
    pub(crate) cluster: Option<&'a serl_cluster::Cluster>,
    /// Makes an LLM reward critic, for trainings that ask for one.
    pub(crate) critic: Option<&'a crate::CriticMaker>,
}

/// A designed candidate waiting for training.
pub(crate) struct Pending {
    pub(crate) key: String,
    pub(crate) path: PathBuf,
    pub(crate) design: Option<Design>,
    pub(crate) modules: Vec<ModuleRecord>,
    pub(crate) success_rate: f64,
    pub(crate) seed: u64,
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) reward_smoke: Option<SmokeReport>,
}

impl Pending {
    /// Its result from an earlier run, if it finished.
    pub(crate) fn stored(&self) -> Option<CandidateResult> {
        read_json(&self.path)
    }

    /// The training it needs (none for an invalid design).
    pub(crate) fn job(&self, iteration: usize) -> Option<crate::tasks::ScoreJob> {
        Some(crate::tasks::ScoreJob {
            design: self.design.clone()?,
            key: self.key.clone(),
            iteration,
            success_rate: self.success_rate,
            seed: self.seed,
        })
    }

    /// `result` with how the designer wrote it, written into the run
    /// directory.
    pub(crate) fn finish(
        &self,
        mut result: CandidateResult,
    ) -> Result<CandidateResult, EvolveError> {
        result.modules = self.modules.clone();
        result.prompt_tokens = self.prompt_tokens;
        result.completion_tokens = self.completion_tokens;
        result.reward_smoke = self.reward_smoke.clone();
        write_json(&self.path, &result)?;
        Ok(result)
    }
}

/// Whether `algo` trains `d` with the fused learner, which gives the same
/// numbers however many trainings share the machine.
pub(crate) fn trains_fused(base: &serl_train::TrainConfig, d: &Design, algo: Algo) -> bool {
    let mut tc = base.clone();
    tc.algo = algo;
    tc.network = d.architecture.clone();
    tc.trains_fused()
}

/// Runs `work` on every item and returns the results in the items' order:
/// `parallel` at a time for the items `fused` admits, one at a time for the
/// rest. Only fused trainings share the machine, because burn's learner
/// sums in parallel in an order that depends on what else runs, while the
/// fused one gives the same numbers in any company. Stops after the first
/// group with an error.
pub(crate) fn side_by_side<T: Sync, R: Send>(
    items: &[T],
    parallel: usize,
    fused: impl Fn(&T) -> bool,
    work: impl Fn(&T) -> Result<R, EvolveError> + Sync,
) -> Result<Vec<R>, EvolveError> {
    let (together, alone): (Vec<usize>, Vec<usize>) =
        (0..items.len()).partition(|&i| fused(&items[i]));
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for group in together.chunks(parallel.max(1)).chain(alone.chunks(1)) {
        let done: Vec<Result<R, EvolveError>> = if group.len() == 1 {
            vec![work(&items[group[0]])]
        } else {
            group.par_iter().map(|&i| work(&items[i])).collect()
        };
        for (&i, r) in group.iter().zip(done) {
            out[i] = Some(r?);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// Trains `design` and returns its policy and the values its programs
/// repaired: the final policy, or with `eval_every` > 0 the one that
/// scored best on the validation orders, checked every that many updates.
pub(crate) fn train_design(
    inputs: &Scoring,
    d: &Design,
    algo: Algo,
    steps: usize,
    seed: u64,
    dir: Option<&Path>,
    eval_every: usize,
) -> Result<(Policy, u64, TrainProfile), EvolveError> {
    let selects = eval_every > 0;
    let val_orders = if selects {
        validation_orders(inputs)
    } else {
        Vec::new()
    };
    let mut session = TrainSession::for_design(
        &inputs.cfg.train,
        d,
        algo,
        inputs.market,
        inputs.env_cfg,
        inputs.market_cfg,
        inputs.train_orders,
        &val_orders,
    );
    session.config.total_steps = steps;
    session.config.seed = seed;
    let critic = &session.config.reward_critic;
    if !critic.is_off() && critic.critic == serl_train::CriticKind::Llm {
        let make = inputs.critic.ok_or_else(|| EvolveError::Config("reward_critic.critic = \"llm\" needs a language model: [llm] backend openai, ollama or local, and trainings that run here (cluster tasks have no LLM critic)".into()))?;
        session.reward_critic = Some(make().map_err(EvolveError::Designer)?);
    }
    if selects {
        session.config.eval_every = eval_every;
    }
    let out = session.run(dir.map(Path::to_path_buf), false, None)?;
    Ok((out.policy, out.reward_repaired, out.profile))
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
pub(crate) fn candidate_score(pa: f64, success_rate: f64) -> f64 {
    let s = success_rate.clamp(1e-6, 1.0);
    if pa >= 0.0 {
        pa * s
    } else {
        pa / s
    }
}

/// Trains `design` on the candidates' budget and validates it, scored by
/// [`candidate_score`]. Also returns the seconds spent validating (the
/// result holds the training time).
pub(crate) fn train_and_score(
    inputs: &Scoring,
    design: &Design,
    key: String,
    iteration: usize,
    success_rate: f64,
    seed: u64,
) -> Result<(CandidateResult, f64), EvolveError> {
    let t = Instant::now();
    let (policy, repaired, train_profile) = train_design(
        inputs,
        design,
        Algo::Ppo,
        inputs.cfg.train.total_steps,
        seed,
        None,
        0,
    )?;
    let train_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let terms = std::sync::Arc::new(TermRecorder::new(&design.reward));
    // The plan's reward variables read as in training.
    let scored: std::sync::Arc<dyn serl_env::Reward> =
        match inputs.cfg.train.with_design(design).plan {
            Some(plan) => std::sync::Arc::new(serl_design::PlannedReward::new(plan, terms.clone())),
            None => terms.clone(),
        };
    let v = validate(inputs, &policy, &*scored);
    let r = CandidateResult {
        design: Some(design.clone()),
        reward_terms: Some(terms.stats()),
        score: Some(candidate_score(v.pa, success_rate)),
        validation: Some(v),
        repaired,
        train_secs,
        train_profile,
        ..CandidateResult::invalid(key, iteration, success_rate)
    };
    Ok((r, t.elapsed().as_secs_f64()))
}

/// `validation_orders` of the validation split, spread evenly over it.
pub(crate) fn validation_orders(inputs: &Scoring) -> Vec<ParentOrder> {
    spread_orders(inputs.val_orders, inputs.cfg.validation_orders)
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
    let f = [crate::final_test::policy_factory(
        "candidate".into(),
        policy.clone(),
    )];
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
