//! Soft actor-critic for the continuous share action (Haarnoja et al.,
//! 2018): a tanh-squashed Gaussian actor, twin soft Q networks over the
//! observation and the action, a soft state value V with a slowly
//! following target V̄ (the first paper's form, so that the policy's
//! critic is a real value), and an entropy temperature learned towards a
//! target entropy (the second paper's). Off-policy from a replay buffer,
//! with the hybrid loss L = α·L_static + β·L_dynamic on every term.
//!
//! The actor and V are the policy's actor-critic (`ActorCritic`, a
//! state-independent log standard deviation as PPO's), so a trained SAC
//! policy is saved, loaded and backtested as every other; the twin Q
//! networks, V̄ and the temperature are the learner's, kept in checkpoints.
//! SAC trains on burn's autodiff only: it has no fused backend.

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::nn::{Linear, LinearConfig};
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::SmallRng;
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};
use serl_design::{NetworkSpec, SpecError};

use crate::hybrid::LossWeights;
use crate::net::{joint_critic_spec, ActorCritic, Trunk};
use crate::policy::Pace;
use crate::replay::{Replay, ReplaySample};
use crate::TrainError;

pub(crate) mod learner;

/// The bounds of the actor's log standard deviation.
const LOG_STD: (f32, f32) = (-5.0, 2.0);
#[cfg(test)]
mod tests;

/// SAC's settings (`[train.sac]` in configs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SacConfig {
    /// Capacity of the replay buffer, transitions.
    pub buffer: usize,
    /// Transitions per gradient step.
    pub batch_size: usize,
    /// Adam's learning rate (actor, critics and temperature).
    pub learning_rate: f64,
    /// Discount factor per decision step.
    pub gamma: f64,
    /// How far V̄ moves towards V after each gradient step (Polyak).
    pub tau: f64,
    /// Steps collected before learning starts.
    pub learning_starts: usize,
    /// Gradient steps per vector step (each vector step is N env steps).
    pub gradient_steps: usize,
    /// The entropy temperature at the start; it is then learned.
    pub initial_temperature: f64,
    /// The entropy the temperature steers the policy towards, nats (−1,
    /// minus the action's dimension, as the paper).
    pub target_entropy: f64,
    /// How the squashed action becomes the share traded: the share of the
    /// whole order (absolute) or a bounded tilt of TWAP's pace.
    pub pace: Pace,
    /// Largest gradient norm (per parameter tensor).
    pub max_grad_norm: f32,
}

impl Default for SacConfig {
    fn default() -> Self {
        SacConfig {
            buffer: 50_000,
            batch_size: 128,
            learning_rate: 3e-4,
            gamma: 0.99,
            tau: 0.005,
            learning_starts: 1_000,
            gradient_steps: 1,
            initial_temperature: 0.05,
            target_entropy: -1.0,
            pace: Pace::Absolute,
            max_grad_norm: 10.0,
        }
    }
}

impl crate::tables::Settings for SacConfig {
    /// Checks the settings; the error names the field.
    fn check(&self) -> Result<(), TrainError> {
        let bad = |field: &str, message: String| {
            Err(TrainError::Config {
                field: format!("sac.{field}"),
                message,
            })
        };
        if self.buffer == 0 || self.batch_size == 0 || self.gradient_steps == 0 {
            return bad(
                "buffer",
                "buffer, batch_size and gradient_steps must be at least 1".into(),
            );
        }
        if !(self.learning_rate > 0.0 && self.learning_rate < 1.0) {
            return bad(
                "learning_rate",
                format!("{} is not in (0, 1)", self.learning_rate),
            );
        }
        if !(self.tau > 0.0 && self.tau <= 1.0) {
            return bad("tau", format!("{} is not in (0, 1]", self.tau));
        }
        if !(self.max_grad_norm > 0.0 && self.max_grad_norm.is_finite()) {
            return bad(
                "max_grad_norm",
                format!("{} is not positive", self.max_grad_norm),
            );
        }
        if !self.target_entropy.is_finite() {
            return bad(
                "target_entropy",
                format!("{} is not a number of nats", self.target_entropy),
            );
        }
        if !(0.0..=1.0).contains(&self.gamma) {
            return bad("gamma", format!("{} is not in [0, 1]", self.gamma));
        }
        if !(self.initial_temperature > 0.0 && self.initial_temperature.is_finite()) {
            return bad(
                "initial_temperature",
                format!("{} is not positive", self.initial_temperature),
            );
        }
        if let Pace::Tilt(max) = self.pace {
            if !(max > 0.0 && max <= 1.0) {
                return bad("pace", format!("tilt {max} is not in (0, 1]"));
            }
        }
        Ok(())
    }
}

