//! The fused PPO learner: plain MLPs trained on the CPU without autodiff.
//!
//! Most designs, and every reference setup (Stable-Baselines3's MlpPolicy
//! [64, 64]), are MLPs. On a minibatch of 256 rows, burn's autodiff spends
//! most of its time on per-operation bookkeeping rather than arithmetic.
//! For an MLP, forward, backward and Adam are a handful of matrix products
//! per layer, so this module does them directly with the `gemm` crate,
//! the actor on one core and the critic on the other (they share no
//! parameters, and the loss separates into a policy and a value part).
//!
//! [`FusedPpo`] computes exactly the loss of [`crate::ppo::loss`] (a test
//! compares its gradients with burn's) and applies burn's Adam and
//! per-tensor gradient clipping. After every update its weights are
//! written back into the burn [`ActorCritic`], so saving, validation and
//! backtests do not know which learner ran. A network with a layer norm,
//! residual, GRU, attention or GELU block uses burn.

use burn::nn::Linear;
use burn::tensor::{Tensor, TensorData};
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};

use crate::hybrid::LossWeights;
use crate::net::{ActorCritic, Block, Head};
use crate::policy::{floats, floats1, sample_actor_critic, PolicyMeta, Sampled};
use crate::ppo::{minibatch_order, Minibatch, PpoConfig, PpoStats, StatsSum};
use crate::rollout::{gae, Actor, Rollout};
use serl_design::{Activation, BlockSpec, NetworkSpec};

