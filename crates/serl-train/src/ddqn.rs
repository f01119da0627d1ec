//! Double DQN: a replay buffer, a target network refreshed every
//! `target_every` steps, and a linear ε schedule. The paper's value-based
//! baseline; it shares the rollout machinery and the hybrid weighting.

use burn::module::Module;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::SmallRng;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::hybrid::LossWeights;
use crate::net::QNetwork;
use crate::policy::argmax;
use crate::task::Source;
use crate::tensors::{floats, indices};

pub(crate) mod learner;

/// DDQN's settings (`[train.ddqn]` in configs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DdqnConfig {
    /// The fractions of the order the agent may trade per step.
    pub actions: Vec<f64>,
    /// Capacity of the replay buffer, transitions.
    pub buffer: usize,
    /// Transitions per gradient step.
    pub batch_size: usize,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// Discount factor per decision step.
    pub gamma: f64,
    /// Exploration rate ε at the start.
    pub epsilon_start: f64,
    /// Exploration rate ε after `epsilon_decay_steps`.
    pub epsilon_end: f64,
    /// Environment steps over which ε falls linearly.
    pub epsilon_decay_steps: usize,
    /// Steps collected before learning starts.
    pub learning_starts: usize,
    /// Gradient steps per vector step (each vector step is N env steps).
    pub gradient_steps: usize,
    /// Environment steps between target-network refreshes.
    pub target_every: usize,
    /// Largest gradient norm (per parameter tensor).
    pub max_grad_norm: f32,
    /// Train MLPs (and a GRU over the window) on the CPU with the fused
    /// learner ([`crate::parts::FusedDdqn`]) instead of burn's autodiff;
    /// other networks and devices always use burn. Left out of saved configs
    /// when on, so that they read as before.
    #[serde(skip_serializing_if = "is_on")]
    pub fused: bool,
}

fn is_on(b: &bool) -> bool {
    *b
}

impl Default for DdqnConfig {
    fn default() -> Self {
        DdqnConfig {
            actions: vec![0.0, 0.05, 0.1, 0.25, 0.5, 1.0],
            buffer: 50_000,
            batch_size: 64,
            learning_rate: 1e-3,
            gamma: 0.99,
            epsilon_start: 1.0,
            epsilon_end: 0.05,
            epsilon_decay_steps: 20_000,
            learning_starts: 1_000,
            gradient_steps: 1,
            target_every: 1_000,
            max_grad_norm: 10.0,
            fused: true,
        }
    }
}

impl DdqnConfig {
    /// ε after `step` environment steps.
    pub fn epsilon(&self, step: usize) -> f64 {
        let f = (step as f64 / self.epsilon_decay_steps.max(1) as f64).min(1.0);
        self.epsilon_start + f * (self.epsilon_end - self.epsilon_start)
    }
}

pub fn optimizer(cfg: &DdqnConfig) -> ModuleOptimizer {
    AdamConfig::new()
        .with_grad_clipping(Some(GradientClippingConfig::Norm(cfg.max_grad_norm)))
        .init()
}

/// A ring buffer of transitions.
#[derive(Debug, Clone)]
pub struct Replay {
    width: usize,
    capacity: usize,
    next: usize,
    len: usize,
    obs: Vec<f32>,
    next_obs: Vec<f32>,
    action: Vec<f32>,
    reward: Vec<f32>,
    done: Vec<bool>,
    source: Vec<Source>,
}

