//! Teams in the outer loop (`[evolve.train.team] agents` ≥ 2): a
//! candidate team is validated playing together in the calibrated dynamic
//! market (the profiling module only shapes its training market, so its
//! effect shows here), and the final test plays every team and baseline as
//! a team, on the calibrated market and on held-out populations, with the
//! per-agent tables, the gain from communication and the crowding cost in
//! `test-team/report.html`.

use std::path::Path;

use serl_env::{DynamicVenue, ParentOrder, Reward, StaticVenue, Venue};
use serl_eval::{
    summarize_teams, write_team_report, Backtest, NamedVenue, OrderResult, Provenance,
    StrategyFactory, StrategySpec, TeamComparisons, TeamFactory, TeamReportData, TeamResult,
};
use serl_train::{Policy, TeamPolicyStrategy};

use crate::error::{file_err, EvolveError};
use crate::record::Validation;
use crate::train::{validation_orders, Scoring};

fn team_factory(policy: &Policy, label: &str, silent: bool) -> TeamFactory {
    let (p, name) = (policy.clone(), label.to_string());
    TeamFactory {
        label: name.clone(),
        make: Box::new(move || {
            let s = TeamPolicyStrategy::new(p.clone(), name.clone());
            Box::new(if silent { s.silenced() } else { s })
        }),
    }
}

/// Every member's orders and the team's shape, from the trained policy.
fn shape(policy: &Policy) -> (usize, serl_env::TeamMode) {
    policy
        .meta
        .team
        .as_ref()
        .map_or((1, serl_env::TeamMode::Cooperative), |t| (t.agents, t.mode))
}

fn play(
    scoring: &Scoring,
    orders: &[ParentOrder],
    teams: &[TeamFactory],
    venues: &[&dyn Venue],
    policy: &Policy,
    reward: &dyn Reward,
) -> Vec<TeamResult> {
    let (agents, mode) = shape(policy);
    Backtest::new(scoring.market, scoring.env_cfg)
        .venues(venues)
        .reward(reward)
        .run_teams(orders, teams, agents, mode)
}

/// A candidate team's validation: it plays together in the calibrated
/// dynamic market on the first `dynamic_validation_orders` validation
/// orders (its score there is the PA the search ranks by), scored with
/// the design's reward so its terms are measured, and the same orders in
/// the static replay give the illusory gain.
pub(crate) fn validate(inputs: &Scoring, policy: &Policy, terms: &dyn Reward) -> Validation {
    let orders = validation_orders(inputs);
    let n = inputs
        .cfg
        .dynamic_validation_orders
        .clamp(1, orders.len().max(1));
    let orders = &orders[..n.min(orders.len())];
    let teams = [team_factory(policy, "candidate", false)];
    let dynamic = DynamicVenue {
        market: inputs.market_cfg.clone(),
        seed: inputs.cfg.seed,
    };
    let played = play(inputs, orders, &teams, &[&dynamic], policy, terms);
    let replayed = play(inputs, orders, &teams, &[&StaticVenue], policy, terms);
    let mean =
        |rows: &[TeamResult]| rows.iter().map(|r| r.score).sum::<f64>() / rows.len().max(1) as f64;
    let Some(s) = summarize_teams(&played, inputs.cfg.seed).pop() else {
        return Validation::default();
    };
    Validation {
        pa: s.score.mean,
        pa_std: s.team.pa_std,
        wr: s.team.wr,
        glr: s.team.glr.unwrap_or(0.0),
        afi: s.team.afi,
        illusory_gain: mean(&replayed) - mean(&played),
        pa_dynamic: s.score.mean,
        // A team is scored on its dynamic episodes alone: no static days
        // to pair, so a search ranks teams by their score.
        days: Vec::new(),
        stock_days: Vec::new(),
    }
}

/// The final test of a team run: the retrained teams (and the best one
/// silenced) beside one `baselines` player per member (TWAP first), on every test order in the
/// static replay and the first `dynamic_validation_orders` in the
/// calibrated market and each held-out population. Writes the team report
/// into `dir/test-team` and returns each team's result as one order, for
/// the run's tables.
pub(crate) fn test(
    scoring: &Scoring,
    test_orders: &[ParentOrder],
    trained: &[(String, Policy)],
    baselines: &[StrategySpec],
    dir: &Path,
) -> Result<Vec<OrderResult>, EvolveError> {
    let Some((_, best)) = trained.first() else {
        return Ok(Vec::new());
    };
    let mut teams: Vec<TeamFactory> = trained
        .iter()
        .map(|(label, p)| team_factory(p, label, false))
        .collect();
    teams.push(team_factory(best, "serl-best (silent)", true));
    teams.extend(
        baselines
            .iter()
            .map(|s| TeamFactory::independent(s.clone())),
    );
    let env_cfg = scoring.env_cfg;
    let reward = env_cfg.default_reward();
    let dynamic = |name: String, market| NamedVenue {
        name,
        venue: DynamicVenue {
            market,
            seed: scoring.cfg.seed,
        },
    };
    let mut markets = vec![dynamic("dynamic".into(), scoring.market_cfg.clone())];
    for (name, m) in serl_env::held_out_profiles(scoring.market_cfg) {
        markets.push(dynamic(format!("dynamic:{name}"), m));
    }
    let n_dyn = scoring.cfg.dynamic_validation_orders.min(test_orders.len());
    let mut results = play(scoring, test_orders, &teams, &[&StaticVenue], best, &reward);
    let dynamic_venues: Vec<&dyn Venue> = markets.iter().map(|m| m as &dyn Venue).collect();
    let on_market = &test_orders[..n_dyn];
    results.extend(play(
        scoring,
        on_market,
        &teams,
        &dynamic_venues,
        best,
        &reward,
    ));
    let twap = [StrategyFactory::from_spec(baselines[0].clone())];
    let mut alone = Backtest::new(scoring.market, env_cfg).run(test_orders, &twap);
    alone.extend(
        Backtest::new(scoring.market, env_cfg)
            .venues(&dynamic_venues)
            .run(on_market, &twap),
    );
    write_report(scoring, test_orders.len(), best, &results, &alone, dir)?;
    Ok(results.into_iter().map(|r| r.team).collect())
}

/// The team report of the final test, in `dir/test-team`.
fn write_report(
    scoring: &Scoring,
    orders: usize,
    best: &Policy,
    results: &[TeamResult],
    alone: &[OrderResult],
    dir: &Path,
) -> Result<(), EvolveError> {
    let (agents, mode) = shape(best);
    let mut pairs: Vec<(String, String)> = ["serl-best", "mappo-default", "ippo-default"]
        .iter()
        .map(|s| (s.to_string(), "twap".to_string()))
        .collect();
    for (a, b) in [
        ("serl-best", "serl-best (silent)"),
        ("serl-best", "mappo-default"),
        ("serl-best", "ippo-default"),
        ("mappo-default", "ippo-default"),
    ] {
        pairs.push((a.into(), b.into()));
    }
    let provenance = Provenance {
        split: "test".into(),
        seed: scoring.cfg.seed,
        orders,
        env_config: serde_json::to_string(scoring.env_cfg).unwrap_or_default(),
        reward: "the default reward".into(),
        serl_version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    };
    let asked = TeamComparisons {
        pairs,
        crowding: vec!["twap".into()],
    };
    let data = TeamReportData::new(provenance, mode, agents, results, alone, &asked);
    let out = dir.join("test-team");
    write_team_report(&out, results, &data).map_err(|e| file_err(&out, e))
}
