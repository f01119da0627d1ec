//! The environments a trainer collects experience from, behind one small
//! interface: [`TrainEnv`].
//!
//! - [`ExecutionEnv`]: real parent orders in the static replay (of the real
//!   day or an imagined one) or the dynamic market (plain or with an
//!   imagined scenario), from `serl-env`.
//! - [`DriftTask`]: a synthetic execution task whose optimal policy is
//!   known in closed form, to prove the learners correct.

use std::sync::Arc;

use crate::policy::Pace;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serl_env::{
    ChildOrder, EnvConfig, Episode, ExecutionOutcome, ImaginedDays, MarketData, ParentOrder,
    Placement, QueueState, Reward, Scenario, Source, StepInfo, TrainingDraw, Venue, OBS_DIM,
};

/// An episodic environment the trainer can step.
pub trait TrainEnv: Send {
    /// Columns of the observation.
    fn obs_dim(&self) -> usize;
    /// Which loss its transitions count in.
    fn source(&self) -> Source;
    /// Starts a new episode drawn with `rng`.
    fn reset(&mut self, rng: &mut SmallRng);
    /// Writes the current observation (`obs_dim()` columns) into `out`.
    fn observe(&self, out: &mut [f32]);
    /// The planted forecast at the current decision
    /// ([`serl_env::Decision::signal`]): designed features may read it,
    /// the observation does not carry it. 0 where the data has none.
    fn signal(&self) -> f32 {
        0.0
    }
    /// Applies an action (a fraction of the order, or a discrete index);
    /// returns the reward and whether the episode ended.
    fn step(&mut self, action: f64) -> (f64, bool);
    /// [`TrainEnv::step`] with the order placed at the environment's
    /// placement number `placement` (see
    /// [`ExecutionEnv::with_placements`]); environments without placements
    /// ignore it.
    fn step_placed(&mut self, action: f64, placement: u8) -> (f64, bool) {
        let _ = placement;
        self.step(action)
    }
    /// The finished episode's price advantage, bps (a team's: the whole
    /// parent order's, or its members' mean when they compete).
    fn episode_pa(&self) -> f64;
    /// Starts a new episode on order number `order` of the environment's
    /// orders (wrapping around), the rest drawn with `rng` as in
    /// [`TrainEnv::reset`]: what a caller replaying chosen orders uses
    /// (serl's Python environments). Environments without a list of orders
    /// draw as `reset` does.
    fn reset_to(&mut self, order: usize, rng: &mut SmallRng) {
        let _ = order;
        self.reset(rng)
    }
    /// What the last step did (fills, benchmark, timing), if a step was
    /// taken in this episode and the environment reports it.
    fn last_step(&self) -> Option<&StepInfo> {
        None
    }
    /// The finished episode's outcome (fills, benchmark, whole-order PA),
    /// once an episode has ended, if the environment reports it.
    fn finished(&self) -> Option<&ExecutionOutcome> {
        None
    }
    /// The order in play, by its place in the environment's orders, if the
    /// environment draws from such a list.
    fn order(&self) -> Option<usize> {
        None
    }
    /// Where the episode in play stands: the share of the order still
    /// held, the decisions left and the episode's decisions. None for a
    /// team, whose members share one order.
    fn progress(&self) -> Option<(f64, usize, usize)> {
        None
    }
    /// Agents acting here, each with its own observation row and reward
    /// (a team of learning agents; 1 otherwise).
    fn agents(&self) -> usize {
        1
    }
    /// Writes agent `k`'s observation (`obs_dim()` columns) into `out`.
    fn observe_agent(&self, k: usize, out: &mut [f32]) {
        debug_assert_eq!(k, 0, "a single agent");
        self.observe(out)
    }
    /// Steps every agent at once with its action and placement number,
    /// writing each agent's reward into `rewards`; returns whether the
    /// episode ended (for all of them: a team's members share the
    /// window).
    fn step_agents(&mut self, actions: &[(f64, u8)], rewards: &mut [f64]) -> bool {
        let (r, done) = self.step_placed(actions[0].0, actions[0].1);
        rewards[0] = r;
        done
    }
}

