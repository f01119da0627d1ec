//! Proximal policy optimisation: clipped objective, GAE(γ, λ), value loss,
//! entropy bonus, gradient clipping and minibatch epochs, with the hybrid
//! loss L = α·L_static + β·L_dynamic.
//!
//! Two backends compute this loss: [`update`] on any burn device, and
//! the fused learner (`fused.rs`) for plain MLPs on the CPU. Both draw their minibatches
//! with [`Minibatch`] and sum their statistics with [`StatsSum`], so they
//! see the same samples and report the same figures.

use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{activation, Device, Tensor, TensorData};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::hybrid::LossWeights;
use crate::net::{ActorCritic, Head};
use crate::policy::{Pace, Squash};
use crate::rollout::{gae, Rollout};
use crate::tensors::indices;
use serl_env::Source;

pub(crate) mod learner;

/// PPO's settings (`[train.ppo]` in configs). `n_steps` also sets the
/// length of every learner's update ([`crate::TrainConfig::decisions_per_update`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PpoConfig {
    /// Decisions collected per environment per update.
    pub n_steps: usize,
    /// Samples per minibatch.
    pub batch_size: usize,
    /// Passes over the rollout per update.
    pub epochs: usize,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// Discount factor per decision step.
    pub gamma: f64,
    /// GAE's λ.
    pub gae_lambda: f64,
    /// The probability ratio is clipped to [1 − clip, 1 + clip].
    pub clip: f64,
    /// Weight of the value loss in the total.
    pub value_coef: f64,
    /// Weight of the entropy bonus (subtracted from the loss).
    pub entropy_coef: f64,
    /// Largest gradient norm per parameter tensor.
    pub max_grad_norm: f32,
    /// `continuous` (Gaussian) or a list of fractions (categorical).
    pub discrete: Vec<f64>,
    /// How a Gaussian sample becomes a fraction of the order.
    pub squash: Squash,
    /// `absolute` (the action is the share of the order) or
    /// `{ tilt = MAX }` (the action tilts the even pace; see [`Pace`]).
    pub pace: Pace,
    /// Train plain MLPs on the CPU with the fused learner
    /// ([`crate::parts::FusedPpo`]) instead of burn's autodiff; other networks and
    /// devices always use burn.
    pub fused: bool,
}

/// Checked with the rest of `[train]` (`TrainConfig::validate`): its
/// settings are every learner's rollout.
impl crate::tables::Settings for PpoConfig {}

impl Default for PpoConfig {
    fn default() -> Self {
        PpoConfig {
            n_steps: 256,
            batch_size: 256,
            epochs: 10,
            learning_rate: 3e-4,
            gamma: 0.99,
            gae_lambda: 0.95,
            clip: 0.2,
            value_coef: 0.5,
            entropy_coef: 0.0,
            max_grad_norm: 0.5,
            discrete: Vec::new(),
            squash: Squash::Clip,
            pace: Pace::Absolute,
            fused: true,
        }
    }
}

impl PpoConfig {
    /// The policy head these settings need: Gaussian, or categorical over
    /// `discrete`.
    pub fn head(&self) -> Head {
        if self.discrete.is_empty() {
            Head::Gaussian
        } else {
            Head::Categorical(self.discrete.len())
        }
    }
}

/// Means over one update's minibatches (or, while summing, over one
/// minibatch's samples).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct PpoStats {
    /// The minimised loss, α·L_static + β·L_dynamic.
    pub loss: f64,
    /// The clipped surrogate loss, −min(r·A, clip(r)·A).
    pub policy_loss: f64,
    /// Squared error of the value against the return (before
    /// `value_coef`).
    pub value_loss: f64,
    /// The policy's entropy.
    pub entropy: f64,
    /// Estimated KL divergence from the rollout's policy, mean of
    /// (r − 1) − ln r.
    pub approx_kl: f64,
    /// Share of samples whose ratio r left [1 − clip, 1 + clip].
    pub clip_fraction: f64,
    /// Mean total loss of the static samples (`None` when the rollout had
    /// none).
    pub loss_static: Option<f64>,
    /// Mean total loss of the dynamic samples (`None` when the rollout had
    /// none).
    pub loss_dynamic: Option<f64>,
}

