//! The multi-agent scenario: several execution agents trading in one
//! market at once, stepped jointly.
//!
//! A parent order is worked by a team of N agents ([`team_orders`](crate::team_orders): each
//! takes a 1/N share of it, over the same window). In
//! [`TeamMode::Cooperative`] the shares are desks or venues of one parent
//! order: the team is judged on the whole order's PA and its members share
//! one participation cap. In [`TeamMode::Competitive`] they are N
//! independent orders in the same stock and direction competing for the
//! same liquidity: each is judged on its own PA and has its own cap.
//!
//! A [`TeamEpisode`] holds the members of one team episode: in the dynamic
//! market ([`DynamicTeam`], over [`DynamicEnv::team`]) their child orders
//! meet in one book; in
//! the static replay ([`StaticTeam`]) each replays its share alone. A
//! [`TeamStrategy`] decides for every member at once (a trained team hears
//! what its members broadcast); [`Independent`] runs one single-agent
//! strategy per member, hearing nothing. [`play_team`] is the episode
//! loop, and [`team_outcome`] judges the team as one order.

use crate::config::EnvConfig;
use crate::dynamic_env::DynamicEnv;
use crate::episode::{Decision, Episode, ExecutionOutcome, Strategy};
use crate::order::ParentOrder;
use crate::placement::{ChildOrder, PlacementStats, QueueState};
use crate::reward::{Reward, StepInfo};
use crate::static_env::StaticEnv;
use crate::team_mode::{cap_shares, TeamMode};
use crate::view::{SessionView, ViewRef};
use crate::OBS_DIM;

/// Most execution agents in one team.
pub const MAX_AGENTS: usize = 16;

/// One team episode: the members' orders worked at once, stepped by the
/// caller with one child order per member.
pub trait TeamEpisode: Send {
    /// Members of the team.
    fn agents(&self) -> usize;
    /// Decision steps in the episode (the same for every member).
    fn steps(&self) -> usize;
    /// Whether every step has been taken.
    fn done(&self) -> bool;
    /// Member `k`'s share of its order still to trade, and the steps left.
    fn left(&self, k: usize) -> (f64, usize);
    /// Writes member `k`'s observation for the coming step into `out`.
    fn observe(&self, k: usize, out: &mut [f32]);
    /// Member `k`'s resting order from the last step.
    fn queue(&self, k: usize) -> QueueState;
    /// What member `k` may know at the coming step.
    fn decision<'b>(&'b self, k: usize, obs: &'b [f32]) -> Decision<'b>;
    /// Trades one child order per member over the coming step, writing
    /// each member's [`StepInfo`] into `infos` (in member order).
    fn step_orders(&mut self, orders: &[ChildOrder], infos: &mut Vec<StepInfo>);
    /// How member `k`'s order ended (so far).
    fn outcome(&self, k: usize, reward: f64, inventory_path: Vec<f32>) -> ExecutionOutcome;
}

/// A team in the dynamic market: one desk per member in one simulated
/// session ([`DynamicEnv::team`]), their orders meeting in one book.
pub struct DynamicTeam<'a> {
    env: DynamicEnv<'a>,
}

impl<'a> DynamicTeam<'a> {
    /// The team episode of `env`'s desks.
    pub fn new(env: DynamicEnv<'a>) -> Self {
        DynamicTeam { env }
    }

    /// The episode itself (to add scripted peers, say).
    pub fn env_mut(&mut self) -> &mut DynamicEnv<'a> {
        &mut self.env
    }
}

impl TeamEpisode for DynamicTeam<'_> {
    fn agents(&self) -> usize {
        self.env.desks()
    }
    fn steps(&self) -> usize {
        self.env.steps()
    }
    fn done(&self) -> bool {
        self.env.done()
    }
    fn left(&self, k: usize) -> (f64, usize) {
        self.env.desk_left(k)
    }
    fn observe(&self, k: usize, out: &mut [f32]) {
        self.env.observe_desk(k, out)
    }
    fn queue(&self, k: usize) -> QueueState {
        self.env.desk_queue(k)
    }
    fn decision<'b>(&'b self, k: usize, obs: &'b [f32]) -> Decision<'b> {
        self.env.desk_decision(k, obs)
    }
    fn step_orders(&mut self, orders: &[ChildOrder], infos: &mut Vec<StepInfo>) {
        self.env.step_all(orders, infos)
    }
    fn outcome(&self, k: usize, reward: f64, inventory_path: Vec<f32>) -> ExecutionOutcome {
        self.env.desk_outcome(k, reward, inventory_path)
    }
}

/// A team in the historical replay: each member replays its share of the
/// order alone (the replay has no impact, so members cannot meet).
pub struct StaticTeam<'a> {
    members: Vec<StaticEnv<'a>>,
}

