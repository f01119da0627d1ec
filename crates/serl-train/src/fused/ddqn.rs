//! Double DQN on the fused learner: the online and target Q-networks as
//! flat MLPs, the Huber loss's gradient written out, and burn's Adam with
//! per-tensor clipping ([`AdamState`]). It computes the loss of
//! [`crate::ddqn::train_step`] on the same minibatch (a test compares the
//! updated weights with burn's), and, like fused PPO, gives the same
//! numbers however many trainings share the machine.

use rand::rngs::SmallRng;

use super::adam::AdamState;
use super::mlp::{Activations, Mlp};
use crate::ddqn::{DdqnConfig, DdqnStats};
use crate::hybrid::LossWeights;
use crate::net::QNetwork;
use crate::replay::Replay;

/// A DDQN learner's networks and optimiser, without autodiff.
#[derive(Debug, Clone)]
pub struct FusedDdqn {
    online: Mlp,
    target: Mlp,
    optim: AdamState,
    /// Buffers reused from one gradient step to the next.
    acts: Activations,
    next: Activations,
    grads: Vec<Vec<f32>>,
}

impl FusedDdqn {
    /// The fused twin of an online and a target network, or `None` when
    /// their network has a block this learner does not implement.
    pub fn new(online: &QNetwork, target: &QNetwork) -> Option<Self> {
        let online_mlp = Mlp::from_burn(&online.trunk, &online.head)?;
        let target = Mlp::from_burn(&target.trunk, &target.head)?;
        Some(FusedDdqn {
            optim: AdamState::new(&online_mlp.params),
            grads: super::adam::zeros_like(&online_mlp.params),
            online: online_mlp,
            target,
            acts: Activations::default(),
            next: Activations::default(),
        })
    }

    /// The online network's Q values of `n` rows, `n × actions`.
    pub fn q_values(&mut self, rows: &[f32], n: usize) -> Vec<f32> {
        self.online.forward(rows, n, &mut self.acts);
        self.acts.outputs.last().cloned().unwrap_or_default()
    }

    /// The target network takes the online network's weights.
    pub fn refresh_target(&mut self) {
        self.target.params.clone_from(&self.online.params);
    }

    /// One gradient step on a minibatch sampled from `replay`, exactly as
    /// [`crate::ddqn::train_step`] computes it: the online network picks
    /// the next action, the target network values it, and the Huber loss
    /// (δ = 1) of each source is averaged and weighted.
    pub fn train_step(
        &mut self,
        cfg: &DdqnConfig,
        replay: &Replay,
        weights: LossWeights,
        rng: &mut SmallRng,
    ) -> DdqnStats {
        let k = cfg.actions.len();
        let s = replay.sample(cfg.batch_size, rng);
        let b = s.rows;
        self.online.forward(&s.next_obs, b, &mut self.next);
        let q_online_next = self.next.outputs.pop().unwrap_or_default();
        self.target.forward(&s.next_obs, b, &mut self.next);
        let q_target_next = self.next.outputs.pop().unwrap_or_default();
        let y = s.targets(&q_online_next, &q_target_next, k, cfg.gamma);
        self.online.forward(&s.obs, b, &mut self.acts);
        let (n_s, n_d, wa, wb) = s.source_weights(weights);
        // Each row's loss counts in its source's mean, weighted.
        let scale_s = wa as f32 / n_s.max(1.0);
        let scale_d = wb as f32 / n_d.max(1.0);
        let q_all = self.acts.outputs.last().map_or(&[][..], |v| &v[..]);
        let delta = &mut self.acts.delta;
        delta.clear();
        delta.resize(b * k, 0.0);
        let (mut sum_s, mut sum_d, mut q_sum) = (0f32, 0f32, 0f32);
        for i in 0..b {
            let a = s.action[i] as usize;
            let q = q_all[i * k + a];
            q_sum += q;
            let diff = q - y[i];
            let abs = diff.abs();
            let quad = abs.min(1.0);
            let per = 0.5 * quad * quad + (abs - quad);
            sum_s += per * s.is_static[i];
            sum_d += per * s.is_dynamic[i];
            // d(Huber)/d(diff): the difference inside δ, its sign beyond.
            let slope = if abs < 1.0 { diff } else { diff.signum() };
            delta[i * k + a] = slope * (scale_s * s.is_static[i] + scale_d * s.is_dynamic[i]);
        }
        self.online
            .backward(&s.obs, b, &mut self.acts, &mut self.grads, None);
        self.optim.step(
            &mut self.online.params,
            &mut self.grads,
            cfg.learning_rate as f32,
            cfg.max_grad_norm,
        );
        let (l_s, l_d) = (sum_s / n_s.max(1.0), sum_d / n_d.max(1.0));
        DdqnStats {
            loss: (l_s * wa as f32 + l_d * wb as f32) as f64,
            q_mean: (q_sum / b as f32) as f64,
            loss_static: (n_s > 0.0).then_some(l_s as f64),
            loss_dynamic: (n_d > 0.0).then_some(l_d as f64),
        }
    }

    /// Writes the online network's weights into `online`.
    pub fn write_into(&self, online: &mut QNetwork) {
        self.online.write_into(&mut online.trunk, &mut online.head);
    }

    /// Writes the target network's weights into `target`.
    pub fn write_target_into(&self, target: &mut QNetwork) {
        self.target.write_into(&mut target.trunk, &mut target.head);
    }

    /// The optimiser state, to save with a checkpoint.
    pub fn optimizer(&self) -> &AdamState {
        &self.optim
    }