pub(crate) fn optimizer(cfg: &SacConfig) -> ModuleOptimizer {
    AdamConfig::new()
        .with_grad_clipping(Some(GradientClippingConfig::Norm(cfg.max_grad_norm)))
        .init()
}

/// The twin soft Q networks: each reads one row of the observation window
/// followed by the squashed action in [-1, 1]. Their blocks are the
/// policy's where every block reads any row, else a [64, 64] MLP
/// ([`joint_critic_spec`]), since a GRU's or book attention's columns are
/// an observation window's.
#[derive(Module, Debug)]
pub struct TwinQ {
    q1: Trunk,
    q1_head: Linear,
    q2: Trunk,
    q2_head: Linear,
}

impl TwinQ {
    /// Both networks for windows of `width` columns under `spec`.
    pub fn new(spec: &NetworkSpec, width: usize, device: &Device) -> Result<Self, SpecError> {
        let spec = joint_critic_spec(spec);
        let (q1, w1) = Trunk::new(&spec, width + 1, device)?;
        let (q2, w2) = Trunk::new(&spec, width + 1, device)?;
        Ok(TwinQ {
            q1,
            q1_head: LinearConfig::new(w1, 1).init(device),
            q2,
            q2_head: LinearConfig::new(w2, 1).init(device),
        })
    }

    /// Both Q values (`[batch]` each) of the rows `x` (`[batch, width]`)
    /// and actions `a` (`[batch]`).
    pub fn forward(&self, x: Tensor<2>, a: Tensor<1>) -> (Tensor<1>, Tensor<1>) {
        let b = a.dims()[0];
        let xa = Tensor::cat(vec![x, a.reshape([b, 1])], 1);
        let q1 = self
            .q1_head
            .forward(self.q1.forward(xa.clone()))
            .reshape([b]);
        let q2 = self.q2_head.forward(self.q2.forward(xa)).reshape([b]);
        (q1, q2)
    }
}

/// What one SAC gradient step reports.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct SacStats {
    /// The critics' loss (the twin Qs' and V's), α·L_static +
    /// β·L_dynamic.
    pub loss: f64,
    /// Its static samples' mean (`None` without any): what moves α.
    pub loss_static: Option<f64>,
    /// Its dynamic samples' mean (`None` without any): what moves β.
    pub loss_dynamic: Option<f64>,
    /// The actor's loss, E[τ·log π − min Q].
    pub policy_loss: f64,
    /// V's squared error against its soft target.
    pub value_loss: f64,
    /// The policy's entropy estimate, −E[log π].
    pub entropy: f64,
}

/// The entropy temperature, learned in log space with Adam (its own tiny
/// optimiser: one number).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Temperature {
    log: f64,
    m: f64,
    v: f64,
    t: u32,
}

impl Temperature {
    /// A temperature of `value`.
    pub fn new(value: f64) -> Self {
        Temperature {
            log: value.ln(),
            m: 0.0,
            v: 0.0,
            t: 0,
        }
    }

    /// The temperature now.
    pub fn value(&self) -> f64 {
        self.log.exp()
    }

    /// One Adam step on J(log τ) = −log τ · (E[log π] + target), whose
    /// gradient raises τ while the entropy is under target.
    fn step(&mut self, mean_log_prob: f64, target_entropy: f64, lr: f64) {
        let grad = -(mean_log_prob + target_entropy);
        self.t += 1;
        self.m = 0.9 * self.m + 0.1 * grad;
        self.v = 0.999 * self.v + 0.001 * grad * grad;
        let m = self.m / (1.0 - 0.9f64.powi(self.t as i32));
        let v = self.v / (1.0 - 0.999f64.powi(self.t as i32));
        self.log = (self.log - lr * m / (v.sqrt() + 1e-8)).clamp(-20.0, 5.0);
    }
}

pub(crate) fn column(v: &[f32], device: &Device) -> Tensor<1> {
    Tensor::from_data(TensorData::new(v.to_vec(), [v.len()]), device)
}

pub(crate) fn rows(v: &[f32], b: usize, device: &Device) -> Tensor<2> {
    Tensor::from_data(TensorData::new(v.to_vec(), [b, v.len() / b.max(1)]), device)
}