/// `c = a·b` for row-major matrices, `a` being `m × k` (stored `k × m`
/// when `ta`) and `b` being `k × n` (stored `n × k` when `tb`).
#[allow(clippy::too_many_arguments)]
fn gemm(m: usize, k: usize, n: usize, a: &[f32], ta: bool, b: &[f32], tb: bool, c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    // (row stride, column stride) of each operand.
    let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
    let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
    // SAFETY: the assertion above keeps every index the strides reach
    // inside the three slices, and `c` does not alias `a` or `b`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            csa,
            rsa,
            b.as_ptr(),
            csb,
            rsb,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Layer {
    fan_in: usize,
    fan_out: usize,
    activation: Activation,
}

/// An MLP as flat tensors: layer `l` owns `params[2l]` (weights,
/// `fan_in × fan_out`) and `params[2l + 1]` (bias). The actor's last
/// tensor is its log standard deviation when the head is Gaussian.
#[derive(Debug, Clone)]
struct Mlp {
    layers: Vec<Layer>,
    params: Vec<Vec<f32>>,
}

/// Per-layer outputs of one forward pass, kept for the backward pass.
#[derive(Debug, Clone, Default)]
struct Activations {
    outputs: Vec<Vec<f32>>,
    delta: Vec<f32>,
    delta_prev: Vec<f32>,
}

/// Whether the fused learner trains a network of this spec: dense blocks
/// only, none with GELU (whose derivative it does not implement). The one
/// test of which learner trains ([`crate::TrainConfig::trains_fused`]).
pub fn implements(spec: &NetworkSpec) -> bool {
    spec.blocks.iter().all(
        |b| matches!(b, BlockSpec::Dense { activation, .. } if *activation != Activation::Gelu),
    )
}

impl Mlp {
    /// The trunk's dense blocks and the head, or `None` when the trunk
    /// has a block this learner does not implement.
    /// The MLP of a burn trunk and head, or `None` for a network this
    /// learner does not implement (see [`implements`]).
    fn from_burn(trunk: &crate::net::Trunk, head: &Linear) -> Option<Self> {
        let mut mlp = Mlp {
            layers: Vec::new(),
            params: Vec::new(),
        };
        for block in trunk.blocks() {
            let Block::Dense(d) = block else { return None };
            if d.activation == Activation::Gelu {
                return None;
            }
            mlp.push(d.linear(), d.activation)?;
        }
        mlp.push(head, Activation::Identity)?;
        Some(mlp)
    }

    fn push(&mut self, linear: &Linear, activation: Activation) -> Option<()> {
        let [fan_in, fan_out] = linear.weight.val().dims();
        self.params.push(floats(linear.weight.val()));
        self.params.push(floats1(linear.bias.as_ref()?.val()));
        self.layers.push(Layer {
            fan_in,
            fan_out,
            activation,
        });
        Some(())
    }

    fn out_width(&self) -> usize {
        self.layers.last().map_or(0, |l| l.fan_out)
    }

    fn forward(&self, x: &[f32], n: usize, acts: &mut Activations) {
        acts.outputs.resize(self.layers.len(), Vec::new());
        for (l, layer) in self.layers.iter().enumerate() {
            let (before, rest) = acts.outputs.split_at_mut(l);
            let input = if l == 0 { x } else { &before[l - 1] };
            let out = &mut rest[0];
            out.resize(n * layer.fan_out, 0.0);
            gemm(
                n,
                layer.fan_in,
                layer.fan_out,
                input,
                false,
                &self.params[2 * l],
                false,
                out,
            );
            bias_and_activation(out, &self.params[2 * l + 1], layer.activation);
        }
    }

    /// Gradients of every layer given `acts.delta`, the loss's gradient
    /// with respect to the last layer's output (consumed).
    fn backward(&self, x: &[f32], n: usize, acts: &mut Activations, grads: &mut [Vec<f32>]) {
        for (l, layer) in self.layers.iter().enumerate().rev() {
            let output = &acts.outputs[l];
            let pairs = acts.delta.iter_mut().zip(output);
            match layer.activation {
                Activation::Tanh => pairs.for_each(|(d, &h)| *d *= 1.0 - h * h),
                Activation::Relu => pairs.for_each(|(d, &h)| {
                    if h <= 0.0 {
                        *d = 0.0
                    }
                }),
                Activation::Sigmoid => pairs.for_each(|(d, &h)| *d *= h * (1.0 - h)),
                Activation::Identity | Activation::Gelu => {}
            }
            let input = if l == 0 { x } else { &acts.outputs[l - 1] };
            gemm(
                layer.fan_in,
                n,
                layer.fan_out,
                input,
                true,
                &acts.delta,
                false,
                &mut grads[2 * l],
            );
            let db = &mut grads[2 * l + 1];
            db.fill(0.0);
            for row in acts.delta.chunks(layer.fan_out) {
                for (g, d) in db.iter_mut().zip(row) {
                    *g += d;
                }
            }
            if l > 0 {
                acts.delta_prev.resize(n * layer.fan_in, 0.0);
                gemm(
                    n,
                    layer.fan_out,
                    layer.fan_in,
                    &acts.delta,
                    false,
                    &self.params[2 * l],
                    true,
                    &mut acts.delta_prev,
                );
                std::mem::swap(&mut acts.delta, &mut acts.delta_prev);
            }
        }
    }

    /// Writes the weights into the burn layers they came from. `map` keeps
    /// each parameter's id.
    fn write_into(&self, trunk: &mut crate::net::Trunk, head: &mut Linear) {
        let mut linears: Vec<&mut Linear> = trunk
            .blocks_mut()
            .iter_mut()
            .filter_map(|b| match b {
                Block::Dense(d) => Some(d.linear_mut()),
                _ => None,
            })
            .collect();
        linears.push(head);
        for ((linear, layer), l) in linears.into_iter().zip(&self.layers).zip(0..) {
            let device = linear.weight.val().device();
            let w = self.params[2 * l].clone();
            let dims = [layer.fan_in, layer.fan_out];
            linear.weight = linear
                .weight
                .clone()
                .map(|_| Tensor::from_data(TensorData::new(w, dims), &device));
            if let Some(bias) = linear.bias.take() {
                let b = self.params[2 * l + 1].clone();
                let len = b.len();
                linear.bias =
                    Some(bias.map(|_| Tensor::from_data(TensorData::new(b, [len]), &device)));
            }
        }
    }
}

/// `out[r][c] = activation(out[r][c] + bias[c])`, compiled for AVX2 when
/// the CPU has it: the activation is a chain of dependent multiplies, so
/// wider vectors are most of its speed.
fn bias_and_activation(out: &mut [f32], bias: &[f32], activation: Activation) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has the feature the function is compiled for.
        return unsafe { bias_and_activation_avx2(out, bias, activation) };
    }
    bias_and_activation_portable(out, bias, activation)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn bias_and_activation_avx2(out: &mut [f32], bias: &[f32], activation: Activation) {
    bias_and_activation_portable(out, bias, activation)
}