/// Real parent orders, one drawn at random per episode.
pub struct ExecutionEnv<'a> {
    market: &'a MarketData,
    orders: &'a [ParentOrder],
    cfg: &'a EnvConfig,
    reward: Arc<dyn Reward>,
    /// Where its episodes play (static or dynamic, for the hybrid loss).
    venue: Box<dyn Venue + Send>,
    source: Source,
    /// The episode in play (none when the order's session is missing).
    episode: Option<Box<dyn Episode + 'a>>,
    /// The last finished episode's outcome.
    finished: Option<ExecutionOutcome>,
    /// The episode's last step, none before its first.
    last_step: Option<StepInfo>,
    /// The order in play (its place in `orders`).
    order: usize,
    team: Option<Team>,
    pace: Pace,
    imagined_replay: Option<ImaginedDays>,
    /// Where orders may go; empty: every order crosses.
    placements: Vec<Placement>,
}

/// The multi-agent scenario inside one environment.
struct Team {
    cfg: crate::team::TeamConfig,
    channel: Option<crate::team::Channel>,
    scratch: Vec<f32>,
}

impl<'a> ExecutionEnv<'a> {
    /// `orders` must all have a session in `market`.
    pub fn new(
        market: &'a MarketData,
        orders: &'a [ParentOrder],
        cfg: &'a EnvConfig,
        reward: Arc<dyn Reward>,
        venue: Box<dyn Venue + Send>,
    ) -> Self {
        let source = venue
            .source()
            .expect("a venue that trains: the static replay or the dynamic market");
        ExecutionEnv {
            market,
            orders,
            cfg,
            reward,
            venue,
            source,
            episode: None,
            finished: None,
            last_step: None,
            order: 0,
            team: None,
            pace: Pace::Absolute,
            imagined_replay: None,
            placements: Vec::new(),
        }
    }

    /// Lets the agent place its orders at one of `placements` (chosen with
    /// [`TrainEnv::step_placed`]); its observation then carries its
    /// resting order's queue state ([`QueueState`]) after the market's
    /// columns.
    pub fn with_placements(mut self, placements: &[Placement]) -> Self {
        self.placements = placements.to_vec();
        self
    }

    fn queue_dims(&self) -> usize {
        if self.placements.is_empty() {
            0
        } else {
            QueueState::COLUMNS
        }
    }

    /// Plays `share` of the static episodes on the real day reshaped by one
    /// of `scenarios`, drawn at random ([`serl_env::SessionView::imagined`]).
    pub fn with_imagined_replay(mut self, share: f64, scenarios: &[Scenario]) -> Self {
        self.imagined_replay = ImaginedDays::new(share, scenarios);
        self
    }

    /// Reads actions as `pace` says (the default: shares of the order).
    pub fn with_pace(mut self, pace: Pace) -> Self {
        self.pace = pace;
        self
    }

    /// Plays the multi-agent scenario: `team.peers` other execution agents
    /// in every dynamic episode, heard through `channel` when given.
    pub fn with_team(
        mut self,
        team: &crate::team::TeamConfig,
        channel: Option<crate::team::Channel>,
    ) -> Self {
        self.team = Some(Team {
            cfg: team.clone(),
            channel,
            scratch: vec![0.0; OBS_DIM],
        });
        self
    }

    fn message_dims(&self) -> usize {
        self.team
            .as_ref()
            .filter(|t| t.channel.is_some())
            .map_or(0, |t| t.cfg.message_dims())
    }

    /// Every agent broadcasts what it now sees.
    fn broadcast(&mut self) {
        let Some(team) = &mut self.team else { return };
        let Some(channel) = &mut team.channel else {
            return;
        };
        if let Some(e) = &self.episode {
            for k in 0..e.agents() {
                e.observe_agent(k, &mut team.scratch);
                channel.broadcast(k, &team.scratch);
            }
        }
    }
}

impl<'a> TrainEnv for ExecutionEnv<'a> {
    fn obs_dim(&self) -> usize {
        OBS_DIM + self.queue_dims() + self.message_dims()
    }

    fn progress(&self) -> Option<(f64, usize, usize)> {
        self.episode.as_ref().map(|e| {
            let (remaining, left) = e.left();
            (remaining, left, e.steps())
        })
    }

