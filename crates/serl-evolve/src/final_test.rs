//! The final stages: plain PPO trained and validated like a candidate (the
//! bar on validation), then the best design retrained with the full budget
//! and tested once, beside the baselines, on identical orders.

use std::path::Path;

use serl_design::Design;
use serl_env::{DefaultReward, DynamicVenue, StaticVenue, Venue};
use serl_eval::{run_backtest, OrderResult, StrategyFactory, StrategySpec};
use serl_train::{Algo, DeviceChoice, Policy, PolicyStrategy};

use crate::candidate::{CandidateKind, CandidateResult};
use crate::error::{read_json, write_json, EvolveError};
use crate::score::{side_by_side, train_and_score, train_design, trains_fused, Scoring};

/// The scripted strategies every test compares against.
const BASELINES: [&str; 3] = ["twap", "vwap", "ac"];

/// Plain PPO on the candidates' budget, validated the same way (or its
/// result from an earlier run).
pub(crate) fn baseline(scoring: &Scoring, dir: &Path) -> Result<CandidateResult, EvolveError> {
    let key = CandidateKind::baseline_key();
    let path = dir.join("candidates").join(format!("{key}.json"));
    if let Some(r) = read_json::<CandidateResult>(&path) {
        return Ok(r);
    }
    let seed = scoring.cfg.seed ^ 0xBA5E;
    let (r, _) = train_and_score(scoring, &Design::baseline(), key, 0, 1.0, seed)?;
    write_json(&path, &r)?;
    Ok(r)
}

/// Retrains the best design, plain PPO and DDQN with the final budget
/// (side by side where they are fused), or loads them from an earlier
/// run, as strategies named `serl-best`, `ppo-default` and `ddqn-default`.
pub(crate) fn retrain(
    scoring: &Scoring,
    best: &Design,
    dir: &Path,
) -> Result<Vec<StrategyFactory>, EvolveError> {
    let cfg = scoring.cfg;
    let plain = Design::baseline();
    let finals = [
        ("serl-best", best, Algo::Ppo),
        ("ppo-default", &plain, Algo::Ppo),
        ("ddqn-default", &plain, Algo::Ddqn),
    ];
    let policies = side_by_side(
        &finals,
        cfg.parallel_candidates(),
        |(_, d, algo)| trains_fused(&cfg.train, d, *algo),
        |(name, d, algo)| {
            let fdir = dir.join("final").join(name);
            let selected = cfg.final_eval_every > 0 && fdir.join("best.bpk").exists();
            if fdir.join("final.bpk").exists() {
                let which = if selected { "best" } else { "final" };
                return Ok(Policy::load(&fdir, which, &DeviceChoice::Cpu.device()?)?);
            }
            let seed = cfg.seed ^ 0xF1AA;
            let trained = train_design(
                scoring,
                d,
                *algo,
                cfg.final_steps,
                seed,
                Some(&fdir),
                cfg.final_eval_every,
            )?;
            Ok(trained.0)
        },
    )?;
    Ok(finals
        .iter()
        .zip(policies)
        .map(|((name, ..), policy)| {
            let label = name.to_string();
            StrategyFactory {
                label: label.clone(),
                make: Box::new(move || {
                    Box::new(PolicyStrategy::new(policy.clone(), label.clone()))
                }),
            }
        })
        .collect())
}

/// Tests the retrained policies once, beside the scripted baselines: every
/// test order in the static replay, the first `dynamic_validation_orders`
/// in the dynamic market.
pub(crate) fn test(
    scoring: &Scoring,
    test_orders: &[serl_env::ParentOrder],
    trained: Vec<StrategyFactory>,
) -> Result<Vec<OrderResult>, EvolveError> {
    let mut factories = BASELINES
        .iter()
        .map(|s| StrategySpec::parse(s).map(StrategyFactory::from_spec))
        .collect::<Result<Vec<_>, _>>()
        .map_err(EvolveError::Config)?;
    factories.extend(trained);
    let env_cfg = scoring.env_cfg;
    let reward = DefaultReward {
        inventory_penalty: env_cfg.inventory_penalty,
        terminal_penalty: env_cfg.terminal_penalty,
    };
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