impl<'a> StaticTeam<'a> {
    /// The members' episodes of `orders` on `view` (the real day or an
    /// imagined one), working them as `mode` says: a cooperative team's
    /// members share one participation cap in proportion to their orders.
    pub fn new(view: ViewRef<'a>, orders: &[ParentOrder], mode: TeamMode, cfg: &EnvConfig) -> Self {
        let shares = cap_shares(orders, mode);
        StaticTeam {
            members: orders
                .iter()
                .zip(shares)
                .map(|(o, share)| {
                    let own = EnvConfig {
                        participation_cap: cfg.participation_cap * share,
                        ..cfg.clone()
                    };
                    StaticEnv::owning(view.clone(), o.clone(), own)
                })
                .collect(),
        }
    }
}

impl TeamEpisode for StaticTeam<'_> {
    fn agents(&self) -> usize {
        self.members.len()
    }
    fn steps(&self) -> usize {
        self.members[0].steps()
    }
    fn done(&self) -> bool {
        self.members[0].done()
    }
    fn left(&self, k: usize) -> (f64, usize) {
        self.members[k].left()
    }
    fn observe(&self, k: usize, out: &mut [f32]) {
        self.members[k].observe(out)
    }
    fn queue(&self, k: usize) -> QueueState {
        self.members[k].queue()
    }
    fn decision<'b>(&'b self, k: usize, obs: &'b [f32]) -> Decision<'b> {
        self.members[k].decision(obs)
    }
    fn step_orders(&mut self, orders: &[ChildOrder], infos: &mut Vec<StepInfo>) {
        assert_eq!(
            orders.len(),
            self.members.len(),
            "one child order per member"
        );
        infos.clear();
        for (m, o) in self.members.iter_mut().zip(orders) {
            infos.push(m.step_order(*o));
        }
    }
    fn outcome(&self, k: usize, reward: f64, inventory_path: Vec<f32>) -> ExecutionOutcome {
        self.members[k].outcome(reward, inventory_path)
    }
}

/// The team judged as one order: the members' fills added up against the
/// benchmark they share (the same window in the same market), their
/// rewards averaged and their inventory paths weighed by their orders.
pub fn team_outcome(
    parent: &ParentOrder,
    members: &[ExecutionOutcome],
    qty: &[f64],
) -> ExecutionOutcome {
    let first = &members[0];
    let total_qty: f64 = qty.iter().sum::<f64>().max(1e-12);
    let filled: f64 = members.iter().map(|m| m.filled).sum();
    let steps = members
        .iter()
        .map(|m| m.inventory_path.len())
        .max()
        .unwrap_or(0);
    let inventory_path = (0..steps)
        .map(|t| {
            let left: f64 = members
                .iter()
                .zip(qty)
                .map(|(m, q)| m.inventory_path.get(t).map_or(0.0, |&v| v as f64) * q)
                .sum();
            (left / total_qty) as f32
        })
        .collect();
    // The members' unfilled shares, each at its own horizon price.
    let left: f64 = members.iter().map(|m| m.unfilled()).sum();
    let horizon_price = if left > 0.0 {
        members
            .iter()
            .map(|m| m.unfilled() * m.horizon_price)
            .sum::<f64>()
            / left
    } else {
        first.horizon_price
    };
    ExecutionOutcome {
        order_id: parent.id,
        side: parent.side,
        qty: members.iter().map(|m| m.qty).sum(),
        filled,
        notional: members.iter().map(|m| m.notional).sum(),
        bench_price: first.bench_price,
        arrival_price: first.arrival_price,
        horizon_price,
        reward: members.iter().map(|m| m.reward).sum::<f64>() / members.len() as f64,
        steps: first.steps,
        inventory_path,
        placement: weighted_placement(members, filled, qty, total_qty),
    }
}