    /// Restores a saved optimiser state; `false` (and nothing changed)
    /// when it belongs to a network of another shape.
    pub fn restore_optimizer(&mut self, optim: AdamState) -> bool {
        let fits = optim.fits(&self.online.params);
        if fits {
            self.optim = optim;
        }
        fits
    }
}

#[cfg(test)]
mod tests {
    //! The fused DDQN step must be burn's step: the same weights after a
    //! few gradient steps on the same minibatches, the same losses.

    use burn::module::Module;
    use rand::{Rng, SeedableRng};
    use serl_design::{Activation, BlockSpec, NetworkSpec};

    use super::*;
    use serl_env::Source;

    const OBS: usize = 5;
    const ACTIONS: usize = 4;

    fn replay(rng: &mut SmallRng, width: usize) -> Replay {
        let mut r = Replay::new(200, width);
        for i in 0..150 {
            let obs: Vec<f32> = (0..width).map(|_| rng.random_range(-2.0..2.0)).collect();
            let next: Vec<f32> = (0..width).map(|_| rng.random_range(-2.0..2.0)).collect();
            // Rewards large enough that some errors pass δ = 1.
            let reward = rng.random_range(-3.0..3.0);
            let source = if i % 3 == 0 {
                Source::Dynamic
            } else {
                Source::Static
            };
            let action = rng.random_range(0..ACTIONS) as f32;
            r.push(&obs, action, reward, &next, i % 7 == 0, source);
        }
        r
    }

    fn steps_match(spec: NetworkSpec) {
        steps_match_on(spec, OBS)
    }

    fn steps_match_on(spec: NetworkSpec, obs: usize) {
        let device = crate::DeviceChoice::Cpu
            .device()
            .expect("the CPU")
            .autodiff();
        device.seed(3);
        let online = QNetwork::new(&spec, obs, ACTIONS, &device).expect("a valid spec");
        let target = online.valid();
        let width = obs * spec.window;
        let cfg = DdqnConfig {
            actions: vec![0.0, 0.25, 0.5, 1.0],
            batch_size: 32,
            ..Default::default()
        };
        let data = replay(&mut SmallRng::seed_from_u64(9), width);
        let weights = LossWeights {
            alpha: 0.4,
            beta: 0.6,
        };

        let mut fused = FusedDdqn::new(&online, &target).expect("an MLP");
        let mut optim = crate::ddqn::optimizer(&cfg);
        let (mut burn_online, mut ours_rng, mut theirs_rng) = (
            online.clone(),
            SmallRng::seed_from_u64(5),
            SmallRng::seed_from_u64(5),
        );
        for _ in 0..3 {
            let ours = fused.train_step(&cfg, &data, weights, &mut ours_rng);
            let (m, theirs) = crate::ddqn::train_step(
                burn_online,
                &target,
                &mut optim,
                &cfg,
                &data,
                weights,
                &mut theirs_rng,
            );
            burn_online = m;
            let figures = |s: &DdqnStats| {
                [
                    s.loss,
                    s.q_mean,
                    s.loss_static.unwrap_or(f64::NAN),
                    s.loss_dynamic.unwrap_or(f64::NAN),
                ]
            };
            let context = format!("{ours:?}\n{theirs:?}");
            super::super::tests::assert_figures_close(&figures(&ours), &figures(&theirs), &context);
        }
        let twin = FusedDdqn::new(&burn_online, &target).expect("an MLP");
        let (worst, _) =
            super::super::tests::max_difference(&fused.online.params, &twin.online.params);
        assert!(worst < 1e-4, "weights differ by {worst}");

        // Written back, the burn network values states as the fused one.
        let mut mirrored = online.valid();
        fused.write_into(&mut mirrored);
        let rows: Vec<f32> = (0..3 * width).map(|i| (i as f32 * 0.37).sin()).collect();
        let theirs = crate::tensors::floats(mirrored.forward(crate::tensors::matrix(
            &rows,
            3,
            &mirrored.head.weight.val().device(),
        )));
        let ours = fused.q_values(&rows, 3);
        for (a, b) in ours.iter().zip(&theirs) {
            assert!((a - b).abs() < 1e-5, "{ours:?}\n{theirs:?}");
        }
    }

    #[test]
    fn a_fused_ddqn_step_is_a_burn_step() {
        steps_match(NetworkSpec {
            window: 2,
            blocks: vec![
                BlockSpec::Dense {
                    width: 16,
                    activation: Activation::Tanh,
                },
                BlockSpec::Dense {
                    width: 8,
                    activation: Activation::Relu,
                },
            ],
        });
    }

    #[test]
    fn a_fused_ddqn_step_through_a_gru_is_a_burn_step() {
        steps_match(NetworkSpec {
            window: 3,
            blocks: vec![
                BlockSpec::Gru { hidden: 6 },
                BlockSpec::Dense {
                    width: 8,
                    activation: Activation::Gelu,
                },
            ],
        });
    }

    #[test]
    fn a_fused_ddqn_step_through_norms_and_residual_blocks_is_a_burn_step() {
        steps_match(NetworkSpec {
            window: 1,
            blocks: vec![
                BlockSpec::LayerNorm,
                BlockSpec::Dense {
                    width: 12,
                    activation: Activation::Tanh,
                },
                BlockSpec::Residual {
                    activation: Activation::Relu,
                },
            ],
        });
    }

    #[test]
    fn a_fused_ddqn_step_through_book_attention_is_a_burn_step() {
        let spec = super::super::tests::attention();
        let obs = super::super::tests::obs_of(&spec);
        steps_match_on(spec, obs);
    }
}