/// The reparameterised sample of the actor for rows `x`: the squashed
/// actions (`[batch]`, in (-1, 1)) and their log-densities, with the
/// noise `eps` drawn outside so that the graph is a function of it.
pub(crate) fn squashed_sample(
    model: &ActorCritic,
    x: Tensor<2>,
    eps: Tensor<1>,
) -> (Tensor<1>, Tensor<1>) {
    let b = eps.dims()[0];
    let ln_2pi = (2.0 * std::f32::consts::PI).ln();
    let mean = model.policy(x).reshape([b]);
    let log_std = model.log_std.val().clamp(LOG_STD.0, LOG_STD.1).expand([b]);
    let u = mean + log_std.clone().exp() * eps.clone();
    let a = u.tanh();
    // log N(u) − log(1 − tanh²u): the change of variables of the squash.
    let log_prob = eps.powi_scalar(2).mul_scalar(-0.5)
        - log_std
        - ln_2pi * 0.5
        - (a.clone().powi_scalar(2).neg().add_scalar(1.0 + 1e-6)).log();
    (a, log_prob)
}

/// The three losses of one minibatch as burn tensors (per sample), before
/// the hybrid weighting.
pub(crate) struct Losses {
    /// Twin Q regression to r + γ·V̄(s').
    pub q: Tensor<1>,
    /// τ·log π − min Q at the actor's own action.
    pub actor: Tensor<1>,
    /// V regression to min Q − τ·log π (its target detached).
    pub value: Tensor<1>,
    /// log π of the actor's actions (detached).
    pub log_prob: Tensor<1>,
}

/// The regression targets of a minibatch: the twin Qs' r + γ·V̄(s'), and
/// V's min Q − τ·log π at the actor's own action (computed from the same
/// forward pass, detached, when not given).
pub(crate) struct Targets<'a> {
    pub q: &'a [f32],
    pub v: Option<&'a [f32]>,
}

/// The per-sample losses of `s` with noise `eps`; Q and the actor-critic
/// live on the autodiff device.
pub(crate) fn losses(
    model: &ActorCritic,
    twin: &TwinQ,
    s: &ReplaySample,
    targets: Targets,
    eps: &[f32],
    temperature: f64,
) -> Losses {
    let device = model.value_head.weight.val().device();
    let b = s.rows;
    let x = rows(&s.obs, b, &device);
    let (q1, q2) = twin.forward(x.clone(), column(&s.action, &device));
    let y = column(targets.q, &device);
    let q = ((q1 - y.clone()).powi_scalar(2) + (q2 - y).powi_scalar(2)).mul_scalar(0.5);
    let (a, log_prob) = squashed_sample(model, x.clone(), column(eps, &device));
    let (p1, p2) = twin.clone().no_grad().forward(x.clone(), a);
    let q_pi = p1.min_pair(p2);
    let actor = log_prob.clone().mul_scalar(temperature) - q_pi.clone();
    let v_target = match targets.v {
        Some(v) => column(v, &device),
        None => (q_pi - log_prob.clone().mul_scalar(temperature)).detach(),
    };
    let value = (model.value(x) - v_target).powi_scalar(2).mul_scalar(0.5);
    Losses {
        q,
        actor,
        value,
        log_prob: log_prob.detach(),
    }
}

/// The hybrid weighting of per-sample losses: α times the static rows'
/// mean plus β times the dynamic rows' (all on the one present), with the
/// two means.
fn hybrid(
    per: Tensor<1>,
    s: &ReplaySample,
    weights: LossWeights,
) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
    let device = per.device();
    let (n_s, n_d, wa, wb) = s.source_weights(weights);
    let l_s = (per.clone() * column(&s.is_static, &device))
        .sum()
        .div_scalar(n_s.max(1.0));
    let l_d = (per * column(&s.is_dynamic, &device))
        .sum()
        .div_scalar(n_d.max(1.0));
    (
        l_s.clone().mul_scalar(wa) + l_d.clone().mul_scalar(wb),
        l_s,
        l_d,
    )
}

/// Everything one gradient step changes.
pub(crate) struct SacState<'a> {
    pub model: ActorCritic,
    pub twin: TwinQ,
    pub target: &'a mut ActorCritic,
    pub model_optim: &'a mut ModuleOptimizer,
    pub twin_optim: &'a mut ModuleOptimizer,
    pub temperature: &'a mut Temperature,
}