#[inline(always)]
fn bias_and_activation_portable(out: &mut [f32], bias: &[f32], activation: Activation) {
    // One loop per activation, so that each vectorises.
    match activation {
        Activation::Tanh => add_bias_then(out, bias, tanh),
        Activation::Relu => add_bias_then(out, bias, |z| z.max(0.0)),
        Activation::Sigmoid => add_bias_then(out, bias, |z| 1.0 / (1.0 + (-z).exp())),
        Activation::Identity | Activation::Gelu => add_bias_then(out, bias, |z| z),
    }
}

#[inline(always)]
fn add_bias_then(out: &mut [f32], bias: &[f32], activation: impl Fn(f32) -> f32) {
    for row in out.chunks_exact_mut(bias.len()) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v = activation(*v + b);
        }
    }
}

/// tanh as a rational function (Eigen's float approximation, within a few
/// ulp of `f32::tanh`). libm's `tanhf` is a call per element and was a
/// third of the fused learner's time; this one vectorises with the loop.
#[inline(always)]
#[allow(clippy::excessive_precision)] // the published coefficients
fn tanh(x: f32) -> f32 {
    // Beyond ±7.905 the result rounds to ±1.
    let x = x.clamp(-7.905_311, 7.905_311);
    let x2 = x * x;
    let mut p = -2.760_768_5e-16_f32;
    p = p * x2 + 2.000_187_9e-13;
    p = p * x2 - 8.604_671_5e-11;
    p = p * x2 + 5.122_297e-8;
    p = p * x2 + 1.485_722_4e-5;
    p = p * x2 + 6.372_619_3e-4;
    p = p * x2 + 4.893_524_6e-3;
    let mut q = 1.198_258_4e-6_f32;
    q = q * x2 + 1.185_347e-4;
    q = q * x2 + 2.268_434_6e-3;
    q = q * x2 + 4.893_525e-3;
    x * p / q
}

/// A zero tensor of each tensor's size.
fn zeros_like(tensors: &[Vec<f32>]) -> Vec<Vec<f32>> {
    tensors.iter().map(|t| vec![0.0; t.len()]).collect()
}

/// Adam's moments for every tensor of one network, as burn keeps them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdamState {
    /// Steps taken (Adam's t, for the bias corrections).
    pub time: i32,
    /// First moment (mean of gradients), one vector per tensor.
    pub moment_1: Vec<Vec<f32>>,
    /// Second moment (mean of squared gradients), one vector per tensor.
    pub moment_2: Vec<Vec<f32>>,
}

const BETA_1: f32 = 0.9;
const BETA_2: f32 = 0.999;

impl AdamState {
    fn new(params: &[Vec<f32>]) -> Self {
        AdamState {
            time: 0,
            moment_1: zeros_like(params),
            moment_2: zeros_like(params),
        }
    }

    fn fits(&self, params: &[Vec<f32>]) -> bool {
        let same = |m: &[Vec<f32>]| {
            m.len() == params.len() && m.iter().zip(params).all(|(a, b)| a.len() == b.len())
        };
        same(&self.moment_1) && same(&self.moment_2)
    }

    /// Clips each tensor's gradient to `max_norm` and takes one Adam step.
    fn step(&mut self, params: &mut [Vec<f32>], grads: &mut [Vec<f32>], lr: f32, max_norm: f32) {
        self.time += 1;
        let correction_2 = (1.0 - BETA_2.powi(self.time)).sqrt();
        let factor = correction_2 / (1.0 - BETA_1.powi(self.time));
        let eps = crate::ppo::ADAM_EPSILON as f32 * correction_2;
        for (((p, g), m1), m2) in params
            .iter_mut()
            .zip(grads.iter_mut())
            .zip(&mut self.moment_1)
            .zip(&mut self.moment_2)
        {
            let norm = g.iter().map(|v| v * v).sum::<f32>().sqrt();
            let clip = (max_norm / (norm + f32::MIN_POSITIVE)).min(1.0);
            for (((w, g), m1), m2) in p
                .iter_mut()
                .zip(g.iter())
                .zip(m1.iter_mut())
                .zip(m2.iter_mut())
            {
                let g = g * clip;
                *m1 = BETA_1 * *m1 + (1.0 - BETA_1) * g;
                *m2 = BETA_2 * *m2 + (1.0 - BETA_2) * g * g;
                *w -= lr * *m1 * factor / (m2.sqrt() + eps);
            }
        }
    }
}

/// The optimiser state of both networks, saved in a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FusedOptimizer {
    /// The actor's (with the log standard deviation of a Gaussian head).
    pub actor: AdamState,
    /// The critic's.
    pub critic: AdamState,
}