    fn source(&self) -> Source {
        self.source
    }

    fn reset(&mut self, rng: &mut SmallRng) {
        let k = rng.random_range(0..self.orders.len());
        self.reset_to(k, rng);
    }

    fn reset_to(&mut self, order: usize, rng: &mut SmallRng) {
        self.order = order % self.orders.len();
        let o = &self.orders[self.order];
        (self.last_step, self.finished) = (None, None);
        let Some(view) = self.market.get(&o.symbol, o.date) else {
            self.episode = None;
            return;
        };
        let peers: Vec<_> = match &self.team {
            Some(team) => {
                let side = if team.cfg.same_side {
                    o.side
                } else {
                    o.side.opposite()
                };
                vec![(side, o.qty * team.cfg.peer_size); team.cfg.peers]
            }
            None => Vec::new(),
        };
        let draw = TrainingDraw {
            rng,
            imagined: self.imagined_replay.as_ref(),
            peers: &peers,
        };
        self.episode = self.venue.open_training(view, o, self.cfg, draw);
        if let Some(channel) = self.team.as_mut().and_then(|t| t.channel.as_mut()) {
            channel.reset(self.episode.as_ref().map_or(1, |e| e.agents()));
        }
        self.broadcast();
    }

    fn observe(&self, out: &mut [f32]) {
        let (own, rest) = out.split_at_mut(OBS_DIM);
        let (queue, heard) = rest.split_at_mut(self.queue_dims());
        match &self.episode {
            Some(e) => e.observe(own),
            None => own.fill(0.0),
        }
        if !queue.is_empty() {
            let q = self.episode.as_ref().map(|e| e.queue()).unwrap_or_default();
            q.write(queue);
        }
        match self.team.as_ref().and_then(|t| t.channel.as_ref()) {
            Some(channel) => channel.heard(heard),
            None => heard.fill(0.0),
        }
    }

    fn signal(&self) -> f32 {
        self.episode
            .as_ref()
            .filter(|e| !e.done())
            .map_or(0.0, |e| e.decision(&[]).signal)
    }

    fn step(&mut self, action: f64) -> (f64, bool) {
        self.step_placed(action, 0)
    }

    fn step_placed(&mut self, action: f64, placement: u8) -> (f64, bool) {
        let Some(e) = &mut self.episode else {
            return (0.0, true);
        };
        let (left, steps) = e.left();
        let placement = self
            .placements
            .get(usize::from(placement))
            .copied()
            .unwrap_or_default();
        let info = e.step_order(ChildOrder {
            action: self.pace.share(action, left, steps),
            placement,
            cross_first: 0.0,
        });
        if info.done {
            self.finished = Some(e.outcome(0.0, Vec::new()));
        }
        if !info.done {
            self.broadcast();
        }
        let (reward, done) = (self.reward.reward(&info), info.done);
        self.last_step = Some(info);
        (reward, done)
    }

    fn episode_pa(&self) -> f64 {
        self.finished.as_ref().map_or(0.0, ExecutionOutcome::pa_bps)
    }

    fn last_step(&self) -> Option<&StepInfo> {
        self.last_step.as_ref()
    }

    fn finished(&self) -> Option<&ExecutionOutcome> {
        self.finished.as_ref()
    }

    fn order(&self) -> Option<usize> {
        Some(self.order)
    }
}

/// A synthetic sell order over `steps` steps whose price drifts by
/// `drift_bps` per step, up or down with equal chance per episode; the
/// direction is shown in the observation. A step may sell at most `cap`
/// of the order; what is left at the end is sold at the last price minus
/// `penalty_bps`.
///
/// The optimal policy sells at the cap as early as possible when the price
/// falls and as late as possible when it rises; [`DriftTask::optimal_pa`]
/// gives its PA in closed form. TWAP earns 0 and a random policy little.
#[derive(Debug, Clone)]
pub struct DriftTask {
    /// Decision steps per episode (default 8).
    pub steps: usize,
    /// Price move per step, bps of the starting price (default 4).
    pub drift_bps: f64,
    /// Largest share of the order one step may sell (default 0.25).
    pub cap: f64,
    /// Discount on what is left at the end, bps (default 25).
    pub penalty_bps: f64,
    direction: f64,
    step: usize,
    remaining: f64,
    proceeds: f64,
    bench: f64,
}

