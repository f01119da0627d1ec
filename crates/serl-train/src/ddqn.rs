//! Double DQN: a replay buffer, a target network refreshed every
//! `target_every` steps, and a linear ε schedule. The paper's value-based
//! baseline; it shares the rollout machinery and the hybrid weighting.

use burn::module::Module;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};

use crate::hybrid::LossWeights;
use crate::net::QNetwork;
use crate::policy::argmax;
use crate::replay::{Replay, ReplaySample};
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

impl crate::tables::Settings for DdqnConfig {
    /// Checks the settings; the error names the field.
    fn check(&self) -> Result<(), crate::TrainError> {
        let bad = |field: &str, message: String| {
            Err(crate::TrainError::Config {
                field: format!("ddqn.{field}"),
                message,
            })
        };
        if !(self.learning_rate > 0.0 && self.learning_rate < 1.0) {
            return bad(
                "learning_rate",
                format!("{} is not in (0, 1)", self.learning_rate),
            );
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return bad("gamma", format!("{} is not in [0, 1]", self.gamma));
        }
        if self.actions.iter().any(|a| !(0.0..=1.0).contains(a)) {
            return bad("actions", "action fractions must be in [0, 1]".into());
        }
        Ok(())
    }
}

pub fn optimizer(cfg: &DdqnConfig) -> ModuleOptimizer {
    AdamConfig::new()
        .with_grad_clipping(Some(GradientClippingConfig::Norm(cfg.max_grad_norm)))
        .init()
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