/// A PPO actor-critic with plain MLP trunks, trained without autodiff.
#[derive(Debug, Clone)]
pub struct FusedPpo {
    actor: Mlp,
    critic: Mlp,
    /// Index of the log standard deviation in the actor's tensors.
    log_std: Option<usize>,
    head: Head,
    meta: PolicyMeta,
    optim: FusedOptimizer,
}

/// One network's gradients (a tensor per parameter) and figures.
type Half = (Vec<Vec<f32>>, HalfStats);

/// What one network's half of a minibatch reports.
#[derive(Debug, Clone, Copy, Default)]
struct HalfStats {
    /// Σ over samples, by source, of this half's loss terms.
    static_sum: f64,
    dynamic_sum: f64,
    /// Means over the minibatch.
    policy_loss: f64,
    entropy: f64,
    approx_kl: f64,
    clip_fraction: f64,
    value_loss: f64,
}

impl FusedPpo {
    /// The fused twin of `model`, or `None` when its network has a block
    /// this learner does not implement.
    pub fn new(model: &ActorCritic, meta: &PolicyMeta) -> Option<Self> {
        let mut actor = Mlp::from_burn(&model.actor, &model.policy_head)?;
        let critic = Mlp::from_burn(&model.critic, &model.value_head)?;
        let log_std = (meta.head == Head::Gaussian).then(|| {
            actor.params.push(floats1(model.log_std.val()));
            actor.params.len() - 1
        });
        let optim = FusedOptimizer {
            actor: AdamState::new(&actor.params),
            critic: AdamState::new(&critic.params),
        };
        Some(FusedPpo {
            actor,
            critic,
            log_std,
            head: meta.head,
            meta: meta.clone(),
            optim,
        })
    }

    /// The optimiser state, to save with a checkpoint.
    pub fn optimizer(&self) -> &FusedOptimizer {
        &self.optim
    }

    /// Restores a saved optimiser state; `false` (and nothing changed)
    /// when it belongs to a network of another shape.
    pub fn restore_optimizer(&mut self, optim: FusedOptimizer) -> bool {
        let fits = optim.actor.fits(&self.actor.params) && optim.critic.fits(&self.critic.params);
        if fits {
            self.optim = optim;
        }
        fits
    }

    /// Writes the current weights into the burn model.
    pub fn write_into(&self, model: &mut ActorCritic) {
        self.actor
            .write_into(&mut model.actor, &mut model.policy_head);
        self.critic
            .write_into(&mut model.critic, &mut model.value_head);
        if let Some(i) = self.log_std {
            let device = model.log_std.val().device();
            let v = self.actor.params[i].clone();
            model.log_std = model
                .log_std
                .clone()
                .map(|_| Tensor::from_data(TensorData::new(v, [1]), &device));
        }
    }

    fn log_std_value(&self) -> f32 {
        self.log_std.map_or(0.0, |i| self.actor.params[i][0])
    }

    /// The gradients of the minibatch's loss for the actor's and the
    /// critic's tensors, with each half's figures.
    fn gradients(
        &self,
        cfg: &PpoConfig,
        mb: &Minibatch,
        weights: &[f32],
        work: &mut Workspace,
    ) -> (Half, Half) {
        let Workspace { actor, critic } = work;
        let (a, c) = rayon::join(
            || self.actor_half(cfg, mb, weights, actor),
            || self.critic_half(cfg, mb, weights, critic),
        );
        (a, c)
    }