/// Adam with ε = 1e-5 and per-tensor gradient-norm clipping.
pub fn optimizer(cfg: &PpoConfig) -> ModuleOptimizer {
    AdamConfig::new()
        .with_epsilon(ADAM_EPSILON as f32)
        .with_grad_clipping(Some(GradientClippingConfig::Norm(cfg.max_grad_norm)))
        .init()
}

pub(crate) const ADAM_EPSILON: f64 = 1e-5;

/// One minibatch of a rollout, gathered into rows. The buffers are reused
/// from one minibatch to the next.
#[derive(Debug, Clone, Default)]
pub(crate) struct Minibatch {
    pub len: usize,
    /// `len × width` observation windows.
    pub x: Vec<f32>,
    /// `len × critic_width` centralised critic rows (MAPPO); empty when
    /// the critic reads `x`.
    pub xc: Vec<f32>,
    pub raw: Vec<f32>,
    pub old_log_prob: Vec<f32>,
    /// Advantages, normalised over the minibatch as in the reference.
    pub adv: Vec<f32>,
    pub ret: Vec<f32>,
    pub is_static: Vec<bool>,
}

impl Minibatch {
    pub fn gather(&mut self, rollout: &Rollout, adv: &[f32], ret: &[f32], rows: &[usize]) {
        let width = rollout.width;
        let n_envs = rollout.n_envs.max(1);
        self.len = rows.len();
        self.x.clear();
        self.xc.clear();
        let cw = rollout.critic_width;
        self.raw.clear();
        self.old_log_prob.clear();
        self.adv.clear();
        self.ret.clear();
        self.is_static.clear();
        for &i in rows {
            self.x
                .extend_from_slice(&rollout.obs[i * width..(i + 1) * width]);
            if cw > 0 {
                self.xc
                    .extend_from_slice(&rollout.critic_obs[i * cw..(i + 1) * cw]);
            }
            self.raw.push(rollout.raw[i]);
            self.old_log_prob.push(rollout.log_prob[i]);
            self.adv.push(adv[i]);
            self.ret.push(ret[i]);
            self.is_static
                .push(rollout.source[i % n_envs] == Source::Static);
        }
        let b = self.len.max(1) as f32;
        let mean = self.adv.iter().sum::<f32>() / b;
        let std = (self.adv.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / b).sqrt() + 1e-8;
        for v in &mut self.adv {
            *v = (*v - mean) / std;
        }
    }

    /// The critic's input rows: the centralised ones, or the actor's.
    pub fn critic_input(&self) -> &[f32] {
        if self.xc.is_empty() {
            &self.x
        } else {
            &self.xc
        }
    }

    /// Static and dynamic samples.
    pub fn counts(&self) -> (f32, f32) {
        let s = self.is_static.iter().filter(|&&s| s).count();
        (s as f32, (self.len - s) as f32)
    }

    /// The weights of the static and the dynamic mean loss: α and β when
    /// both are present, all weight on the one present otherwise.
    pub fn source_weights(&self, weights: LossWeights) -> (f64, f64) {
        match self.counts() {
            (s, d) if s > 0.0 && d > 0.0 => (weights.alpha, weights.beta),
            (s, _) if s > 0.0 => (1.0, 0.0),
            _ => (0.0, 1.0),
        }
    }

    /// Each sample's weight in the total loss: its source's weight over
    /// that source's count, so that L = α·mean(static) + β·mean(dynamic).
    pub fn sample_weights(&self, weights: LossWeights) -> Vec<f32> {
        let (n_s, n_d) = self.counts();
        let (wa, wb) = self.source_weights(weights);
        self.is_static
            .iter()
            .map(|&s| {
                if s {
                    (wa / n_s.max(1.0) as f64) as f32
                } else {
                    (wb / n_d.max(1.0) as f64) as f32
                }
            })
            .collect()
    }
}

