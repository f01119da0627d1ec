//! A team of learning agents as one training environment: every parent
//! order is worked by the team's members at once ([`serl_env::TeamEpisode`]),
//! each with its own observation row, action and reward.
//!
//! [`TeamObserver`] makes a member's observation from what the episode
//! shows it: the market's columns, its resting order's queue (a placing
//! team), what it hears from the others, its role and the designed
//! features. Training ([`TeamEnv`]) and every place a trained team plays
//! ([`crate::TeamPolicyStrategy`]) use it, so the team hears its messages
//! everywhere and sees the same columns.

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::Rng;
use serl_design::FeatureSet;
use serl_env::{
    team_orders, team_outcome, ChildOrder, EnvConfig, MarketData, ParentOrder, Placement,
    QueueState, Reward, StepInfo, TeamEpisode, TeamMode, OBS_DIM,
};
use serl_expr::State;

use crate::policy::Pace;
use crate::task::TrainEnv;
use crate::team::{role_columns, Channel, TeamConfig, ROLE_NAMES};
use serl_env::{ImaginedDays, Source, TrainingDraw, Venue};

/// What each member of a team sees, made the same way wherever the team
/// plays. Each call to [`TeamObserver::observe`] is one step: it advances
/// the broadcast and feature programs' windows.
#[derive(Debug, Clone)]
pub(crate) struct TeamObserver {
    placing: bool,
    message_dims: usize,
    channel: Option<Channel>,
    /// Silence: the members hear nothing (their message columns are 0).
    silent: bool,
    role: bool,
    features: Option<FeatureSet>,
    /// Per member, the feature programs' window states.
    states: Vec<Vec<State>>,
    agents: usize,
    inner: Vec<f32>,
}

impl TeamObserver {
    /// The observer of a team whose members may place orders (`placing`),
    /// hear `message_dims` columns through `channel` (none: zeros), see
    /// their role (`role`) and carry designed `features`.
    pub fn new(
        placing: bool,
        message_dims: usize,
        channel: Option<Channel>,
        role: bool,
        features: &FeatureSet,
    ) -> Self {
        TeamObserver {
            placing,
            message_dims,
            channel,
            silent: false,
            role,
            features: (!features.is_empty()).then(|| features.clone().with_queue_input(placing)),
            states: Vec::new(),
            agents: 0,
            inner: Vec::new(),
        }
    }

    /// The same observer, with the members hearing nothing.
    pub fn silenced(mut self) -> Self {
        self.silent = true;
        self
    }

    /// Columns of one member's observation.
    pub fn obs_dim(&self) -> usize {
        self.inner_dim() + self.features.as_ref().map_or(0, FeatureSet::len)
    }

    fn queue_dims(&self) -> usize {
        if self.placing {
            QueueState::COLUMNS
        } else {
            0
        }
    }

    fn inner_dim(&self) -> usize {
        let role = if self.role { ROLE_NAMES.len() } else { 0 };
        OBS_DIM + self.queue_dims() + self.message_dims + role
    }

    /// A new episode of a team of `agents`.
    pub fn reset(&mut self, agents: usize) {
        self.agents = agents;
        if let Some(c) = &mut self.channel {
            c.reset(agents);
        }
        self.states = match &self.features {
            Some(f) => (0..agents).map(|_| f.states()).collect(),
            None => Vec::new(),
        };
    }

