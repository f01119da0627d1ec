//! A trained policy at inference: the network, its observation
//! normalisation and window, and how its outputs become actions. Rollouts
//! sample from it; [`PolicyStrategy`] plays it in backtests.

use std::collections::VecDeque;

use burn::module::Module;
use burn::tensor::Device;
use rand::rngs::SmallRng;
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::algo::Algo;
use crate::net::{ActorCritic, Head, QNetwork};
use crate::normalize::RunningNorm;
use crate::tensors::{floats, floats1, matrix};
use crate::TrainError;
use serl_design::{FeatureSet, NetworkSpec};

/// How a Gaussian policy's sample becomes a fraction in [0, 1].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Squash {
    /// Clip to [0, 1] (as Stable-Baselines3 does for box actions): 0 and 1
    /// are reachable exactly.
    #[default]
    Clip,
    /// The logistic function.
    Sigmoid,
    /// The hyperbolic tangent, as SAC bounds its actions: `(tanh u + 1) / 2`
    /// of the order with an absolute pace, a tilt of `tanh u` with a tilted
    /// one. Smooth everywhere, so that its log-density has a gradient.
    Tanh,
}

impl Squash {
    /// What the environment receives for the Gaussian's sample `u` under
    /// `pace`: a fraction in [0, 1] with an absolute pace, else a tilt
    /// (which the pace clips to [-1, 1]; only a tanh squash bends it).
    pub fn env_action(self, pace: Pace, u: f64) -> f64 {
        match (pace, self) {
            (Pace::Absolute, Squash::Clip) => u.clamp(0.0, 1.0),
            (Pace::Absolute, Squash::Sigmoid) => 1.0 / (1.0 + (-u).exp()),
            (Pace::Absolute, Squash::Tanh) => 0.5 * (u.tanh() + 1.0),
            (Pace::Tilt(_), Squash::Tanh) => u.tanh(),
            (Pace::Tilt(_), _) => u,
        }
    }
}

/// How a Gaussian policy's action becomes the share of the order traded
/// this step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pace {
    /// The squashed action is the share of the whole order to trade now.
    #[default]
    Absolute,
    /// The action, clipped to [-1, 1], tilts the even pace: `a` trades
    /// (1 + max × a) times what TWAP would trade now (`max` in (0, 1]).
    /// An untrained policy (a ≈ 0) is TWAP, and how far it strays is
    /// bounded, so a small timing edge is not drowned by the variance of
    /// schedules that swing between all and nothing.
    Tilt(f64),
}

impl Pace {
    /// The share of the order to trade for `action`, with `remaining_share`
    /// of the order left over `steps_left` steps. The last step trades all
    /// that is left whatever the tilt.
    pub fn share(self, action: f64, remaining_share: f64, steps_left: usize) -> f64 {
        match self {
            Pace::Absolute => action,
            Pace::Tilt(_) if steps_left <= 1 => remaining_share,
            Pace::Tilt(max) => {
                let a = if action.is_nan() {
                    0.0
                } else {
                    action.clamp(-1.0, 1.0)
                };
                remaining_share / steps_left as f64 * (1.0 + max * a)
            }
        }
    }
}

/// How a policy's outputs become actions: what a learner decides for the
/// policies it trains (`Learner::shape`).
#[derive(Debug, Clone, PartialEq)]
pub struct ActionShape {
    /// What the network's policy head outputs.
    pub head: Head,
    /// How a Gaussian sample becomes a fraction (with an absolute pace).
    pub squash: Squash,
    /// How an action becomes the share of the order traded.
    pub pace: Pace,
    /// The fraction (or tilt) of each discrete action; empty for
    /// continuous ones.
    pub discrete: Vec<f64>,
}

