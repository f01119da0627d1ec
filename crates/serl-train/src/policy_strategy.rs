//! A trained policy as a backtest strategy ([`PolicyStrategy`]): the
//! observation it sees at a decision, as training gave it
//! ([`DecisionObserver`]), and its greedy action through the fused twin.

use rand::rngs::SmallRng;
use serl_design::FeatureSet;
use serl_env::{
    ChildOrder, Decision, EnvConfig, ParentOrder, Placement, QueueState, SessionView, Strategy,
};

use crate::fused::greedy::Greedy;
use crate::policy::{History, Policy};

/// The observation an agent trained in serl's environments sees at a
/// backtest's decision, as training gave it: the environment's columns,
/// its resting order's queue state when it places orders, silence for the
/// messages (alone in a backtest), a lone team member's role, then the
/// designed features ([`crate::WithFeatures`]).
pub struct DecisionObserver {
    features: Option<(FeatureSet, Vec<serl_expr::State>)>,
    placing: bool,
    message_dims: usize,
    team: bool,
    base: Vec<f32>,
}

impl DecisionObserver {
    /// An observer of `features`, for an agent that places its orders
    /// (`placing`), hears `message_dims` message columns and plays as a
    /// team member (`team`); the observation has `obs_dim` columns.
    pub fn new(
        features: &FeatureSet,
        placing: bool,
        (message_dims, team): (usize, bool),
        obs_dim: usize,
    ) -> Self {
        let features = (!features.is_empty()).then(|| {
            let f = features.clone().with_queue_input(placing);
            let s = f.states();
            (f, s)
        });
        DecisionObserver {
            features,
            placing,
            message_dims,
            team,
            base: Vec::with_capacity(obs_dim),
        }
    }

    /// Starts an episode: the features' running states anew.
    pub fn reset(&mut self) {
        if let Some((f, s)) = &mut self.features {
            *s = f.states();
        }
    }

    /// Writes the observation of decision `d` into `obs` (its width).
    pub fn observe(&mut self, d: &Decision, obs: &mut [f32]) {
        let base = &mut self.base;
        base.clear();
        base.extend_from_slice(d.obs);
        if self.placing {
            let at = base.len();
            base.resize(at + QueueState::COLUMNS, 0.0);
            d.queue.write(&mut base[at..]);
        }
        base.resize(base.len() + self.message_dims, 0.0);
        if self.team {
            // A team's policy played alone: the only member of a team of one.
            base.extend_from_slice(&crate::team::role_columns(0, 1));
        }
        match &mut self.features {
            Some((f, s)) => f.extend(s, base, d.signal, obs),
            None => {
                obs.fill(0.0);
                let n = obs.len().min(base.len());
                obs[..n].copy_from_slice(&base[..n]);
            }
        }
    }
}

/// A trained policy as a backtest strategy: greedy (the Gaussian's mean,
/// the most likely or highest-valued action).
pub struct PolicyStrategy {
    policy: Policy,
    /// How it acts: through the fused twin where the network has one.
    greedy: Greedy,
    observer: DecisionObserver,
    label: String,
    history: History,
    rng: SmallRng,
    row: Vec<f32>,
}

impl PolicyStrategy {
    /// Plays `policy` under the name `label`, with the designed features
    /// it was trained with.
    pub fn new(policy: Policy, label: String) -> Self {
        use rand::SeedableRng;
        let history = History::new(policy.meta.spec.window, policy.meta.obs_dim);
        let meta = &policy.meta;
        let observer = DecisionObserver::new(
            &meta.features,
            !meta.placements.is_empty(),
            (meta.message_dims, meta.team.is_some()),
            meta.obs_dim,
        );
        PolicyStrategy {
            greedy: Greedy::new(&policy),
            policy,
            observer,
            label,
            history,
            rng: SmallRng::seed_from_u64(0),
            row: Vec::new(),
        }
    }
}

impl Strategy for PolicyStrategy {
    fn name(&self) -> String {
        self.label.clone()
    }

    fn reset(&mut self, _view: &SessionView, _order: &ParentOrder, _env: &EnvConfig) {
        self.history.clear();
        self.observer.reset();
    }

    fn act(&mut self, d: &Decision) -> f64 {
        self.decide(d).0
    }

    fn order(&mut self, d: &Decision) -> ChildOrder {
        let (action, placement) = self.decide(d);
        ChildOrder {
            action,
            placement,
            cross_first: 0.0,
        }
    }
}

impl PolicyStrategy {
    /// The share to trade and where: the environment's observation, the
    /// resting order's queue state (for a placing policy), silence for the
    /// messages (alone in a backtest) and the designed features.
    fn decide(&mut self, d: &Decision) -> (f64, Placement) {
        let mut obs = vec![0f32; self.policy.meta.obs_dim];
        self.observer.observe(d, &mut obs);
        self.policy.meta.norm.apply(&mut obs);
        self.history.push(&obs);
        self.row.clear();
        self.history.write(&mut self.row);
        let meta = &self.policy.meta;
        let s = self.greedy.act(&self.policy, &self.row, 1, &mut self.rng)[0];
        let share = meta.pace.share(
            s.env_action,
            d.remaining / d.qty,
            d.steps.saturating_sub(d.step),
        );
        let placement = meta
            .placements
            .get(usize::from(s.placement))
            .copied()
            .unwrap_or_default();
        (share, placement)
    }
}