    fn actor_half(
        &self,
        cfg: &PpoConfig,
        mb: &Minibatch,
        weights: &[f32],
        acts: &mut Activations,
    ) -> Half {
        let n = mb.len;
        let mut grads = zeros_like(&self.actor.params);
        self.actor.forward(&mb.x, n, acts);
        let out = &acts.outputs[self.actor.layers.len() - 1];
        let k = self.actor.out_width();
        let clip = cfg.clip as f32;
        let (entropy_coef, ln_2pi) = (cfg.entropy_coef as f32, (2.0 * std::f32::consts::PI).ln());
        let mut s = HalfStats::default();
        let mut d_log_std = 0f32;
        let log_std = self.log_std_value();
        let sigma = log_std.exp();
        acts.delta.clear();
        acts.delta.resize(n * k, 0.0);
        for i in 0..n {
            let row = &out[i * k..(i + 1) * k];
            // `shape` is the standardised sample z (Gaussian) or log Σ exp
            // of the logits (categorical): the gradient below needs it too.
            let (logp, entropy, shape) = match self.head {
                Head::Gaussian => {
                    let z = (mb.raw[i] - row[0]) / sigma;
                    let logp = -0.5 * z * z - log_std - 0.5 * ln_2pi;
                    (logp, log_std + 0.5 + 0.5 * ln_2pi, z)
                }
                Head::Categorical(_) => {
                    let (lse, ent) = log_sum_exp_and_entropy(row);
                    (row[mb.raw[i] as usize] - lse, ent, lse)
                }
            };
            let log_ratio = logp - mb.old_log_prob[i];
            let ratio = log_ratio.exp();
            let adv = mb.adv[i];
            let s1 = ratio * adv;
            let s2 = ratio.clamp(1.0 - clip, 1.0 + clip) * adv;
            let policy_loss = -s1.min(s2);
            // d(policy loss)/d(log π): the clipped branch has no gradient.
            let g = weights[i] * if s1 <= s2 { -adv * ratio } else { 0.0 };
            let w_ent = weights[i] * entropy_coef;
            let d = &mut acts.delta[i * k..(i + 1) * k];
            match self.head {
                Head::Gaussian => {
                    let z = shape;
                    d[0] = g * z / sigma;
                    d_log_std += g * (z * z - 1.0) - w_ent;
                }
                Head::Categorical(_) => {
                    let lse = shape;
                    let a = mb.raw[i] as usize;
                    for (j, dj) in d.iter_mut().enumerate() {
                        let lp = row[j] - lse;
                        let p = lp.exp();
                        let chosen = if j == a { 1.0 } else { 0.0 };
                        *dj = g * (chosen - p) + w_ent * p * (lp + entropy);
                    }
                }
            }
            let term = (policy_loss - entropy_coef * entropy) as f64;
            if mb.is_static[i] {
                s.static_sum += term;
            } else {
                s.dynamic_sum += term;
            }
            s.policy_loss += policy_loss as f64;
            s.entropy += entropy as f64;
            s.approx_kl += ((ratio - 1.0) - log_ratio) as f64;
            if (ratio - 1.0).abs() > clip {
                s.clip_fraction += 1.0;
            }
        }
        let nf = n.max(1) as f64;
        s.policy_loss /= nf;
        s.entropy /= nf;
        s.approx_kl /= nf;
        s.clip_fraction /= nf;
        self.actor.backward(&mb.x, n, acts, &mut grads);
        if let Some(i) = self.log_std {
            grads[i][0] = d_log_std;
        }
        (grads, s)
    }

    fn critic_half(
        &self,
        cfg: &PpoConfig,
        mb: &Minibatch,
        weights: &[f32],
        acts: &mut Activations,
    ) -> Half {
        let n = mb.len;
        let mut grads = zeros_like(&self.critic.params);
        self.critic.forward(&mb.x, n, acts);
        let values = &acts.outputs[self.critic.layers.len() - 1];
        let vcoef = cfg.value_coef as f32;
        let mut s = HalfStats::default();
        acts.delta.clear();
        acts.delta.resize(n, 0.0);
        for i in 0..n {
            let err = values[i] - mb.ret[i];
            acts.delta[i] = weights[i] * vcoef * 2.0 * err;
            let term = (vcoef * err * err) as f64;
            if mb.is_static[i] {
                s.static_sum += term;
            } else {
                s.dynamic_sum += term;
            }
            s.value_loss += (err * err) as f64;
        }
        s.value_loss /= n.max(1) as f64;
        self.critic.backward(&mb.x, n, acts, &mut grads);
        (grads, s)
    }

