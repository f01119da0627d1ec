//! Team backtests: several execution agents working each parent order
//! together at one venue, judged per member and as a team, with the
//! comparisons the multi-agent scenario asks for (against independent
//! baselines, the crowding cost of splitting an order, the gain from
//! communication).

use rayon::prelude::*;
use serde::Serialize;
use serl_env::{
    play_team, team_orders, EnvConfig, Independent, ParentOrder, Reward, TeamMode, TeamStrategy,
    Venue,
};

use crate::backtest::Backtest;
use crate::metrics::{bootstrap_mean, summarize, Estimate, OrderResult, Summary};
use crate::StrategySpec;

/// A named way to make fresh team strategies (one per backtest worker).
pub struct TeamFactory {
    /// The strategy's name in results and reports.
    pub label: String,
    /// Makes a fresh instance.
    pub make: Box<dyn Fn() -> Box<dyn TeamStrategy> + Send + Sync>,
}

impl TeamFactory {
    /// One baseline per member, each working its own share and hearing
    /// nothing (`N × twap`, say), labelled by the baseline's name.
    pub fn independent(spec: StrategySpec) -> Self {
        let label = spec.label();
        let name = label.clone();
        TeamFactory {
            label,
            make: Box::new(move || {
                let spec = spec.clone();
                Box::new(Independent::new(
                    name.clone(),
                    Box::new(move || spec.build()),
                ))
            }),
        }
    }
}

/// One parent order worked by one team strategy at one venue.
#[derive(Debug, Clone, Serialize)]
pub struct TeamResult {
    /// The team as one order (the parent's size and id).
    pub team: OrderResult,
    /// Each member's own order, in member order.
    pub members: Vec<OrderResult>,
    /// The team's score, bps: the whole order's PA for a cooperative team,
    /// the members' mean PA for competitors.
    pub score: f64,
}

impl Backtest<'_> {
    /// Runs every team strategy on every parent order at every venue, each
    /// order worked by `agents` members as `mode` says, in parallel; the
    /// rows sorted as [`Backtest::run`]'s. Orders whose session is
    /// missing, and venues that cannot hold a team, are skipped.
    pub fn run_teams(
        &self,
        orders: &[ParentOrder],
        teams: &[TeamFactory],
        agents: usize,
        mode: TeamMode,
    ) -> Vec<TeamResult> {
        self.scored(|reward| play_teams(self, (orders, teams), (agents, mode), reward))
    }
}

/// [`Backtest::run_teams`]' work.
fn play_teams(
    b: &Backtest,
    (orders, teams): (&[ParentOrder], &[TeamFactory]),
    (agents, mode): (usize, TeamMode),
    reward: &dyn Reward,
) -> Vec<TeamResult> {
    let (market, venues, cfg) = (b.market, &b.venues, b.env);
    let mut out: Vec<TeamResult> = orders
        .par_iter()
        .map_init(
            || {
                teams
                    .iter()
                    .map(|f| (f.label.clone(), (f.make)()))
                    .collect::<Vec<_>>()
            },
            |strats, o| {
                let mut rows = Vec::with_capacity(strats.len() * venues.len());
                if let Some(view) = market.get(&o.symbol, o.date) {
                    let members = team_orders(o, agents);
                    for venue in venues {
                        for (label, s) in strats.iter_mut() {
                            let Some(mut episode) = venue.open_team(view, &members, mode, cfg)
                            else {
                                continue;
                            };
                            s.reset(view, &members, cfg);
                            let out = play_team(episode.as_mut(), s.as_mut(), o, reward, false);
                            rows.push(TeamResult::new(label, venue.name(), o, &members, mode, out));
                        }
                    }
                }
                b.done(1);
                rows
            },
        )
        .flatten()
        .collect();
    out.sort_by(|a, b| {
        (&a.team.env, &a.team.strategy, a.team.order_id).cmp(&(
            &b.team.env,
            &b.team.strategy,
            b.team.order_id,
        ))
    });
    out
}

impl TeamResult {
    fn new(
        label: &str,
        venue: &str,
        parent: &ParentOrder,
        members: &[ParentOrder],
        mode: TeamMode,
        out: serl_env::TeamOutcome,
    ) -> Self {
        let members: Vec<OrderResult> = members
            .iter()
            .zip(out.members)
            .map(|(m, o)| OrderResult::new(label, venue, m, o))
            .collect();
        let team = OrderResult::new(label, venue, parent, out.team);
        let score = match mode {
            TeamMode::Cooperative => team.pa_bps,
            TeamMode::Competitive => {
                members.iter().map(|m| m.pa_bps).sum::<f64>() / members.len() as f64
            }
        };
        TeamResult {
            team,
            members,
            score,
        }
    }
}

/// One strategy at one venue: the team's metrics and each member's.
#[derive(Debug, Clone, Serialize)]
pub struct TeamSummary {
    /// The team as one order (PA, PA-std, WR, GLR, AFI with CIs).
    pub team: Summary,
    /// The team's score (see [`TeamResult::score`]) with its bootstrap CI.
    pub score: Estimate,
    /// Each member's own order, in member order.
    pub members: Vec<Summary>,
}

