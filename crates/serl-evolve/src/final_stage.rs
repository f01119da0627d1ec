//! The final stages: plain PPO trained and validated like a candidate (the
//! bar on validation), then the best design retrained with the full budget
//! and tested once, beside the baselines, on identical orders.

use std::path::Path;

use serl_design::Design;
use serl_env::{DynamicVenue, StaticVenue, Venue};
use serl_eval::{Backtest, OrderResult, StrategyFactory, StrategySpec};
use serl_train::{Algo, Critic, DeviceChoice, Policy};

use crate::candidate::ScoreJob;

use crate::config::EvolveConfig;
use crate::error::EvolveError;
use crate::executor::Executor;
use crate::record::{CandidateKind, CandidateResult};
use crate::tasks::FinalJob;
use crate::train::{policy_factory, Scoring};

/// The scripted strategies every test compares against.
pub(crate) const BASELINES: [&str; 3] = ["twap", "vwap", "ac"];
/// Mixed into `[evolve] seed` for the final retrainings' seed (and the
/// first of `--seeds`).
pub(crate) const FINAL_SEED_MIX: u64 = 0xF1AA;
/// The baseline added when the designs place their orders.
pub(crate) const PASSIVE_BASELINE: &str = "twap-passive";

/// Plain PPO on the candidates' budget, validated the same way (or its
/// result from an earlier run).
pub(crate) fn baseline(
    scoring: &Scoring,
    executor: &dyn Executor,
    dir: &Path,
) -> Result<CandidateResult, EvolveError> {
    let key = CandidateKind::baseline_key();
    if let Some(r) = CandidateResult::recorded(dir, &key) {
        return Ok(r);
    }
    let job = ScoreJob {
        design: Design::baseline(),
        key,
        iteration: 0,
        success_rate: 1.0,
        seed: scoring.cfg.seed ^ 0xBA5E,
        fold: None,
    };
    let scored = executor.score(scoring, dir, "baseline", &[job], &|| {})?;
    let scored = scored.into_iter().next().expect("one result per job");
    scored.result.record(dir)
}

/// Retrains the best design and the plain one with each learner of
/// `[evolve] baselines` (PPO and DDQN by default) with the final budget
/// (side by side where they are fused, or as a cluster batch), or loads
/// them from an earlier run, named `serl-best`, `ppo-default`,
/// `ddqn-default` (`sac-default`, ...). A team (`[evolve.train.team] agents` ≥ 2) retrains the
/// best design and the plain one as MAPPO (`mappo-default`) and as
/// independent PPO (`ippo-default`) instead: DDQN trains no team.
pub(crate) fn retrain(
    scoring: &Scoring,
    executor: &dyn Executor,
    best: &Design,
    dir: &Path,
) -> Result<Vec<(String, Policy)>, EvolveError> {
    let cfg = scoring.cfg;
    let finals = final_jobs(cfg, best);
    executor.retrain(scoring, dir, &finals)?;
    finals
        .iter()
        .map(|f| {
            Ok((
                f.name.clone(),
                load_final(cfg, &dir.join("final").join(&f.name))?,
            ))
        })
        .collect()
}

/// Whether plain PPO's validation may train while the final retrainings
/// of `best` do, without changing a number: here (not on a cluster, whose
/// plan one batch at a time writes), and with every one of those
/// trainings on a fused learner, whose numbers do not depend on what else
/// runs.
pub(crate) fn baseline_overlaps_retraining(
    cfg: &EvolveConfig,
    executor: &dyn Executor,
    best: &Design,
) -> bool {
    let fused = |d: &Design, algo| crate::score::trains_fused(&cfg.train, d, algo);
    executor.runs_here()
        && fused(&Design::baseline(), Algo::PPO)
        && final_jobs(cfg, best)
            .iter()
            .all(|j| fused(&j.design, j.algo))
}

/// The final retrainings of `best` and the baselines beside it.
fn final_jobs(cfg: &EvolveConfig, best: &Design) -> Vec<FinalJob> {
    let plain = Design::baseline();
    let seed = cfg.seed ^ FINAL_SEED_MIX;
    let job = |name: &str, design: &Design, algo, critic| FinalJob {
        name: name.into(),
        design: design.clone(),
        algo,
        steps: cfg.final_steps,
        seed,
        eval_every: cfg.final_eval_every,
        critic,
        switch: None,
    };
    match cfg.train.learning_team() {
        // Plain PPO right after the best design whatever the config's
        // order: it is the verdict's reference (`plain_final`).
        None => std::iter::once(job("serl-best", best, Algo::PPO, None))
            .chain(
                std::iter::once(Algo::PPO)
                    .chain(cfg.baselines.iter().copied().filter(|&a| a != Algo::PPO))
                    .map(|algo| {
                        let name = format!("{}-default", algo.key());
                        job(&name, &plain, algo, None)
                    }),
            )
            .collect(),
        Some(_) => vec![
            job("serl-best", best, Algo::PPO, None),
            job(
                "mappo-default",
                &plain,
                Algo::PPO,
                Some(Critic::Centralized),
            ),
            job("ippo-default", &plain, Algo::PPO, Some(Critic::Local)),
        ],
    }
}