/// One gradient step on a minibatch of `replay`: the twin Qs towards
/// r + γ·V̄(s'), the actor and V on the same rows, the temperature towards
/// the target entropy, and V̄ a `tau` step towards V. Returns the new
/// networks.
pub(crate) fn train_step(
    st: SacState,
    cfg: &SacConfig,
    replay: &Replay,
    weights: LossWeights,
    rng: &mut SmallRng,
) -> (ActorCritic, TwinQ, SacStats) {
    let s = replay.sample(cfg.batch_size, rng);
    let b = s.rows;
    let inner = st.target.value_head.weight.val().device();
    let v_next = crate::tensors::floats1(st.target.value(rows(&s.next_obs, b, &inner)));
    let y = s.targets_from_values(&v_next, cfg.gamma);
    let eps: Vec<f32> = (0..b)
        .map(|_| StandardNormal.sample(rng))
        .collect::<Vec<f64>>()
        .into_iter()
        .map(|z| z as f32)
        .collect();
    let tau = st.temperature.value();
    let targets = Targets { q: &y, v: None };
    let l = losses(&st.model, &st.twin, &s, targets, &eps, tau);
    let scalar = |t: Tensor<1>| t.into_scalar::<f32>() as f64;
    let (critics, critics_static, critics_dynamic) =
        hybrid(l.q.clone().detach() + l.value.clone().detach(), &s, weights);
    let (q_loss, _, _) = hybrid(l.q, &s, weights);
    let (actor_value, _, _) = hybrid(l.actor.clone() + l.value.clone(), &s, weights);
    // One backward pass: the Q loss reaches only the twins' weights; the
    // actor's loss reads the twins through a copy without gradients, so it
    // moves the actor through the action and leaves the twins alone.
    let mut grads = (q_loss.clone() + actor_value).backward();
    let twin_grads = GradientsParams::from_module(&mut grads, &st.twin);
    let model_grads = GradientsParams::from_module(&mut grads, &st.model);
    let twin = st.twin_optim.step(cfg.learning_rate, st.twin, twin_grads);
    let mut model = st
        .model_optim
        .step(cfg.learning_rate, st.model, model_grads);
    // Held where the loss reads it: past a bound the clamp passes no
    // gradient back, and sampling (`policy.rs`) reads the parameter itself.
    // A fresh leaf: the clamp must not join the next step's graph.
    model.log_std = model
        .log_std
        .map(|t| t.clamp(LOG_STD.0, LOG_STD.1).detach().require_grad());
    let mean_log_prob = scalar(l.log_prob.mean());
    st.temperature
        .step(mean_log_prob, cfg.target_entropy, cfg.learning_rate);
    polyak(st.target, &model, cfg.tau);
    let (n_s, n_d, _, _) = s.source_weights(weights);
    let stats = SacStats {
        loss: scalar(critics),
        loss_static: (n_s > 0.0).then(|| scalar(critics_static)),
        loss_dynamic: (n_d > 0.0).then(|| scalar(critics_dynamic)),
        policy_loss: scalar(l.actor.detach().mean()),
        value_loss: scalar(l.value.detach().mean()),
        entropy: -mean_log_prob,
    };
    (model, twin, stats)
}

/// Every float parameter's values, in the module's visiting order.
struct Gather(Vec<Vec<f32>>);

impl ModuleVisitor for Gather {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let values = param
            .val()
            .into_data()
            .try_to_vec::<f32>()
            .unwrap_or_default();
        self.0.push(values);
    }
}

/// Moves each float parameter a `tau` step towards the gathered values of
/// a module of the same structure.
struct Blend {
    towards: Vec<Vec<f32>>,
    next: usize,
    tau: f32,
}

impl ModuleMapper for Blend {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let towards = &self.towards[self.next];
        self.next += 1;
        let tau = self.tau;
        param.map(|t| {
            let shape = t.shape();
            let device = t.device();
            let mut values = t.into_data().try_to_vec::<f32>().unwrap_or_default();
            for (v, o) in values.iter_mut().zip(towards) {
                *v += tau * (o - *v);
            }
            Tensor::from_data(TensorData::new(values, shape), &device)
        })
    }
}

/// target ← τ·online + (1 − τ)·target, parameter by parameter.
pub(crate) fn polyak(target: &mut ActorCritic, online: &ActorCritic, tau: f64) {
    let mut gather = Gather(Vec::new());
    online.visit(&mut gather);
    let mut blend = Blend {
        towards: gather.0,
        next: 0,
        tau: tau as f32,
    };
    *target = target.clone().map(&mut blend);
}