    /// One PPO update over a rollout: the same minibatches, loss and
    /// optimiser as [`crate::ppo::update`].
    pub fn update(
        &mut self,
        cfg: &PpoConfig,
        rollout: &Rollout,
        weights: LossWeights,
        rng: &mut SmallRng,
    ) -> PpoStats {
        let (adv, ret) = gae(rollout, cfg.gamma as f32, cfg.gae_lambda as f32);
        let mut mb = Minibatch::default();
        let mut sums = StatsSum::default();
        let mut work = Workspace::default();
        let lr = cfg.learning_rate as f32;
        for rows in minibatch_order(rollout.raw.len(), cfg, rng) {
            mb.gather(rollout, &adv, &ret, &rows);
            let sample_weights = mb.sample_weights(weights);
            let ((mut ga, a), (mut gc, c)) = self.gradients(cfg, &mb, &sample_weights, &mut work);
            let FusedPpo {
                actor,
                critic,
                optim,
                ..
            } = self;
            rayon::join(
                || {
                    optim
                        .actor
                        .step(&mut actor.params, &mut ga, lr, cfg.max_grad_norm)
                },
                || {
                    optim
                        .critic
                        .step(&mut critic.params, &mut gc, lr, cfg.max_grad_norm)
                },
            );
            let (n_s, n_d) = mb.counts();
            let (wa, wb) = mb.source_weights(weights);
            let static_mean = (a.static_sum + c.static_sum) / n_s.max(1.0) as f64;
            let dynamic_mean = (a.dynamic_sum + c.dynamic_sum) / n_d.max(1.0) as f64;
            sums.add(PpoStats {
                loss: wa * static_mean + wb * dynamic_mean,
                policy_loss: a.policy_loss,
                value_loss: c.value_loss,
                entropy: a.entropy,
                approx_kl: a.approx_kl,
                clip_fraction: a.clip_fraction,
                loss_static: (n_s > 0.0).then_some(static_mean),
                loss_dynamic: (n_d > 0.0).then_some(dynamic_mean),
            });
        }
        sums.finish()
    }
}

/// Both networks' buffers, reused across minibatches.
#[derive(Debug, Default)]
struct Workspace {
    actor: Activations,
    critic: Activations,
}

/// `log Σ exp(x)` and the entropy of `softmax(x)`.
fn log_sum_exp_and_entropy(x: &[f32]) -> (f32, f32) {
    let max = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let lse = max + x.iter().map(|v| (v - max).exp()).sum::<f32>().ln();
    let entropy = -x
        .iter()
        .map(|v| {
            let lp = v - lse;
            lp.exp() * lp
        })
        .sum::<f32>();
    (lse, entropy)
}

impl Actor for FusedPpo {
    fn width(&self) -> usize {
        self.meta.obs_dim * self.meta.spec.window
    }

    fn act(
        &self,
        rows: &[f32],
        n: usize,
        explore: bool,
        _epsilon: f64,
        rng: &mut SmallRng,
    ) -> Vec<Sampled> {
        let mut acts = Activations::default();
        self.actor.forward(rows, n, &mut acts);
        let out = acts.outputs.pop().unwrap_or_default();
        self.critic.forward(rows, n, &mut acts);
        let values = acts.outputs.pop().unwrap_or_default();
        sample_actor_critic(
            &self.meta,
            &out,
            &values,
            self.log_std_value() as f64,
            n,
            explore,
            rng,
        )
    }
}

#[cfg(test)]
mod tests {
    //! The fused learner must be burn's learner, only faster: the same
    //! gradients for every tensor, and the same weights after an update.

    use burn::module::Module;
    use burn::optim::GradientsParams;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::normalize::RunningNorm;
    use crate::policy::{Algo, Squash};
    use crate::task::Source;

    const OBS: usize = 5;

    fn spec(activation: Activation) -> NetworkSpec {
        NetworkSpec {
            window: 2,
            blocks: vec![
                BlockSpec::Dense {
                    width: 16,
                    activation,
                },
                BlockSpec::Dense {
                    width: 8,
                    activation,
                },
            ],
        }
    }

    fn meta(head: Head, activation: Activation) -> PolicyMeta {
        PolicyMeta {
            algo: Algo::Ppo,
            spec: spec(activation),
            obs_dim: OBS,
            head,
            squash: Squash::Clip,
            pace: Default::default(),
            discrete: match head {
                Head::Gaussian => Vec::new(),
                Head::Categorical(k) => (0..k).map(|a| a as f64 / (k - 1) as f64).collect(),
            },
            norm: RunningNorm::new(OBS),
            features: Default::default(),
            message_dims: 0,
            placements: Vec::new(),
        }
    }

    fn config(head: Head) -> PpoConfig {
        PpoConfig {
            entropy_coef: 0.01,
            learning_rate: 0.01,
            batch_size: 16,
            epochs: 2,
            discrete: match head {
                Head::Gaussian => Vec::new(),
                Head::Categorical(k) => vec![0.0; k],
            },
            ..PpoConfig::default()
        }
    }