/// A paired difference of team scores between two strategies at one
/// venue, over the orders both ran.
#[derive(Debug, Clone, Serialize)]
pub struct TeamPaired {
    /// What is measured (`mappo − twap`, `crowding cost`, ...).
    pub what: String,
    /// The venue.
    pub env: String,
    /// Orders both ran.
    pub orders: usize,
    /// The mean difference, bps, with its bootstrap CI.
    pub diff: Estimate,
}

/// Every (strategy, venue) group's summary, in the results' order.
pub fn summarize_teams(results: &[TeamResult], seed: u64) -> Vec<TeamSummary> {
    let mut groups: Vec<(&str, &str)> = results
        .iter()
        .map(|r| (r.team.env.as_str(), r.team.strategy.as_str()))
        .collect();
    groups.dedup();
    groups
        .into_iter()
        .map(|(env, strategy)| {
            let rows: Vec<&TeamResult> = results
                .iter()
                .filter(|r| r.team.env == env && r.team.strategy == strategy)
                .collect();
            let teams: Vec<&OrderResult> = rows.iter().map(|r| &r.team).collect();
            let agents = rows.first().map_or(0, |r| r.members.len());
            let members = (0..agents)
                .map(|k| {
                    let m: Vec<&OrderResult> =
                        rows.iter().filter_map(|r| r.members.get(k)).collect();
                    summarize(strategy, env, &m, seed ^ (k as u64 + 1))
                })
                .collect();
            let scores: Vec<f64> = rows.iter().map(|r| r.score).collect();
            TeamSummary {
                team: summarize(strategy, env, &teams, seed),
                score: bootstrap_mean(&scores, 1000, seed ^ 0x7ea),
                members,
            }
        })
        .collect()
}

/// The team scores of `a` minus those of `b` (two strategies' labels) at
/// `env`, order by order; `None` when they share no order.
pub fn paired_scores(
    results: &[TeamResult],
    a: &str,
    b: &str,
    env: &str,
    seed: u64,
) -> Option<TeamPaired> {
    let of = |s: &str| -> std::collections::HashMap<u64, f64> {
        results
            .iter()
            .filter(|r| r.team.env == env && r.team.strategy == s)
            .map(|r| (r.team.order_id, r.score))
            .collect()
    };
    let (sa, sb) = (of(a), of(b));
    let mut d: Vec<(u64, f64)> = sa
        .iter()
        .filter_map(|(id, x)| sb.get(id).map(|y| (*id, x - y)))
        .collect();
    d.sort_by_key(|p| p.0);
    let d: Vec<f64> = d.into_iter().map(|p| p.1).collect();
    (!d.is_empty()).then(|| TeamPaired {
        what: format!("{a} − {b}"),
        env: env.to_string(),
        orders: d.len(),
        diff: bootstrap_mean(&d, 1000, seed),
    })
}

/// The crowding cost at `env`: the team score of `agents` independent
/// copies of a baseline (`team`, a label of `results`) minus the PA of one
/// agent executing each whole parent order with it (`alone`), order by
/// order.
pub fn crowding_cost(
    results: &[TeamResult],
    team: &str,
    alone: &[OrderResult],
    env: &str,
    seed: u64,
) -> Option<TeamPaired> {
    let single: std::collections::HashMap<u64, f64> = alone
        .iter()
        .filter(|r| r.env == env && r.strategy == team)
        .map(|r| (r.order_id, r.pa_bps))
        .collect();
    let mut d: Vec<(u64, f64)> = results
        .iter()
        .filter(|r| r.team.env == env && r.team.strategy == team)
        .filter_map(|r| {
            single
                .get(&r.team.order_id)
                .map(|s| (r.team.order_id, r.score - s))
        })
        .collect();
    d.sort_by_key(|p| p.0);
    let d: Vec<f64> = d.into_iter().map(|p| p.1).collect();
    (!d.is_empty()).then(|| TeamPaired {
        what: format!("crowding cost: {team} as a team − {team} alone"),
        env: env.to_string(),
        orders: d.len(),
        diff: bootstrap_mean(&d, 1000, seed),
    })
}

/// A venue under another name in reports: the dynamic market with a
/// held-out population, say (`dynamic:thin`).
pub struct NamedVenue<V> {
    /// Its name in results and reports.
    pub name: String,
    /// The venue itself.
    pub venue: V,
}

impl<V: Venue> Venue for NamedVenue<V> {
    fn name(&self) -> &str {
        &self.name
    }
    fn open<'a>(
        &'a self,
        view: &'a serl_env::SessionView,
        order: &'a ParentOrder,
        cfg: &'a EnvConfig,
    ) -> Box<dyn serl_env::Episode + 'a> {
        self.venue.open(view, order, cfg)
    }
    fn open_team<'a>(
        &'a self,
        view: &'a serl_env::SessionView,
        orders: &[ParentOrder],
        mode: TeamMode,
        cfg: &'a EnvConfig,
    ) -> Option<Box<dyn serl_env::TeamEpisode + 'a>> {
        self.venue.open_team(view, orders, mode, cfg)
    }
}