/// Sums of per-minibatch figures, turned into [`PpoStats`] at the end.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StatsSum {
    sums: [f64; 6],
    batches: usize,
    static_loss: (f64, usize),
    dynamic_loss: (f64, usize),
}

impl StatsSum {
    /// Adds one minibatch's figures (means over its samples).
    pub fn add(&mut self, m: PpoStats) {
        let v = [
            m.loss,
            m.policy_loss,
            m.value_loss,
            m.entropy,
            m.approx_kl,
            m.clip_fraction,
        ];
        for (s, x) in self.sums.iter_mut().zip(v) {
            *s += x;
        }
        self.batches += 1;
        if let Some(l) = m.loss_static {
            self.static_loss.0 += l;
            self.static_loss.1 += 1;
        }
        if let Some(l) = m.loss_dynamic {
            self.dynamic_loss.0 += l;
            self.dynamic_loss.1 += 1;
        }
    }

    pub fn finish(&self) -> PpoStats {
        let k = self.batches.max(1) as f64;
        let mean = |(s, n): (f64, usize)| (n > 0).then(|| s / n as f64);
        PpoStats {
            loss: self.sums[0] / k,
            policy_loss: self.sums[1] / k,
            value_loss: self.sums[2] / k,
            entropy: self.sums[3] / k,
            approx_kl: self.sums[4] / k,
            clip_fraction: self.sums[5] / k,
            loss_static: mean(self.static_loss),
            loss_dynamic: mean(self.dynamic_loss),
        }
    }
}

/// The shuffled minibatches of every epoch, in the order both learners
/// visit them.
pub(crate) fn minibatch_order(
    total: usize,
    cfg: &PpoConfig,
    rng: &mut SmallRng,
) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..total).collect();
    let mut batches = Vec::new();
    for _ in 0..cfg.epochs {
        order.shuffle(rng);
        batches.extend(order.chunks(cfg.batch_size.max(1)).map(<[usize]>::to_vec));
    }
    batches
}

fn column(v: &[f32], device: &Device) -> Tensor<1> {
    Tensor::from_data(TensorData::new(v.to_vec(), [v.len()]), device)
}

/// The PPO loss of one minibatch as burn tensors.
pub(crate) struct Loss {
    /// α·L_static + β·L_dynamic, the quantity minimised.
    pub total: Tensor<1>,
    pub per_sample_policy: Tensor<1>,
    pub per_sample_value: Tensor<1>,
    pub per_sample_entropy: Tensor<1>,
    pub log_ratio: Tensor<1>,
    pub static_mean: Tensor<1>,
    pub dynamic_mean: Tensor<1>,
}

