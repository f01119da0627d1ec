//! Proximal policy optimisation: clipped objective, GAE(γ, λ), value loss,
//! entropy bonus, gradient clipping and minibatch epochs, with the hybrid
//! loss L = α·L_static + β·L_dynamic.

use burn::module::Module;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{activation, Device, Tensor, TensorData};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::hybrid::LossWeights;
use crate::net::{ActorCritic, Head};
use crate::policy::{indices, Squash};
use crate::rollout::{gae, Rollout};
use crate::task::Source;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PpoConfig {
    /// Decisions collected per environment per update.
    pub n_steps: usize,
    pub batch_size: usize,
    pub epochs: usize,
    pub learning_rate: f64,
    pub gamma: f64,
    pub gae_lambda: f64,
    pub clip: f64,
    pub value_coef: f64,
    pub entropy_coef: f64,
    /// Largest gradient norm per parameter tensor.
    pub max_grad_norm: f32,
    /// `continuous` (Gaussian) or a list of fractions (categorical).
    pub discrete: Vec<f64>,
    pub squash: Squash,
}

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
        }
    }
}

impl PpoConfig {
    pub fn head(&self) -> Head {
        if self.discrete.is_empty() {
            Head::Gaussian
        } else {
            Head::Categorical(self.discrete.len())
        }
    }
}

/// Means over one update's minibatches.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct PpoStats {
    pub loss: f64,
    pub policy_loss: f64,
    pub value_loss: f64,
    pub entropy: f64,
    pub approx_kl: f64,
    pub clip_fraction: f64,
    /// Mean total loss of the static and the dynamic samples (`None` when
    /// the rollout had none of that kind).
    pub loss_static: Option<f64>,
    pub loss_dynamic: Option<f64>,
}

pub fn optimizer(cfg: &PpoConfig) -> ModuleOptimizer {
    AdamConfig::new()
        .with_epsilon(1e-5)
        .with_grad_clipping(Some(GradientClippingConfig::Norm(cfg.max_grad_norm)))
        .init()
}