/// The members' placement figures weighed as each one is defined: per
/// filled share, per passively filled share, per share of the order.
fn weighted_placement(
    members: &[ExecutionOutcome],
    filled: f64,
    qty: &[f64],
    total_qty: f64,
) -> PlacementStats {
    let by_fill = |f: &dyn Fn(&PlacementStats) -> f64| {
        if filled <= 0.0 {
            return 0.0;
        }
        members
            .iter()
            .map(|m| f(&m.placement) * m.filled)
            .sum::<f64>()
            / filled
    };
    let passive = |m: &ExecutionOutcome| m.placement.passive_share * m.filled;
    let passive_total: f64 = members.iter().map(passive).sum();
    let by_passive = |f: &dyn Fn(&PlacementStats) -> Option<f64>| {
        let sum: f64 = members
            .iter()
            .filter_map(|m| f(&m.placement).map(|v| v * passive(m)))
            .sum();
        (passive_total > 0.0 && members.iter().any(|m| f(&m.placement).is_some()))
            .then(|| sum / passive_total)
    };
    let by_qty = |f: &dyn Fn(&PlacementStats) -> f64| {
        members
            .iter()
            .zip(qty)
            .map(|(m, q)| f(&m.placement) * q)
            .sum::<f64>()
            / total_qty
    };
    PlacementStats {
        passive_share: by_fill(&|p| p.passive_share),
        spread_captured_bps: by_fill(&|p| p.spread_captured_bps),
        adverse_1m_bps: by_passive(&|p| p.adverse_1m_bps),
        adverse_5m_bps: by_passive(&|p| p.adverse_5m_bps),
        final_cross_share: by_qty(&|p| p.final_cross_share),
        final_cross_bps: by_qty(&|p| p.final_cross_bps),
    }
}

/// A strategy that decides for every member of a team at once.
pub trait TeamStrategy: Send {
    /// The strategy's name in reports.
    fn name(&self) -> String;
    /// Called before each episode with the members' orders.
    fn reset(&mut self, view: &SessionView, orders: &[ParentOrder], env: &EnvConfig);
    /// One child order per member for the coming step, from every
    /// member's decision (in member order).
    fn orders(&mut self, decisions: &[Decision]) -> Vec<ChildOrder>;
}

/// One single-agent strategy per member, each working its own order and
/// hearing nothing of the others: N TWAPs, say.
pub struct Independent {
    label: String,
    make: Box<dyn Fn() -> Box<dyn Strategy> + Send>,
    members: Vec<Box<dyn Strategy>>,
}

impl Independent {
    /// Members made by `make`, reported as `label`.
    pub fn new(label: String, make: Box<dyn Fn() -> Box<dyn Strategy> + Send>) -> Self {
        Independent {
            label,
            make,
            members: Vec::new(),
        }
    }
}

impl TeamStrategy for Independent {
    fn name(&self) -> String {
        self.label.clone()
    }
    fn reset(&mut self, view: &SessionView, orders: &[ParentOrder], env: &EnvConfig) {
        while self.members.len() < orders.len() {
            self.members.push((self.make)());
        }
        for (m, o) in self.members.iter_mut().zip(orders) {
            m.reset(view, o, env);
        }
    }
    fn orders(&mut self, decisions: &[Decision]) -> Vec<ChildOrder> {
        self.members
            .iter_mut()
            .zip(decisions)
            .map(|(m, d)| m.order(d))
            .collect()
    }
}

/// How a team episode ended: each member's outcome and the team's as one
/// order ([`team_outcome`]).
#[derive(Debug, Clone)]
pub struct TeamOutcome {
    /// Each member's, in member order.
    pub members: Vec<ExecutionOutcome>,
    /// The team's.
    pub team: ExecutionOutcome,
}

/// Plays one whole team episode of `strategy` (already reset with the
/// members' orders), scoring each member's steps with `reward`; with
/// `record_path`, the outcomes keep the inventory left after each step.
pub fn play_team(
    episode: &mut dyn TeamEpisode,
    strategy: &mut dyn TeamStrategy,
    parent: &ParentOrder,
    reward: &dyn Reward,
    record_path: bool,
) -> TeamOutcome {
    let n = episode.agents();
    let mut obs = vec![0f32; n * OBS_DIM];
    let mut totals = vec![0.0; n];
    let mut paths = vec![Vec::new(); n];
    let mut infos = Vec::with_capacity(n);
    let mut qty = vec![parent.qty / n as f64; n];
    while !episode.done() {
        for (k, row) in obs.chunks_mut(OBS_DIM).enumerate() {
            episode.observe(k, row);
        }
        let decisions: Vec<Decision> = obs
            .chunks(OBS_DIM)
            .enumerate()
            .map(|(k, row)| episode.decision(k, row))
            .collect();
        for (q, d) in qty.iter_mut().zip(&decisions) {
            *q = d.qty;
        }
        let orders = strategy.orders(&decisions);
        drop(decisions);
        episode.step_orders(&orders, &mut infos);
        for (k, info) in infos.iter().enumerate() {
            totals[k] += reward.reward(info);
            if record_path {
                paths[k].push(info.inventory_left as f32);
            }
        }
    }
    let members: Vec<ExecutionOutcome> = paths
        .into_iter()
        .enumerate()
        .map(|(k, p)| episode.outcome(k, totals[k], p))
        .collect();
    TeamOutcome {
        team: team_outcome(parent, &members, &qty),
        members,
    }
}