/// The policy a final retraining in `fdir` kept: its best validated one
/// where `final_eval_every` selects, else its last.
pub(crate) fn load_final(cfg: &EvolveConfig, fdir: &Path) -> Result<Policy, EvolveError> {
    let device = DeviceChoice::Cpu.device()?;
    let selected = cfg.final_eval_every > 0 && fdir.join("best.bpk").exists();
    let which = if selected { "best" } else { "final" };
    Ok(Policy::load(fdir, which, &device)?)
}

/// The scripted strategies the test plays beside the retrained policies,
/// TWAP first. A design that places orders is judged against a passive
/// baseline too: beating TWAP by earning the spread is no feat where
/// resting at the touch alone earns it.
fn baseline_specs(cfg: &EvolveConfig) -> Result<Vec<StrategySpec>, EvolveError> {
    let placing = !cfg.train.placements.is_empty();
    BASELINES
        .iter()
        .chain(placing.then_some(&PASSIVE_BASELINE))
        .map(|s| StrategySpec::parse(s))
        .collect::<Result<_, _>>()
        .map_err(EvolveError::Config)
}

/// The name of the plain baseline's final retraining: `ppo-default`, or
/// a team run's MAPPO.
pub(crate) fn plain_final(cfg: &EvolveConfig) -> String {
    final_jobs(cfg, &Design::baseline())
        .into_iter()
        .nth(1)
        .expect("the plain baseline's final retraining follows the best design's")
        .name
}

/// The scripted baselines on the validation orders in the static replay,
/// for the evidence file: what a design's edge over plain PPO can be set
/// beside.
pub(crate) fn validate_baselines(scoring: &Scoring) -> Result<Vec<OrderResult>, EvolveError> {
    let orders = crate::train::validation_orders(scoring);
    let factories: Vec<StrategyFactory> = baseline_specs(scoring.cfg)?
        .into_iter()
        .map(StrategyFactory::from_spec)
        .collect();
    Ok(Backtest::new(scoring.market, scoring.env_cfg).run(&orders, &factories))
}

/// Tests the retrained policies once, beside the scripted baselines: every
/// test order in the static replay, the first `dynamic_validation_orders`
/// in the dynamic market.
pub(crate) fn test(
    scoring: &Scoring,
    test_orders: &[serl_env::ParentOrder],
    trained: Vec<(String, Policy)>,
    dir: &Path,
) -> Result<Vec<OrderResult>, EvolveError> {
    let baselines = baseline_specs(scoring.cfg)?;
    if scoring.cfg.train.learning_team().is_some() {
        return crate::team_validation::test(scoring, test_orders, &trained, &baselines, dir);
    }
    let trained = trained
        .into_iter()
        .map(|(label, policy)| policy_factory(label, policy));
    let mut factories: Vec<StrategyFactory> = baselines
        .into_iter()
        .map(StrategyFactory::from_spec)
        .collect();
    factories.extend(trained);
    let env_cfg = scoring.env_cfg;
    let dynamic = DynamicVenue {
        market: scoring.market_cfg.clone(),
        seed: scoring.cfg.seed,
    };
    let n_dyn = scoring.cfg.dynamic_validation_orders.min(test_orders.len());
    let mut rows = Vec::new();
    for (orders, venue) in [
        (test_orders, &StaticVenue as &dyn Venue),
        (&test_orders[..n_dyn], &dynamic as &dyn Venue),
    ] {
        rows.extend(
            Backtest::new(scoring.market, env_cfg)
                .venues(&[venue])
                .run(orders, &factories),
        );
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::Local;

    #[test]
    fn plain_ppo_trains_beside_the_final_retrainings_only_where_all_are_fused() {
        let cfg = EvolveConfig::default();
        let mlp = Design::baseline();
        assert!(baseline_overlaps_retraining(&cfg, &Local, &mlp));
        // DDQN on burn's autodiff: its sums depend on what else runs.
        let mut burn_ddqn = cfg.clone();
        burn_ddqn.train.table_mut::<serl_train::DdqnLearner>().fused = false;
        assert!(!baseline_overlaps_retraining(&burn_ddqn, &Local, &mlp));
        // A best design with book attention is fused too, and overlaps;
        // with PPO on burn it does not.
        let mut attention = mlp.clone();
        attention.architecture.blocks = vec![serl_design::BlockSpec::BookAttention {
            d_model: 8,
            heads: 2,
        }];
        assert!(baseline_overlaps_retraining(&cfg, &Local, &attention));
        let mut burn_ppo = cfg.clone();
        burn_ppo.train.ppo.fused = false;
        assert!(!baseline_overlaps_retraining(&burn_ppo, &Local, &attention));
    }
}