    /// Writes every member's observation (`obs_dim()` columns each) into
    /// `out`, from what the episode shows them: `raw`, the market's
    /// columns ([`OBS_DIM`] per member), and `queues`, their resting
    /// orders.
    pub fn observe(&mut self, raw: &[f32], queues: &[QueueState], out: &mut [f32]) {
        let n = self.agents;
        if let Some(c) = self.channel.as_mut().filter(|_| !self.silent) {
            for (k, row) in raw.chunks(OBS_DIM).take(n).enumerate() {
                c.broadcast(k, row);
            }
        }
        let (inner_dim, dim) = (self.inner_dim(), self.obs_dim());
        self.inner.resize(inner_dim, 0.0);
        for k in 0..n {
            let inner = &mut self.inner;
            inner[..OBS_DIM].copy_from_slice(&raw[k * OBS_DIM..(k + 1) * OBS_DIM]);
            let mut at = OBS_DIM;
            if self.placing {
                queues[k].write(&mut inner[at..at + QueueState::COLUMNS]);
                at += QueueState::COLUMNS;
            }
            let heard = &mut inner[at..at + self.message_dims];
            match self.channel.as_ref().filter(|_| !self.silent) {
                Some(c) => c.heard_by(k, heard),
                None => heard.fill(0.0),
            }
            at += self.message_dims;
            if self.role {
                inner[at..at + ROLE_NAMES.len()].copy_from_slice(&role_columns(k, n));
            }
            let row = &mut out[k * dim..(k + 1) * dim];
            match &self.features {
                // A team's members do not see a planted signal (yet).
                Some(f) => f.extend(&mut self.states[k], &self.inner, 0.0, row),
                None => row.copy_from_slice(&self.inner),
            }
        }
    }
}

/// A team of learning agents over real orders: each reset draws a parent
/// order and opens a team episode of it, in the static replay (each member
/// replays its share) or the dynamic market (their orders meet in one
/// book, with the config's scripted peers beside them).
pub struct TeamEnv<'a> {
    market: &'a MarketData,
    orders: &'a [ParentOrder],
    cfg: &'a EnvConfig,
    reward: Arc<dyn Reward>,
    /// Where its episodes play (static or dynamic, for the hybrid loss).
    venue: Box<dyn Venue + Send>,
    source: Source,
    team: TeamConfig,
    pace: Pace,
    placements: Vec<Placement>,
    imagined_replay: Option<ImaginedDays>,
    episode: Option<Box<dyn TeamEpisode + 'a>>,
    parent: Option<ParentOrder>,
    observer: TeamObserver,
    /// The members' current observations, `agents × obs_dim`.
    current: Vec<f32>,
    raw: Vec<f32>,
    queues: Vec<QueueState>,
    infos: Vec<StepInfo>,
    children: Vec<ChildOrder>,
    finished_pa: f64,
}

impl<'a> TeamEnv<'a> {
    /// The team `tc.team` sets (its features, placements, pace and
    /// imagined replay too) over `orders` (all with a session in `market`),
    /// rewarded by `reward`, playing at `venue`. Panics when the venue
    /// does not train (LOBSTER's replay).
    pub fn new(
        market: &'a MarketData,
        orders: &'a [ParentOrder],
        cfg: &'a EnvConfig,
        reward: Arc<dyn Reward>,
        venue: Box<dyn Venue + Send>,
        tc: &crate::TrainConfig,
    ) -> Self {
        let source = venue
            .source()
            .expect("a venue that trains: the static replay or the dynamic market");
        let team = tc.team.clone().unwrap_or_default();
        let channel = team.communication.as_ref().map(Channel::new);
        let observer = TeamObserver::new(
            !tc.placements.is_empty(),
            team.message_dims(),
            channel,
            true,
            &tc.observed_features(),
        );
        let n = team.agents;
        let imagination = &tc.imagination;
        TeamEnv {
            market,
            orders,
            cfg,
            reward,
            venue,
            source,
            pace: tc.pace(),
            placements: tc.placements.clone(),
            imagined_replay: ImaginedDays::new(imagination.replay_share, &imagination.scenarios),
            episode: None,
            parent: None,
            current: vec![0.0; n * observer.obs_dim()],
            observer,
            raw: vec![0.0; n * OBS_DIM],
            queues: vec![QueueState::default(); n],
            infos: Vec::with_capacity(n),
            children: Vec::with_capacity(n),
            finished_pa: 0.0,
            team,
        }
    }

    fn refresh(&mut self) {
        let Some(e) = &self.episode else {
            self.current.fill(0.0);
            return;
        };
        for (k, row) in self.raw.chunks_mut(OBS_DIM).enumerate() {
            e.observe(k, row);
            self.queues[k] = e.queue(k);
        }
        self.observer
            .observe(&self.raw, &self.queues, &mut self.current);
    }