impl DriftTask {
    /// The default task: 8 steps, 4 bps drift, a cap of a quarter of the
    /// order, a 25 bps penalty.
    pub fn new() -> Self {
        DriftTask {
            steps: 8,
            drift_bps: 4.0,
            cap: 0.25,
            penalty_bps: 25.0,
            direction: 1.0,
            step: 0,
            remaining: 1.0,
            proceeds: 0.0,
            bench: 1.0,
        }
    }

    fn price(&self, t: usize) -> f64 {
        1.0 + self.direction * self.drift_bps * 1e-4 * t as f64
    }

    fn mean_price(&self) -> f64 {
        (0..self.steps).map(|t| self.price(t)).sum::<f64>() / self.steps as f64
    }

    /// The best achievable expected PA (bps): sell at the cap in the
    /// cheapest-for-the-seller order of steps, which is the same for
    /// both directions by symmetry.
    pub fn optimal_pa(&self) -> f64 {
        let mut t = self.clone();
        t.direction = -1.0;
        let bench = t.mean_price();
        let mut left: f64 = 1.0;
        let mut pa = 0.0;
        for s in 0..t.steps {
            let q = left.min(t.cap);
            pa += q * (t.price(s) / bench - 1.0) * 1e4;
            left -= q;
        }
        pa
    }
}

impl Default for DriftTask {
    fn default() -> Self {
        DriftTask::new()
    }
}

impl TrainEnv for DriftTask {
    fn obs_dim(&self) -> usize {
        3
    }
    fn source(&self) -> Source {
        Source::Static
    }
    fn reset(&mut self, rng: &mut SmallRng) {
        self.direction = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
        self.step = 0;
        self.remaining = 1.0;
        self.proceeds = 0.0;
        self.bench = self.mean_price();
    }
    fn observe(&self, out: &mut [f32]) {
        out[0] = 1.0 - self.step as f32 / self.steps as f32;
        out[1] = self.remaining as f32;
        out[2] = self.direction as f32;
    }
    fn step(&mut self, action: f64) -> (f64, bool) {
        let frac = if action.is_nan() {
            0.0
        } else {
            action.clamp(0.0, 1.0)
        };
        let q = frac.min(self.cap).min(self.remaining);
        let p = self.price(self.step);
        let mut reward = q * (p / self.bench - 1.0) * 1e4;
        self.proceeds += q * p;
        self.remaining -= q;
        self.step += 1;
        let done = self.step >= self.steps;
        if done && self.remaining > 0.0 {
            let p = p * (1.0 - self.penalty_bps * 1e-4);
            reward += self.remaining * (p / self.bench - 1.0) * 1e4;
            self.proceeds += self.remaining * p;
            self.remaining = 0.0;
        }
        (reward, done)
    }
    fn episode_pa(&self) -> f64 {
        (self.proceeds / self.bench - 1.0) * 1e4
    }
}

/// A seeded generator for env `i` of a run, so that every env draws its
/// own reproducible stream.
pub fn env_rng(seed: u64, i: usize) -> SmallRng {
    SmallRng::seed_from_u64(seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drift_task_optimum_beats_twap_and_is_reached_by_the_closed_form_schedule() {
        let mut t = DriftTask::new();
        let opt = t.optimal_pa();
        assert!(opt > 5.0, "{opt}");
        let mut rng = env_rng(1, 0);
        for _ in 0..4 {
            t.reset(&mut rng);
            let falling = t.direction < 0.0;
            let mut total = 0.0;
            for s in 0..t.steps {
                let late = s >= t.steps - 4;
                let a = if falling || late { 0.25 } else { 0.0 };
                total += t.step(a).0;
            }
            assert!((total - opt).abs() < 1e-9, "{total} vs {opt}");
            assert!((t.episode_pa() - opt).abs() < 1e-6);
        }
        // TWAP sells 1/8 a step whatever the direction: PA 0.
        t.reset(&mut rng);
        for _ in 0..t.steps {
            t.step(0.125);
        }
        assert!(t.episode_pa().abs() < 1e-9);
    }
}