pub(crate) fn loss(
    model: &ActorCritic,
    cfg: &PpoConfig,
    mb: &Minibatch,
    weights: LossWeights,
) -> Loss {
    let device = model.value_head.weight.val().device();
    let b = mb.len;
    let width = mb.x.len() / b.max(1);
    let ln_2pi = (2.0 * std::f32::consts::PI).ln();
    let xt = Tensor::<2>::from_data(TensorData::new(mb.x.clone(), [b, width]), &device);
    let out = model.policy(xt.clone());
    let (logp, entropy): (Tensor<1>, Tensor<1>) = match cfg.head() {
        Head::Gaussian => {
            let mean = out.reshape([b]);
            let log_std = model.log_std.val();
            let z = (column(&mb.raw, &device) - mean) / log_std.clone().exp();
            let logp = z.powi_scalar(2).mul_scalar(-0.5) - log_std.clone() - ln_2pi * 0.5;
            let ent = (log_std + 0.5 + 0.5 * ln_2pi).expand([b]);
            (logp, ent)
        }
        Head::Categorical(_) => {
            let lp = activation::log_softmax(out, 1);
            let chosen = lp.clone().gather(1, indices(&mb.raw, &device)).reshape([b]);
            let ent = (lp.clone().exp() * lp).sum_dim(1).reshape([b]).neg();
            (chosen, ent)
        }
    };
    let adv = column(&mb.adv, &device);
    let log_ratio = logp - column(&mb.old_log_prob, &device);
    let ratio = log_ratio.clone().exp();
    let s1 = ratio.clone() * adv.clone();
    let s2 = ratio.clamp(1.0 - cfg.clip, 1.0 + cfg.clip) * adv;
    let pl = s1.min_pair(s2).neg();
    let critic_x = if mb.xc.is_empty() {
        xt
    } else {
        let cw = mb.xc.len() / b.max(1);
        Tensor::<2>::from_data(TensorData::new(mb.xc.clone(), [b, cw]), &device)
    };
    let vl = (model.value(critic_x) - column(&mb.ret, &device)).powi_scalar(2);
    let per = pl.clone() + vl.clone().mul_scalar(cfg.value_coef)
        - entropy.clone().mul_scalar(cfg.entropy_coef);
    let (n_s, n_d) = mb.counts();
    let mask = |want: bool| -> Vec<f32> {
        mb.is_static
            .iter()
            .map(|&s| if s == want { 1.0 } else { 0.0 })
            .collect()
    };
    let static_mean = (per.clone() * column(&mask(true), &device))
        .sum()
        .div_scalar(n_s.max(1.0));
    let dynamic_mean = (per * column(&mask(false), &device))
        .sum()
        .div_scalar(n_d.max(1.0));
    let (wa, wb) = mb.source_weights(weights);
    Loss {
        total: static_mean.clone().mul_scalar(wa) + dynamic_mean.clone().mul_scalar(wb),
        per_sample_policy: pl,
        per_sample_value: vl,
        per_sample_entropy: entropy,
        log_ratio,
        static_mean,
        dynamic_mean,
    }
}

/// One PPO update over a rollout. `model` lives on an autodiff device.
pub fn update(
    model: ActorCritic,
    optim: &mut ModuleOptimizer,
    cfg: &PpoConfig,
    rollout: &Rollout,
    weights: LossWeights,
    rng: &mut SmallRng,
) -> (ActorCritic, PpoStats) {
    let (adv, ret) = gae(rollout, cfg.gamma as f32, cfg.gae_lambda as f32);
    let mut model = model;
    let mut mb = Minibatch::default();
    let mut sums = StatsSum::default();
    for rows in minibatch_order(rollout.raw.len(), cfg, rng) {
        mb.gather(rollout, &adv, &ret, &rows);
        let l = loss(&model, cfg, &mb, weights);
        let grads = l.total.backward();
        let grads = GradientsParams::from_grads(grads, &model);
        model = optim.step(cfg.learning_rate, model, grads);

        let scalar = |t: Tensor<1>| t.into_scalar::<f32>() as f64;
        let (n_s, n_d) = mb.counts();
        let lr = l.log_ratio.detach();
        sums.add(PpoStats {
            loss: scalar(l.total),
            policy_loss: scalar(l.per_sample_policy.detach().mean()),
            value_loss: scalar(l.per_sample_value.detach().mean()),
            entropy: scalar(l.per_sample_entropy.detach().mean()),
            approx_kl: scalar(((lr.clone().exp() - 1.0) - lr.clone()).mean()),
            clip_fraction: scalar(
                lr.exp()
                    .sub_scalar(1.0)
                    .abs()
                    .greater_elem(cfg.clip)
                    .float()
                    .mean(),
            ),
            loss_static: (n_s > 0.0).then(|| scalar(l.static_mean)),
            loss_dynamic: (n_d > 0.0).then(|| scalar(l.dynamic_mean)),
        });
    }
    (model, sums.finish())
}