    /// The finished episode's score: the whole parent order's PA for a
    /// cooperative team, the members' mean PA for competitors.
    fn score(&self, e: &dyn TeamEpisode) -> f64 {
        let n = e.agents();
        let members: Vec<_> = (0..n).map(|k| e.outcome(k, 0.0, Vec::new())).collect();
        match (self.team.mode, &self.parent) {
            (TeamMode::Cooperative, Some(p)) => {
                let qty = vec![p.qty / n as f64; n];
                team_outcome(p, &members, &qty).pa_bps()
            }
            _ => members.iter().map(|m| m.pa_bps()).sum::<f64>() / n as f64,
        }
    }
}

impl<'a> TrainEnv for TeamEnv<'a> {
    fn obs_dim(&self) -> usize {
        self.observer.obs_dim()
    }

    fn source(&self) -> Source {
        self.source
    }

    fn agents(&self) -> usize {
        self.team.agents
    }

    fn reset(&mut self, rng: &mut SmallRng) {
        let o = &self.orders[rng.random_range(0..self.orders.len())];
        let Some(view) = self.market.get(&o.symbol, o.date) else {
            (self.episode, self.parent, self.finished_pa) = (None, None, 0.0);
            self.refresh();
            return;
        };
        let members = team_orders(o, self.team.agents);
        let side = if self.team.same_side {
            o.side
        } else {
            o.side.opposite()
        };
        let peers = vec![(side, o.qty * self.team.peer_size); self.team.peers];
        let draw = TrainingDraw {
            rng,
            imagined: self.imagined_replay.as_ref(),
            peers: &peers,
        };
        self.episode =
            self.venue
                .open_team_training(view, &members, self.team.mode, self.cfg, draw);
        self.parent = Some(o.clone());
        self.observer.reset(self.team.agents);
        self.refresh();
    }

    fn observe(&self, out: &mut [f32]) {
        self.observe_agent(0, out)
    }

    fn observe_agent(&self, k: usize, out: &mut [f32]) {
        let d = self.observer.obs_dim();
        out[..d].copy_from_slice(&self.current[k * d..(k + 1) * d]);
    }

    /// Every member takes `action` (a team stepped through the
    /// single-agent interface).
    fn step_placed(&mut self, action: f64, placement: u8) -> (f64, bool) {
        let actions = vec![(action, placement); self.team.agents];
        let mut rewards = vec![0.0; self.team.agents];
        let done = self.step_agents(&actions, &mut rewards);
        (rewards[0], done)
    }

    fn step(&mut self, action: f64) -> (f64, bool) {
        self.step_placed(action, 0)
    }

    /// A cooperative team's members all receive the team's reward (their
    /// rewards' mean: the members' orders are equal shares); competitors
    /// each receive their own.
    fn step_agents(&mut self, actions: &[(f64, u8)], rewards: &mut [f64]) -> bool {
        let Some(e) = &mut self.episode else {
            rewards.fill(0.0);
            return true;
        };
        self.children.clear();
        for (k, &(a, p)) in actions.iter().enumerate() {
            let (left, steps) = e.left(k);
            self.children.push(ChildOrder {
                action: self.pace.share(a, left, steps),
                placement: self
                    .placements
                    .get(usize::from(p))
                    .copied()
                    .unwrap_or_default(),
                cross_first: 0.0,
            });
        }
        e.step_orders(&self.children, &mut self.infos);
        for (r, info) in rewards.iter_mut().zip(&self.infos) {
            *r = self.reward.reward(info);
        }
        if self.team.mode == TeamMode::Cooperative {
            let team = rewards.iter().sum::<f64>() / rewards.len() as f64;
            rewards.fill(team);
        }
        let done = self.infos.first().is_none_or(|i| i.done);
        if done {
            let e = self.episode.as_deref().expect("an episode in play");
            self.finished_pa = self.score(e);
        } else {
            self.refresh();
        }
        done
    }

    fn episode_pa(&self) -> f64 {
        self.finished_pa
    }
}
