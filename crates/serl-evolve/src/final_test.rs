//! The final stages: plain PPO trained and validated like a candidate (the
//! bar on validation), then the best design retrained with the full budget
//! and tested once, beside the baselines, on identical orders.

use std::path::Path;

use serl_design::Design;
use serl_env::{DynamicVenue, StaticVenue, Venue};
use serl_eval::{run_backtest, OrderResult, StrategyFactory, StrategySpec};
use serl_train::{Algo, Critic, DeviceChoice, Policy, PolicyStrategy};

use crate::candidate::{CandidateKind, CandidateResult};
use crate::error::{read_json, write_json, EvolveError};
use crate::score::Scoring;
use crate::tasks::{final_batch, score_batch, FinalJob, ScoreJob};

/// The scripted strategies every test compares against.
pub(crate) const BASELINES: [&str; 3] = ["twap", "vwap", "ac"];
/// Mixed into `[evolve] seed` for the final retrainings' seed (and the
/// first of `--seeds`).
pub(crate) const FINAL_SEED_MIX: u64 = 0xF1AA;
/// The baseline added when the designs place their orders.
pub(crate) const PASSIVE_BASELINE: &str = "twap-passive";

/// Plain PPO on the candidates' budget, validated the same way (or its
/// result from an earlier run).
pub(crate) fn baseline(scoring: &Scoring, dir: &Path) -> Result<CandidateResult, EvolveError> {
    let key = CandidateKind::baseline_key();
    let path = dir.join("candidates").join(format!("{key}.json"));
    if let Some(r) = read_json::<CandidateResult>(&path) {
        return Ok(r);
    }
    let job = ScoreJob {
        design: Design::baseline(),
        key,
        iteration: 0,
        success_rate: 1.0,
        seed: scoring.cfg.seed ^ 0xBA5E,
    };
    let (r, _) = score_batch(scoring, dir, "baseline", &[job], &|| {})?
        .pop()
        .expect("one result per job");
    write_json(&path, &r)?;
    Ok(r)
}

/// Retrains the best design, plain PPO and DDQN with the final budget
/// (side by side where they are fused, or as a cluster batch), or loads
/// them from an earlier run, named `serl-best`, `ppo-default` and
/// `ddqn-default`. A team (`[evolve.train.team] agents` ≥ 2) retrains the
/// best design and the plain one as MAPPO (`mappo-default`) and as
/// independent PPO (`ippo-default`) instead: DDQN trains no team.
pub(crate) fn retrain(
    scoring: &Scoring,
    best: &Design,
    dir: &Path,
) -> Result<Vec<(String, Policy)>, EvolveError> {
    let cfg = scoring.cfg;
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
    let finals = match cfg.train.learning_team() {
        None => vec![
            job("serl-best", best, Algo::Ppo, None),
            job("ppo-default", &plain, Algo::Ppo, None),
            job("ddqn-default", &plain, Algo::Ddqn, None),
        ],
        Some(_) => vec![
            job("serl-best", best, Algo::Ppo, None),
            job(
                "mappo-default",
                &plain,
                Algo::Ppo,
                Some(Critic::Centralized),
            ),
            job("ippo-default", &plain, Algo::Ppo, Some(Critic::Local)),
        ],
    };
    final_batch(scoring, dir, &finals)?;
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

/// Fresh greedy players of `policy` under the name `label`, for a backtest.
pub(crate) fn policy_factory(label: String, policy: Policy) -> StrategyFactory {
    StrategyFactory {
        label: label.clone(),
        make: Box::new(move || Box::new(PolicyStrategy::new(policy.clone(), label.clone()))),
    }
}

/// The policy a final retraining in `fdir` kept: its best validated one
/// where `final_eval_every` selects, else its last.
pub(crate) fn load_final(cfg: &crate::EvolveConfig, fdir: &Path) -> Result<Policy, EvolveError> {
    let device = DeviceChoice::Cpu.device()?;
    let selected = cfg.final_eval_every > 0 && fdir.join("best.bpk").exists();
    let which = if selected { "best" } else { "final" };
    Ok(Policy::load(fdir, which, &device)?)
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
    if scoring.cfg.train.learning_team().is_some() {
        return crate::team_test::test(scoring, test_orders, &trained, dir);
    }
    let trained = trained
        .into_iter()
        .map(|(label, policy)| policy_factory(label, policy));
    // A design that places orders is judged against a passive baseline
    // too: beating TWAP by earning the spread is no feat where resting at
    // the touch alone earns it.
    let placing = !scoring.cfg.train.placements.is_empty();
    let mut factories = BASELINES
        .iter()
        .chain(placing.then_some(&PASSIVE_BASELINE))
        .map(|s| StrategySpec::parse(s).map(StrategyFactory::from_spec))
        .collect::<Result<Vec<_>, _>>()
        .map_err(EvolveError::Config)?;
    factories.extend(trained);
    let env_cfg = scoring.env_cfg;
    let reward = env_cfg.default_reward();
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
        rows.extend(run_backtest(
            scoring.market,
            orders,
            &factories,
            &[venue],
            env_cfg,
            &reward,
            &|_| {},
        ));
    }
    Ok(rows)
}