/// Everything but the weights: enough to rebuild the network and use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyMeta {
    /// Which learner trained it, and so which network it has.
    pub algo: Algo,
    /// The network's architecture.
    pub spec: NetworkSpec,
    /// Columns of one observation: the environment's, then heard messages,
    /// then designed features.
    pub obs_dim: usize,
    /// What the policy head outputs.
    pub head: Head,
    /// How a Gaussian sample becomes a fraction (with an absolute pace).
    pub squash: Squash,
    /// How an action becomes the share of the order traded.
    #[serde(default)]
    pub pace: Pace,
    /// The fraction of each discrete action (empty for continuous ones).
    pub discrete: Vec<f64>,
    /// The observation normaliser, frozen as training left it.
    pub norm: RunningNorm,
    /// Designed features appended to the environment's observation
    /// (`obs_dim` counts them).
    /// Saved as their programs, compiled again when the policy is read.
    #[serde(default)]
    pub features: FeatureSet,
    /// Columns of heard messages between the environment's observation
    /// and the features (the multi-agent scenario); zero when backtested
    /// alone.
    #[serde(default)]
    pub message_dims: usize,
    /// Where the policy places its orders: a categorical action `a` trades
    /// `discrete[a / P]` at `placements[a % P]` (P of them), and the
    /// observation carries the resting order's queue state after the
    /// environment's columns. Empty: every order crosses.
    #[serde(default)]
    pub placements: Vec<serl_env::Placement>,
    /// The team the policy learned in (none: a single agent): its members
    /// share this policy, each seeing its role
    /// ([`crate::team::ROLE_NAMES`]) after the heard messages.
    #[serde(default)]
    pub team: Option<TeamMeta>,
}

/// How a team's shared policy was trained and how its members talk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamMeta {
    /// Members it was trained with.
    pub agents: usize,
    /// How they shared the work.
    pub mode: serl_env::TeamMode,
    /// MAPPO's centralised critic or independent PPO's local one.
    pub critic: crate::team::Critic,
    /// Columns of the centralised critic's input row (0 for a local
    /// critic, which reads the actor's).
    pub critic_width: usize,
    /// What the members broadcast and how they hear it; none: they hear
    /// nothing (`meta.message_dims` columns of zeros).
    pub communication: Option<serl_design::Communication>,
}

impl PolicyMeta {
    /// The fraction of the order discrete action `a` trades (0 past the
    /// table).
    pub fn fraction(&self, a: usize) -> f64 {
        self.discrete.get(a).copied().unwrap_or(0.0)
    }

    /// Columns of the centralised critic's input row, for a MAPPO policy.
    pub fn joint_critic_width(&self) -> Option<usize> {
        self.team
            .as_ref()
            .filter(|t| t.critic == crate::team::Critic::Centralized)
            .map(|t| t.critic_width)
    }
}

// Built once per policy; the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
/// A policy's network, of one of two kinds. The variants are named for the
/// learners that first trained them because weights files carry the names
/// (`Ppo.actor.blocks.0...`); they say what the network is, not who
/// trained it.
#[derive(Module, Debug)]
pub enum Model {
    /// An actor-critic: PPO's, or SAC's actor with its soft state value.
    Ppo(ActorCritic),
    /// A Q-network over discrete actions (DDQN's).
    Ddqn(QNetwork),
}

/// The kind of network a learner's policies have (`Learner::NETWORK`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkKind {
    /// An actor-critic ([`Model::Ppo`]).
    ActorCritic,
    /// A Q-network over discrete actions ([`Model::Ddqn`]).
    QNetwork,
}

impl Model {
    /// A freshly initialised network of `kind`, as `meta` describes it.
    pub fn build(
        meta: &PolicyMeta,
        kind: NetworkKind,
        device: &Device,
    ) -> Result<Self, TrainError> {
        Ok(match kind {
            NetworkKind::ActorCritic => Model::Ppo(ActorCritic::with_critic_input(
                &meta.spec,
                meta.obs_dim,
                meta.joint_critic_width(),
                meta.head,
                device,
            )?),
            NetworkKind::QNetwork => {
                let Head::Categorical(n) = meta.head else {
                    return Err(TrainError::Config {
                        field: "algo".into(),
                        message: "a Q-network needs a discrete action set".into(),
                    });
                };
                Model::Ddqn(QNetwork::new(&meta.spec, meta.obs_dim, n, device)?)
            }
        })
    }
}