fn column(v: Vec<f32>, device: &Device) -> Tensor<1> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
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
    let device = model.value_head.weight.val().device();
    let (adv, ret) = gae(rollout, cfg.gamma as f32, cfg.gae_lambda as f32);
    let total = rollout.raw.len();
    let width = rollout.width;
    let n_envs = rollout.n_envs.max(1);
    let mut order: Vec<usize> = (0..total).collect();
    let mut model = model;
    let mut sums = [0f64; 6];
    let (mut ls_sum, mut ld_sum, mut ls_n, mut ld_n) = (0f64, 0f64, 0usize, 0usize);
    let mut batches = 0usize;
    let ln_2pi = (2.0 * std::f32::consts::PI).ln();
    for _ in 0..cfg.epochs {
        order.shuffle(rng);
        for chunk in order.chunks(cfg.batch_size.max(1)) {
            let b = chunk.len();
            let mut x = Vec::with_capacity(b * width);
            let (mut raw, mut old, mut a, mut r, mut ms, mut md) = (
                Vec::with_capacity(b),
                Vec::with_capacity(b),
                Vec::with_capacity(b),
                Vec::with_capacity(b),
                Vec::with_capacity(b),
                Vec::with_capacity(b),
            );
            for &i in chunk {
                x.extend_from_slice(&rollout.obs[i * width..(i + 1) * width]);
                raw.push(rollout.raw[i]);
                old.push(rollout.log_prob[i]);
                a.push(adv[i]);
                r.push(ret[i]);
                let stat = rollout.source[i % n_envs] == Source::Static;
                ms.push(if stat { 1.0 } else { 0.0 });
                md.push(if stat { 0.0 } else { 1.0 });
            }
            // Advantages are normalised per minibatch, as in the reference.
            let mean = a.iter().sum::<f32>() / b as f32;
            let std = (a.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / b as f32).sqrt() + 1e-8;
            for v in &mut a {
                *v = (*v - mean) / std;
            }
            let (n_s, n_d) = (ms.iter().sum::<f32>(), md.iter().sum::<f32>());
            let xt = Tensor::<2>::from_data(TensorData::new(x, [b, width]), &device);
            let adv_t = column(a, &device);
            let ret_t = column(r, &device);
            let old_t = column(old, &device);
            let out = model.policy(xt.clone());
            let (logp, entropy): (Tensor<1>, Tensor<1>) = match cfg.head() {
                Head::Gaussian => {
                    let mean = out.reshape([b]);
                    let log_std = model.log_std.val();
                    let z = (column(raw, &device) - mean) / log_std.clone().exp();
                    let logp = z.powi_scalar(2).mul_scalar(-0.5) - log_std.clone() - ln_2pi * 0.5;
                    let ent = (log_std + 0.5 + 0.5 * ln_2pi).expand([b]);
                    (logp, ent)
                }
                Head::Categorical(_) => {
                    let lp = activation::log_softmax(out, 1);
                    let chosen = lp.clone().gather(1, indices(&raw, &device)).reshape([b]);
                    let ent = (lp.clone().exp() * lp).sum_dim(1).reshape([b]).neg();
                    (chosen, ent)
                }
            };
            let log_ratio = logp - old_t;
            let ratio = log_ratio.clone().exp();
            let s1 = ratio.clone() * adv_t.clone();
            let s2 = ratio.clone().clamp(1.0 - cfg.clip, 1.0 + cfg.clip) * adv_t;
            let pl = s1.min_pair(s2).neg();
            let value = model.value(xt);
            let vl = (value - ret_t).powi_scalar(2);
            let per = pl.clone() + vl.clone().mul_scalar(cfg.value_coef)
                - entropy.clone().mul_scalar(cfg.entropy_coef);
            let ms_t = column(ms, &device);
            let md_t = column(md, &device);
            let l_s = (per.clone() * ms_t).sum().div_scalar(n_s.max(1.0));
            let l_d = (per * md_t).sum().div_scalar(n_d.max(1.0));
            let (wa, wb) = match (n_s > 0.0, n_d > 0.0) {
                (true, true) => (weights.alpha, weights.beta),
                (true, false) => (1.0, 0.0),
                (false, _) => (0.0, 1.0),
            };
            let loss = l_s.clone().mul_scalar(wa) + l_d.clone().mul_scalar(wb);
            let grads = loss.backward();
            let grads = GradientsParams::from_grads(grads, &model);
            model = optim.step(cfg.learning_rate, model, grads);

            let ls = l_s.into_scalar::<f32>() as f64;
            let ld = l_d.into_scalar::<f32>() as f64;
            if n_s > 0.0 {
                ls_sum += ls;
                ls_n += 1;
            }
            if n_d > 0.0 {
                ld_sum += ld;
                ld_n += 1;
            }
            let lr = log_ratio.detach();
            let kl = ((lr.clone().exp() - 1.0) - lr.clone())
                .mean()
                .into_scalar::<f32>() as f64;
            let clipped = lr
                .exp()
                .sub_scalar(1.0)
                .abs()
                .greater_elem(cfg.clip)
                .float()
                .mean()
                .into_scalar::<f32>() as f64;
            sums[0] += loss.into_scalar::<f32>() as f64;
            sums[1] += pl.detach().mean().into_scalar::<f32>() as f64;
            sums[2] += vl.detach().mean().into_scalar::<f32>() as f64;
            sums[3] += entropy.detach().mean().into_scalar::<f32>() as f64;
            sums[4] += kl;
            sums[5] += clipped;
            batches += 1;
        }
    }
    let k = batches.max(1) as f64;
    let stats = PpoStats {
        loss: sums[0] / k,
        policy_loss: sums[1] / k,
        value_loss: sums[2] / k,
        entropy: sums[3] / k,
        approx_kl: sums[4] / k,
        clip_fraction: sums[5] / k,
        loss_static: (ls_n > 0).then(|| ls_sum / ls_n as f64),
        loss_dynamic: (ld_n > 0).then(|| ld_sum / ld_n as f64),
    };
    (model, stats)
}

/// The model without gradient tracking, for rollouts.
pub fn inference(model: &ActorCritic) -> ActorCritic {
    model.valid()
}
