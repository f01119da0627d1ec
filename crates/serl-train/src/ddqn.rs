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
use crate::policy::{argmax, floats, indices};
use crate::task::Source;

mod learner;
pub use learner::{DdqnLearner, DdqnUpdateStats};

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
    let b = cfg.batch_size.min(replay.len()).max(1);
    let w = replay.width;
    let k = cfg.actions.len();
    let picks: Vec<usize> = (0..b).map(|_| rng.random_range(0..replay.len())).collect();
    let mut x = Vec::with_capacity(b * w);
    let mut nx = Vec::with_capacity(b * w);
    let (mut act, mut rew, mut not_done, mut ms, mut md) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &i in &picks {
        x.extend_from_slice(&replay.obs[i * w..(i + 1) * w]);
        nx.extend_from_slice(&replay.next_obs[i * w..(i + 1) * w]);
        act.push(replay.action[i]);
        rew.push(replay.reward[i]);
        not_done.push(if replay.done[i] { 0.0 } else { 1.0 });
        let s = replay.source[i] == Source::Static;
        ms.push(if s { 1f32 } else { 0.0 });
        md.push(if s { 0f32 } else { 1.0 });
    }
    // Double DQN target: argmax by the online net, value by the target.
    let nx_inner = Tensor::<2>::from_data(TensorData::new(nx, [b, w]), &inner_device);
    let q_online_next = floats(online.valid().forward(nx_inner.clone()));
    let q_target_next = floats(target.forward(nx_inner));
    let y: Vec<f32> = (0..b)
        .map(|i| {
            let a = argmax(&q_online_next[i * k..(i + 1) * k]);
            rew[i] + cfg.gamma as f32 * not_done[i] * q_target_next[i * k + a]
        })
        .collect();
    let xt = Tensor::<2>::from_data(TensorData::new(x, [b, w]), &device);
    let q = online
        .forward(xt)
        .gather(1, indices(&act, &device))
        .reshape([b]);
    let diff = q.clone() - tensor1(y, &device);
    // Huber loss, δ = 1.
    let abs = diff.clone().abs();
    let quad = abs.clone().clamp_max(1.0);
    let per = quad.clone().powi_scalar(2).mul_scalar(0.5) + (abs - quad);
    let (n_s, n_d) = (ms.iter().sum::<f32>(), md.iter().sum::<f32>());
    let l_s = (per.clone() * tensor1(ms, &device))
        .sum()
        .div_scalar(n_s.max(1.0));
    let l_d = (per * tensor1(md, &device)).sum().div_scalar(n_d.max(1.0));
    let (wa, wb) = match (n_s > 0.0, n_d > 0.0) {
        (true, true) => (weights.alpha, weights.beta),
        (true, false) => (1.0, 0.0),
        (false, _) => (0.0, 1.0),
    };
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