/// One sampled decision.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sampled {
    /// What the environment receives: a fraction of the order (discrete
    /// actions are mapped through their fraction table).
    pub env_action: f64,
    /// What the learner stores: the pre-squash Gaussian sample or the index.
    pub raw: f32,
    /// Log-probability of `raw` under the policy (0 for DDQN).
    pub log_prob: f32,
    /// The critic's value of the state (for DDQN, the chosen action's Q
    /// value).
    pub value: f32,
    /// Which of the policy's placements the order goes to (0 for a policy
    /// without placements: it crosses).
    pub placement: u8,
}

/// A policy ready to act (no gradients).
#[derive(Debug, Clone)]
pub struct Policy {
    /// Everything but the weights.
    pub meta: PolicyMeta,
    /// The network with its weights.
    pub model: Model,
    /// The device the network lives on.
    pub device: Device,
}

impl Policy {
    /// The fraction of the order discrete action `a` trades.
    pub fn fraction(&self, a: usize) -> f64 {
        self.meta.fraction(a)
    }

    /// Columns of one input row: `obs_dim` × the window.
    pub fn width(&self) -> usize {
        self.meta.obs_dim * self.meta.spec.window
    }

    /// Decisions for `n` rows of normalised observation windows. With
    /// `explore`, a PPO policy samples and a DDQN policy is ε-greedy
    /// (`epsilon`); without it both act greedily.
    pub fn act(
        &self,
        rows: &[f32],
        n: usize,
        explore: bool,
        epsilon: f64,
        rng: &mut SmallRng,
    ) -> Vec<Sampled> {
        self.act_with_critic(rows, None, n, explore, epsilon, rng)
    }

    /// [`Policy::act`], with the centralised critic's input rows of a
    /// MAPPO policy (`critic`). Without them such a policy's values are 0:
    /// acting needs none, and a backtest has no joint rows to give.
    pub fn act_with_critic(
        &self,
        rows: &[f32],
        critic: Option<&[f32]>,
        n: usize,
        explore: bool,
        epsilon: f64,
        rng: &mut SmallRng,
    ) -> Vec<Sampled> {
        let x = matrix(rows, n, &self.device);
        match &self.model {
            Model::Ppo(m) => {
                let out = floats(m.policy(x.clone()));
                let values = match (critic, self.meta.joint_critic_width()) {
                    (Some(c), _) => floats1(m.value(matrix(c, n, &self.device))),
                    (None, Some(_)) => vec![0.0; n],
                    (None, None) => floats1(m.value(x)),
                };
                let log_std = match self.meta.head {
                    Head::Gaussian => floats1(m.log_std.val())[0] as f64,
                    Head::Categorical(_) => 0.0,
                };
                sample_actor_critic(&self.meta, &out, &values, log_std, n, explore, rng)
            }
            Model::Ddqn(q) => {
                epsilon_greedy(&self.meta, &floats(q.forward(x)), n, explore, epsilon, rng)
            }
        }
    }
}