    /// A rollout of two environments (one static, one dynamic) whose
    /// stored log-probabilities are the current policy's, perturbed so
    /// that some ratios leave the clip range.
    fn rollout(m: &PolicyMeta, model: &ActorCritic, rng: &mut SmallRng) -> Rollout {
        let (n_envs, steps) = (2, 16);
        let width = OBS * m.spec.window;
        let obs: Vec<f32> = (0..n_envs * steps * width)
            .map(|_| rng.random_range(-2.0..2.0))
            .collect();
        let policy = crate::policy::Policy {
            meta: m.clone(),
            model: crate::policy::Model::Ppo(model.valid()),
            device: crate::DeviceChoice::Cpu.device().expect("the CPU"),
        };
        let sampled = policy.act(&obs, n_envs * steps, true, 0.0, rng);
        Rollout {
            n_envs,
            steps,
            width,
            raw: sampled.iter().map(|s| s.raw).collect(),
            log_prob: sampled
                .iter()
                .map(|s| s.log_prob + rng.random_range(-0.4..0.4))
                .collect(),
            value: sampled.iter().map(|s| s.value).collect(),
            reward: (0..n_envs * steps)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect(),
            done: (0..n_envs * steps).map(|i| i % 7 == 6).collect(),
            source: vec![Source::Static, Source::Dynamic],
            last_value: vec![0.1, -0.2],
            obs,
        }
    }

    fn setup(head: Head, activation: Activation) -> (PolicyMeta, ActorCritic, SmallRng) {
        let device = crate::DeviceChoice::Cpu
            .device()
            .expect("the CPU")
            .autodiff();
        device.seed(3);
        let m = meta(head, activation);
        let model = ActorCritic::new(&m.spec, OBS, head, &device).expect("a valid spec");
        (m, model, SmallRng::seed_from_u64(11))
    }

