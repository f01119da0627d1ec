//! The fused learners of PPO and DDQN: MLPs (dense layers, layer norms and
//! residual blocks, a GRU over the window first) trained on the CPU
//! without autodiff.
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
//! per-tensor gradient clipping; [`FusedDdqn`] does the same for DDQN's
//! Huber loss (`ddqn`). After every update their weights are written back
//! into the burn [`ActorCritic`] or `QNetwork`, so saving does not know
//! which learner ran; validation and backtests act through the fused
//! forward pass whichever learner trained the network (`greedy`: burn's
//! bookkeeping per one-row call cost more than the rest of a validation).
//! A GRU over the window is fused
//! too (`gru`), and so is book attention (`attention`): every block of the
//! grammar. The networks themselves, their passes and kernels are in
//! `mlp`.

use burn::tensor::{Tensor, TensorData};
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};

use crate::hybrid::LossWeights;
use crate::net::{ActorCritic, Head};
use crate::policy::{sample_actor_critic, PolicyMeta, Sampled};
use crate::ppo::{minibatch_order, Minibatch, PpoConfig, PpoStats, StatsSum};
use crate::rollout::{gae, Actor, Rollout};
use crate::tensors::floats1;
use crate::transition::{NextMarket, MARKET};

mod adam;
mod attention;
mod aux;
mod ddqn;
pub(crate) mod greedy;
mod gru;
mod kernels;
mod mlp;

use adam::zeros_like;
pub use adam::AdamState;
pub use aux::AuxHead;
use aux::{AuxBatch, AuxPass};
pub use ddqn::FusedDdqn;
#[cfg(test)]
use greedy::{GreedyNet, GreedyScratch};
pub use mlp::implements;
use mlp::{Activations, Mlp};

/// The optimiser state of both networks, saved in a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FusedOptimizer {
    /// The actor's (with the log standard deviation of a Gaussian head).
    pub actor: AdamState,
    /// The critic's.
    pub critic: AdamState,
    /// The transition head, its weights with its moments
    /// ([`crate::transition`]), when it trains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aux: Option<AuxHead>,
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
    /// Weight of the transition head's loss (0: no head).
    transition_weight: f32,
    /// The last update's mean squared prediction error of the head and of
    /// "no change".
    last_transition: Option<(f64, f64)>,
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
            aux: None,
        };
        Some(FusedPpo {
            actor,
            critic,
            log_std,
            head: meta.head,
            meta: meta.clone(),
            optim,
            transition_weight: 0.0,
            last_transition: None,
        })
    }

    /// Trains a transition head beside the actor, its loss weighted by
    /// `weight` ([`crate::transition`]).
    pub fn with_transition(mut self, weight: f64) -> Self {
        if weight > 0.0 {
            let hidden = self
                .actor
                .last_hidden_width()
                .unwrap_or(self.meta.obs_dim * self.meta.spec.window);
            self.optim.aux = Some(AuxHead::new(hidden));
            self.transition_weight = weight as f32;
        }
        self
    }

    /// Weight of the transition head's loss (0: none).
    pub fn transition_weight(&self) -> f64 {
        f64::from(self.transition_weight)
    }

    /// The last update's mean squared error of the transition head's
    /// predictions and of predicting no change, when it trains.
    pub fn transition_error(&self) -> Option<(f64, f64)> {
        self.last_transition
    }

    /// Takes the actor's and the critic's weights from `other`, a twin of
    /// the same network (after alignment); the optimiser state stays.
    pub fn take_weights(&mut self, other: FusedPpo) {
        self.actor = other.actor;
        self.critic = other.critic;
    }

    /// The optimiser state, to save with a checkpoint.
    pub fn optimizer(&self) -> &FusedOptimizer {
        &self.optim
    }

    /// Restores a saved optimiser state; `false` (and nothing changed)
    /// when it belongs to a network of another shape.
    pub fn restore_optimizer(&mut self, mut optim: FusedOptimizer) -> bool {
        let fits = optim.actor.fits(&self.actor.params) && optim.critic.fits(&self.critic.params);
        if fits {
            // A checkpoint without a head keeps this one's fresh head; a
            // run without one drops a saved head.
            optim.aux = match (optim.aux.take(), self.optim.aux.take()) {
                (Some(saved), Some(mine)) if saved.hidden == mine.hidden => {
                    if !saved.fits_like(&mine) {
                        self.optim.aux = Some(mine);
                        return false;
                    }
                    Some(saved)
                }
                (_, mine) => mine,
            };
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
        aux: Option<&AuxBatch>,
        work: &mut Workspace,
    ) -> ((Half, Option<AuxPass>), Half) {
        let Workspace { actor, critic } = work;
        rayon::join(
            || self.actor_half(cfg, mb, weights, aux, actor),
            || self.critic_half(cfg, mb, weights, critic),
        )
    }

    fn actor_half(
        &self,
        cfg: &PpoConfig,
        mb: &Minibatch,
        weights: &[f32],
        aux: Option<&AuxBatch>,
        acts: &mut Activations,
    ) -> (Half, Option<AuxPass>) {
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
        let aux_pass = match (&self.optim.aux, aux) {
            (Some(head), Some(batch)) => {
                let layers = self.actor.layers.len();
                let h = if layers >= 2 {
                    &acts.outputs[layers - 2]
                } else {
                    &mb.x
                };
                Some(head.pass(h, &mb.raw, n, batch, self.transition_weight))
            }
            _ => None,
        };
        let extra = aux_pass.as_ref().map(|p| p.d_hidden.as_slice());
        self.actor.backward(&mb.x, n, acts, &mut grads, extra);
        if let Some(i) = self.log_std {
            grads[i][0] = d_log_std;
        }
        ((grads, s), aux_pass)
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
        let x = mb.critic_input();
        self.critic.forward(x, n, acts);
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
        self.critic.backward(x, n, acts, &mut grads, None);
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
        let targets = self
            .optim
            .aux
            .is_some()
            .then(|| NextMarket::of(rollout, self.meta.obs_dim));
        let mut transition = (0.0, 0.0, 0usize);
        for rows in minibatch_order(rollout.raw.len(), cfg, rng) {
            mb.gather(rollout, &adv, &ret, &rows);
            let sample_weights = mb.sample_weights(weights);
            let batch = targets.as_ref().map(|t| AuxBatch::gather(t, &rows));
            let (((mut ga, a), mut aux), (mut gc, c)) =
                self.gradients(cfg, &mb, &sample_weights, batch.as_ref(), &mut work);
            if let Some(p) = &aux {
                transition.0 += p.error;
                transition.1 += p.baseline;
                transition.2 += p.rows;
            }
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
                        .step(&mut actor.params, &mut ga, lr, cfg.max_grad_norm);
                    if let (Some(head), Some(p)) = (optim.aux.as_mut(), aux.as_mut()) {
                        let AuxHead { params, adam, .. } = head;
                        adam.step(params, &mut p.grads, lr, cfg.max_grad_norm);
                    }
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
        self.last_transition = targets.map(|_| {
            let cells = (transition.2 * MARKET.len()).max(1) as f64;
            (transition.0 / cells, transition.1 / cells)
        });
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
        critic: Option<&[f32]>,
        n: usize,
        explore: bool,
        _epsilon: f64,
        rng: &mut SmallRng,
    ) -> Vec<Sampled> {
        let mut acts = Activations::default();
        self.actor.forward(rows, n, &mut acts);
        let out = acts.outputs.pop().unwrap_or_default();
        self.critic.forward(critic.unwrap_or(rows), n, &mut acts);
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
mod tests;