/// Decisions from an actor-critic's outputs for `n` rows: `out` holds the
/// Gaussian means (with `log_std`) or the logits, `values` the critic's.
/// Exploring samples; otherwise the mean or the most likely action.
pub(crate) fn sample_actor_critic(
    meta: &PolicyMeta,
    out: &[f32],
    values: &[f32],
    log_std: f64,
    n: usize,
    explore: bool,
    rng: &mut SmallRng,
) -> Vec<Sampled> {
    match meta.head {
        Head::Gaussian => {
            let std = log_std.exp();
            (0..n)
                .map(|i| {
                    let mean = out[i] as f64;
                    let z: f64 = if explore {
                        StandardNormal.sample(rng)
                    } else {
                        0.0
                    };
                    let u = mean + std * z;
                    Sampled {
                        env_action: meta.squash.env_action(meta.pace, u),
                        raw: u as f32,
                        log_prob: (-0.5 * z * z - log_std - 0.5 * (2.0 * std::f64::consts::PI).ln())
                            as f32,
                        value: values[i],
                        placement: 0,
                    }
                })
                .collect()
        }
        Head::Categorical(k) => (0..n)
            .map(|i| {
                let logits = &out[i * k..(i + 1) * k];
                let max = logits.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                let exps: Vec<f64> = logits.iter().map(|l| ((l - max) as f64).exp()).collect();
                let total: f64 = exps.iter().sum();
                let a = if explore {
                    let mut r = rng.random::<f64>() * total;
                    let mut pick = k - 1;
                    for (j, e) in exps.iter().enumerate() {
                        if r < *e {
                            pick = j;
                            break;
                        }
                        r -= e;
                    }
                    pick
                } else {
                    argmax(logits)
                };
                let places = meta.placements.len().max(1);
                Sampled {
                    env_action: meta.discrete.get(a / places).copied().unwrap_or(0.0),
                    raw: a as f32,
                    log_prob: (exps[a] / total).ln() as f32,
                    value: values[i],
                    placement: (a % places) as u8,
                }
            })
            .collect(),
    }
}

/// A DDQN policy's decisions from its Q values (`n` rows, one column per
/// discrete action): with `explore`, a random action with probability
/// `epsilon`, else the best.
pub(crate) fn epsilon_greedy(
    meta: &PolicyMeta,
    qs: &[f32],
    n: usize,
    explore: bool,
    epsilon: f64,
    rng: &mut SmallRng,
) -> Vec<Sampled> {
    let Head::Categorical(k) = meta.head else {
        unreachable!("a DDQN policy is built with a categorical head")
    };
    (0..n)
        .map(|i| {
            let row = &qs[i * k..(i + 1) * k];
            let a = if explore && rng.random::<f64>() < epsilon {
                rng.random_range(0..k)
            } else {
                argmax(row)
            };
            Sampled {
                env_action: meta.fraction(a),
                raw: a as f32,
                log_prob: 0.0,
                value: row[a],
                placement: 0,
            }
        })
        .collect()
}

pub(crate) fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}

/// The last `window` normalised observations of one episode, oldest first,
/// zero before the episode began.
#[derive(Debug, Clone)]
pub struct History {
    window: usize,
    obs_dim: usize,
    rows: VecDeque<Vec<f32>>,
}

impl History {
    /// An empty history of `window` observations of `obs_dim` columns.
    pub fn new(window: usize, obs_dim: usize) -> Self {
        let mut h = History {
            window,
            obs_dim,
            rows: VecDeque::with_capacity(window),
        };
        h.clear();
        h
    }

    /// Forgets the episode: every observation zero again.
    pub fn clear(&mut self) {
        self.rows.clear();
        for _ in 0..self.window {
            self.rows.push_back(vec![0.0; self.obs_dim]);
        }
    }

    /// Adds the newest observation, dropping the oldest.
    pub fn push(&mut self, obs: &[f32]) {
        if self.rows.len() == self.window {
            self.rows.pop_front();
        }
        self.rows.push_back(obs.to_vec());
    }

    /// Appends the window to `out`, oldest first: one network input row.
    pub fn write(&self, out: &mut Vec<f32>) {
        for r in &self.rows {
            out.extend_from_slice(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Pace;

    #[test]
    fn a_tilted_pace_bends_twap_and_ends_flat() {
        let tilt = Pace::Tilt(0.5);
        // Half the order left over 4 steps: TWAP trades an eighth now.
        assert_eq!(tilt.share(0.0, 0.5, 4), 0.125);
        assert_eq!(tilt.share(1.0, 0.5, 4), 0.125 * 1.5);
        assert_eq!(tilt.share(-7.0, 0.5, 4), 0.125 * 0.5, "clipped to -1");
        assert_eq!(tilt.share(f64::NAN, 0.5, 4), 0.125, "NaN is no tilt");
        assert_eq!(tilt.share(-1.0, 0.3, 1), 0.3, "the last step trades all");
        assert_eq!(Pace::Absolute.share(0.7, 0.5, 4), 0.7);
    }
}
