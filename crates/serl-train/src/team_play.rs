//! A trained team where it plays after training: [`TeamPolicyStrategy`]
//! runs a team's shared policy for every member at once (a
//! [`serl_env::TeamStrategy`]), its members hearing each other's messages
//! as they did in training, and [`team_pa`] scores it on held-out orders.

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rayon::prelude::*;
use serl_env::{
    play_team, team_orders, ChildOrder, Decision, EnvConfig, MarketData, ParentOrder, QueueState,
    SessionView, TeamMode, TeamStrategy, Venue, OBS_DIM,
};

use crate::fused::greedy::Greedy;
use crate::policy::{History, Policy};
use crate::team::Channel;
use crate::team_env::TeamObserver;

/// A team's shared policy deciding for every member, greedily. With
/// [`TeamPolicyStrategy::silenced`] the members hear nothing: their message
/// columns are zero, what a team without communication hears.
pub struct TeamPolicyStrategy {
    policy: Policy,
    /// How it acts: through the fused twin where the network has one.
    greedy: Greedy,
    label: String,
    observer: TeamObserver,
    histories: Vec<History>,
    rng: SmallRng,
    raw: Vec<f32>,
    queues: Vec<QueueState>,
    obs: Vec<f32>,
    rows: Vec<f32>,
}

impl TeamPolicyStrategy {
    /// Plays `policy` under the name `label`; its members hear each other
    /// through the communication it was trained with.
    pub fn new(policy: Policy, label: String) -> Self {
        let meta = &policy.meta;
        let comm = meta.team.as_ref().and_then(|t| t.communication.as_ref());
        let observer = TeamObserver::new(
            !meta.placements.is_empty(),
            meta.message_dims,
            comm.map(Channel::new),
            meta.team.is_some(),
            &meta.features,
        );
        TeamPolicyStrategy {
            greedy: Greedy::new(&policy),
            policy,
            label,
            observer,
            histories: Vec::new(),
            rng: SmallRng::seed_from_u64(0),
            raw: Vec::new(),
            queues: Vec::new(),
            obs: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// The same team hearing nothing from each other.
    pub fn silenced(mut self) -> Self {
        self.observer = self.observer.silenced();
        self
    }
}

impl TeamStrategy for TeamPolicyStrategy {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn reset(&mut self, _view: &SessionView, orders: &[ParentOrder], _env: &EnvConfig) {
        let meta = &self.policy.meta;
        self.observer.reset(orders.len());
        self.histories = (0..orders.len())
            .map(|_| History::new(meta.spec.window, meta.obs_dim))
            .collect();
    }

    fn orders(&mut self, decisions: &[Decision]) -> Vec<ChildOrder> {
        let n = decisions.len();
        let dim = self.policy.meta.obs_dim;
        self.raw.clear();
        self.queues.clear();
        for d in decisions {
            self.raw.extend_from_slice(&d.obs[..OBS_DIM]);
            self.queues.push(d.queue);
        }
        self.obs.resize(n * dim, 0.0);
        self.observer
            .observe(&self.raw, &self.queues, &mut self.obs);
        self.rows.clear();
        for (h, row) in self.histories.iter_mut().zip(self.obs.chunks_mut(dim)) {
            self.policy.meta.norm.apply(row);
            h.push(row);
            h.write(&mut self.rows);
        }
        let meta = &self.policy.meta;
        let acts = self.greedy.act(&self.policy, &self.rows, n, &mut self.rng);
        acts.iter()
            .zip(decisions)
            .map(|(a, d)| ChildOrder {
                action: meta.pace.share(
                    a.env_action,
                    d.remaining / d.qty,
                    d.steps.saturating_sub(d.step),
                ),
                placement: meta
                    .placements
                    .get(usize::from(a.placement))
                    .copied()
                    .unwrap_or_default(),
                cross_first: 0.0,
            })
            .collect()
    }
}

/// Mean score of a team's `policy`, acting greedily as a team of its
/// trained size, over `orders` at `venue`: a cooperative team's PA of the
/// whole parent order, competitors' mean PA (bps).
pub fn team_pa(
    policy: &Policy,
    market: &MarketData,
    orders: &[ParentOrder],
    cfg: &EnvConfig,
    venue: &dyn Venue,
) -> f64 {
    let Some(team) = policy.meta.team.clone() else {
        return crate::validate::static_pa(policy, market, orders, cfg);
    };
    let reward = cfg.default_reward();
    let scores: Vec<f64> = orders
        .par_iter()
        .map_init(
            || TeamPolicyStrategy::new(policy.clone(), "team".into()),
            |s, o| {
                let view = market.get(&o.symbol, o.date)?;
                let members = team_orders(o, team.agents);
                let mut episode = venue.open_team(view, &members, team.mode, cfg)?;
                s.reset(view, &members, cfg);
                let out = play_team(episode.as_mut(), s, o, &reward, false);
                Some(match team.mode {
                    TeamMode::Cooperative => out.team.pa_bps(),
                    TeamMode::Competitive => {
                        out.members.iter().map(|m| m.pa_bps()).sum::<f64>()
                            / out.members.len() as f64
                    }
                })
            },
        )
        .flatten()
        .collect();
    if scores.is_empty() {
        0.0
    } else {
        scores.iter().sum::<f64>() / scores.len() as f64
    }
}