impl Replay {
    pub fn new(capacity: usize, width: usize) -> Self {
        let capacity = capacity.max(1);
        Replay {
            width,
            capacity,
            next: 0,
            len: 0,
            obs: vec![0.0; capacity * width],
            next_obs: vec![0.0; capacity * width],
            action: vec![0.0; capacity],
            reward: vec![0.0; capacity],
            done: vec![false; capacity],
            source: vec![Source::Static; capacity],
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &mut self,
        obs: &[f32],
        action: f32,
        reward: f32,
        next_obs: &[f32],
        done: bool,
        source: Source,
    ) {
        let i = self.next;
        let w = self.width;
        self.obs[i * w..(i + 1) * w].copy_from_slice(obs);
        self.next_obs[i * w..(i + 1) * w].copy_from_slice(next_obs);
        self.action[i] = action;
        self.reward[i] = reward;
        self.done[i] = done;
        self.source[i] = source;
        self.next = (i + 1) % self.capacity;
        self.len = (self.len + 1).min(self.capacity);
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct DdqnStats {
    pub loss: f64,
    pub q_mean: f64,
    pub loss_static: Option<f64>,
    pub loss_dynamic: Option<f64>,
}

fn tensor1(v: Vec<f32>, device: &Device) -> Tensor<1> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

/// A minibatch drawn from a [`Replay`], gathered into rows: what both
/// backends' gradient steps read.
pub(crate) struct ReplaySample {
    /// Rows drawn.
    pub(crate) rows: usize,
    pub(crate) obs: Vec<f32>,
    pub(crate) next_obs: Vec<f32>,
    pub(crate) action: Vec<f32>,
    reward: Vec<f32>,
    not_done: Vec<f32>,
    /// 1 for a static row, 0 for a dynamic one, and the reverse.
    pub(crate) is_static: Vec<f32>,
    pub(crate) is_dynamic: Vec<f32>,
}

impl Replay {
    /// `min(batch_size, len)` rows (at least one) drawn uniformly with
    /// replacement.
    pub(crate) fn sample(&self, batch_size: usize, rng: &mut SmallRng) -> ReplaySample {
        let b = batch_size.min(self.len).max(1);
        let w = self.width;
        let picks: Vec<usize> = (0..b).map(|_| rng.random_range(0..self.len)).collect();
        let mut s = ReplaySample {
            rows: b,
            obs: Vec::with_capacity(b * w),
            next_obs: Vec::with_capacity(b * w),
            action: Vec::with_capacity(b),
            reward: Vec::with_capacity(b),
            not_done: Vec::with_capacity(b),
            is_static: Vec::with_capacity(b),
            is_dynamic: Vec::with_capacity(b),
        };
        for &i in &picks {
            s.obs.extend_from_slice(&self.obs[i * w..(i + 1) * w]);
            s.next_obs
                .extend_from_slice(&self.next_obs[i * w..(i + 1) * w]);
            s.action.push(self.action[i]);
            s.reward.push(self.reward[i]);
            s.not_done.push(if self.done[i] { 0.0 } else { 1.0 });
            let st = self.source[i] == Source::Static;
            s.is_static.push(if st { 1.0 } else { 0.0 });
            s.is_dynamic.push(if st { 0.0 } else { 1.0 });
        }
        s
    }
}

impl ReplaySample {
    /// Double DQN's targets: the online network's Q values of the next
    /// observations choose the action, the target network's value it
    /// (both `rows × k`).
    pub(crate) fn targets(
        &self,
        q_online_next: &[f32],
        q_target_next: &[f32],
        k: usize,
        gamma: f64,
    ) -> Vec<f32> {
        (0..self.rows)
            .map(|i| {
                let a = argmax(&q_online_next[i * k..(i + 1) * k]);
                self.reward[i] + gamma as f32 * self.not_done[i] * q_target_next[i * k + a]
            })
            .collect()
    }

    /// The static and dynamic rows' counts, and the weights of their mean
    /// losses: α and β with both present, else all on the one present.
    pub(crate) fn source_weights(&self, weights: LossWeights) -> (f32, f32, f64, f64) {
        let n_s = self.is_static.iter().sum::<f32>();
        let n_d = self.is_dynamic.iter().sum::<f32>();
        let (wa, wb) = match (n_s > 0.0, n_d > 0.0) {
            (true, true) => (weights.alpha, weights.beta),
            (true, false) => (1.0, 0.0),
            (false, _) => (0.0, 1.0),
        };
        (n_s, n_d, wa, wb)
    }
}

/// One gradient step on a minibatch sampled from `replay`. The online
/// network chooses the next action and the target network values it.
pub fn train_step(
    online: QNetwork,
    target: &QNetwork,
    optim: &mut ModuleOptimizer,
    cfg: &DdqnConfig,
    replay: &Replay,
    weights: LossWeights,
    rng: &mut SmallRng,
) -> (QNetwork, DdqnStats) {
    let device = online.head.weight.val().device();
    let inner_device = target.head.weight.val().device();
    let w = replay.width;
    let k = cfg.actions.len();
    let mut s = replay.sample(cfg.batch_size, rng);
    let b = s.rows;
    // Double DQN target: argmax by the online net, value by the target.
    let next_obs = std::mem::take(&mut s.next_obs);
    let nx_inner = Tensor::<2>::from_data(TensorData::new(next_obs, [b, w]), &inner_device);
    let q_online_next = floats(online.valid().forward(nx_inner.clone()));
    let q_target_next = floats(target.forward(nx_inner));
    let y = s.targets(&q_online_next, &q_target_next, k, cfg.gamma);
    let xt = Tensor::<2>::from_data(TensorData::new(std::mem::take(&mut s.obs), [b, w]), &device);
    let q = online
        .forward(xt)
        .gather(1, indices(&s.action, &device))
        .reshape([b]);
    let diff = q.clone() - tensor1(y, &device);
    // Huber loss, δ = 1.
    let abs = diff.clone().abs();
    let quad = abs.clone().clamp_max(1.0);
    let per = quad.clone().powi_scalar(2).mul_scalar(0.5) + (abs - quad);
    let (n_s, n_d, wa, wb) = s.source_weights(weights);
    let l_s = (per.clone() * tensor1(s.is_static, &device))
        .sum()
        .div_scalar(n_s.max(1.0));
    let l_d = (per * tensor1(s.is_dynamic, &device))
        .sum()
        .div_scalar(n_d.max(1.0));
    let loss = l_s.clone().mul_scalar(wa) + l_d.clone().mul_scalar(wb);
    let grads = GradientsParams::from_grads(loss.backward(), &online);
    let online = optim.step(cfg.learning_rate, online, grads);
    let stats = DdqnStats {
        loss: loss.into_scalar::<f32>() as f64,
        q_mean: q.detach().mean().into_scalar::<f32>() as f64,
        loss_static: (n_s > 0.0).then(|| l_s.into_scalar::<f32>() as f64),
        loss_dynamic: (n_d > 0.0).then(|| l_d.into_scalar::<f32>() as f64),
    };
    (online, stats)
}