    /// Every tensor's gradient as burn computes it, in the fused order.
    fn burn_gradients(
        model: &ActorCritic,
        loss: Tensor<1>,
        head: Head,
    ) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
        let grads = loss.backward();
        let grads = GradientsParams::from_grads(grads, model);
        let linear = |l: &Linear| {
            vec![
                floats(grads.get::<2>(l.weight.id).expect("weight gradient")),
                floats1(
                    grads
                        .get::<1>(l.bias.as_ref().expect("bias").id)
                        .expect("bias gradient"),
                ),
            ]
        };
        let trunk = |t: &crate::net::Trunk, head: &Linear| {
            let mut out = Vec::new();
            for b in t.blocks() {
                if let Block::Dense(d) = b {
                    out.extend(linear(d.linear()));
                }
            }
            out.extend(linear(head));
            out
        };
        let mut actor = trunk(&model.actor, &model.policy_head);
        if head == Head::Gaussian {
            actor.push(floats1(
                grads.get::<1>(model.log_std.id).expect("log_std gradient"),
            ));
        }
        (actor, trunk(&model.critic, &model.value_head))
    }

    fn max_difference(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f32, f32) {
        assert_eq!(a.len(), b.len(), "tensor count");
        let mut diff = 0f32;
        let mut scale = 0f32;
        for (x, y) in a.iter().zip(b) {
            assert_eq!(x.len(), y.len(), "tensor size");
            for (p, q) in x.iter().zip(y) {
                diff = diff.max((p - q).abs());
                scale = scale.max(p.abs());
            }
        }
        (diff, scale)
    }

    fn gradients_match(head: Head, activation: Activation) {
        let (m, model, mut rng) = setup(head, activation);
        let cfg = config(head);
        let r = rollout(&m, &model, &mut rng);
        let (adv, ret) = gae(&r, 0.99, 0.95);
        let rows: Vec<usize> = (0..r.raw.len()).step_by(3).collect();
        let mut mb = Minibatch::default();
        mb.gather(&r, &adv, &ret, &rows);
        let weights = LossWeights {
            alpha: 0.3,
            beta: 0.7,
        };

        let loss = crate::ppo::loss(&model, &cfg, &mb, weights);
        let (burn_actor, burn_critic) = burn_gradients(&model, loss.total, head);
        let fused = FusedPpo::new(&model, &m).expect("an MLP");
        let ((actor, _), (critic, _)) = fused.gradients(
            &cfg,
            &mb,
            &mb.sample_weights(weights),
            &mut Workspace::default(),
        );

        for (name, ours, theirs) in [
            ("actor", &actor, &burn_actor),
            ("critic", &critic, &burn_critic),
        ] {
            let (diff, scale) = max_difference(ours, theirs);
            assert!(scale > 1e-4, "{name}: the loss should have a gradient");
            assert!(
                diff <= 1e-4 * scale.max(1.0),
                "{name}: fused and burn gradients differ by {diff} (scale {scale})"
            );
        }
    }

    #[test]
    fn fused_gradients_are_burns_for_a_gaussian_tanh_policy() {
        gradients_match(Head::Gaussian, Activation::Tanh);
    }

    #[test]
    fn fused_gradients_are_burns_for_a_categorical_relu_policy() {
        gradients_match(Head::Categorical(4), Activation::Relu);
    }

    #[test]
    fn fused_gradients_are_burns_for_sigmoid_and_identity_layers() {
        gradients_match(Head::Gaussian, Activation::Sigmoid);
        gradients_match(Head::Categorical(3), Activation::Identity);
    }

    #[test]
    fn a_fused_update_leaves_the_weights_and_figures_of_a_burn_update() {
        let head = Head::Gaussian;
        let (m, model, mut rng) = setup(head, Activation::Tanh);
        let cfg = config(head);
        let r = rollout(&m, &model, &mut rng);
        let weights = LossWeights {
            alpha: 0.4,
            beta: 0.6,
        };

        let mut fused = FusedPpo::new(&model, &m).expect("an MLP");
        let ours = fused.update(&cfg, &r, weights, &mut SmallRng::seed_from_u64(5));
        let mut optim = crate::ppo::optimizer(&cfg);
        let (trained, theirs) = crate::ppo::update(
            model.clone(),
            &mut optim,
            &cfg,
            &r,
            weights,
            &mut SmallRng::seed_from_u64(5),
        );

        let figures = |s: &PpoStats| {
            [
                s.loss,
                s.policy_loss,
                s.value_loss,
                s.entropy,
                s.approx_kl,
                s.clip_fraction,
                s.loss_static.unwrap_or(f64::NAN),
                s.loss_dynamic.unwrap_or(f64::NAN),
            ]
        };
        for (a, b) in figures(&ours).iter().zip(figures(&theirs)) {
            assert!(
                (a - b).abs() <= 1e-4 * b.abs().max(1.0),
                "{ours:?}\n{theirs:?}"
            );
        }
        let burn_twin = FusedPpo::new(&trained, &m).expect("an MLP");
        let (diff, _) = max_difference(&fused.actor.params, &burn_twin.actor.params);
        assert!(diff < 1e-3, "actor weights differ by {diff}");
        let (diff, _) = max_difference(&fused.critic.params, &burn_twin.critic.params);
        assert!(diff < 1e-3, "critic weights differ by {diff}");

        // Written back, the burn model acts as the fused one does.
        let mut mirrored = model;
        fused.write_into(&mut mirrored);
        let (diff, _) = max_difference(
            &FusedPpo::new(&mirrored, &m).expect("an MLP").actor.params,
            &fused.actor.params,
        );
        assert_eq!(diff, 0.0);
    }

    #[test]
    fn the_rational_tanh_is_within_a_few_ulp_of_libm() {
        let mut worst = 0f32;
        for i in -200_000..=200_000 {
            let x = i as f32 * 1e-4;
            worst = worst.max((tanh(x) - x.tanh()).abs());
        }
        assert!(worst < 5e-7, "largest error {worst}");
        assert_eq!(tanh(40.0), 1.0);
        assert_eq!(tanh(-40.0), -1.0);
    }

    #[test]
    fn networks_the_fused_learner_does_not_implement_stay_with_burn() {
        let device = crate::DeviceChoice::Cpu.device().expect("the CPU");
        for blocks in [
            vec![BlockSpec::Dense {
                width: 8,
                activation: Activation::Gelu,
            }],
            vec![
                BlockSpec::Dense {
                    width: 8,
                    activation: Activation::Tanh,
                },
                BlockSpec::LayerNorm,
            ],
        ] {
            let mut m = meta(Head::Gaussian, Activation::Tanh);
            m.spec.blocks = blocks;
            let model = ActorCritic::new(&m.spec, OBS, m.head, &device).expect("a valid spec");
            assert!(FusedPpo::new(&model, &m).is_none(), "{:?}", m.spec);
        }
    }
}
