//! Double DQN as a [`Learner`]: ε-greedy acting into a replay buffer,
//! gradient steps once it holds enough, and a target network refreshed
//! every `target_every` environment steps. Its replay buffer is not
//! checkpointed: a resumed run refills it.
//!
//! As PPO's, on one of two backends with the same loss and optimiser:
//! burn's autodiff (any network, any device) or the fused learner
//! ([`FusedDdqn`]: MLPs on the CPU, several times faster, and the same
//! numbers however many trainings share the machine). The burn networks
//! mirror the fused weights after every update.

use std::path::Path;

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use super::{optimizer, train_step, DdqnConfig, DdqnStats};
use crate::config::TrainConfig;
use crate::fused::FusedDdqn;
use crate::learner::{
    load_target, restore_fused_optimizer, restore_optimizer, save_fused_optimizer, save_optimizer,
    save_target, step_into_replay, wrong_algorithm, Experience, Learner, UpdateStats,
};
use crate::net::{Head, QNetwork};
use crate::policy::{
    epsilon_greedy, ActionShape, Model, NetworkKind, Pace, Policy, PolicyMeta, Squash,
};
use crate::record::UpdateRecord;
use crate::replay::Replay;
use crate::TrainError;
use serl_env::Source;

/// DDQN's learner: the online and target Q-networks, the optimiser and
/// the replay buffer. With the fused backend, `online` and `target`
/// mirror its weights (the target's when a checkpoint is saved).
pub struct DdqnLearner {
    online: QNetwork,
    target: QNetwork,
    /// burn's optimiser: the burn backend steps it; the fused one keeps it
    /// (unused) in checkpoints so that a run can resume with either.
    optim: ModuleOptimizer,
    fused: Option<Box<FusedDdqn>>,
    replay: Box<Replay>,
    device: Device,
}

/// What one DDQN update reports: the mean losses over its gradient steps
/// (none before learning starts) and the exploration rate.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct DdqnUpdateStats {
    /// Mean minimised Huber loss, α·L_static + β·L_dynamic (0 before
    /// learning starts).
    pub loss: f64,
    /// Mean loss of the static samples (`None` without any).
    pub loss_static: Option<f64>,
    /// Mean loss of the dynamic samples (`None` without any).
    pub loss_dynamic: Option<f64>,
    /// The exploration rate ε at the update's start.
    pub epsilon: f64,
}

impl UpdateStats for DdqnUpdateStats {
    fn write_into(&self, rec: &mut UpdateRecord) {
        rec.loss = self.loss;
        rec.epsilon = Some(self.epsilon);
        rec.loss_static = self.loss_static;
        rec.loss_dynamic = self.loss_dynamic;
    }
}

/// Running sums of the losses over an update's gradient steps.
#[derive(Default)]
struct LossSums {
    total: (f64, usize),
    static_: (f64, usize),
    dynamic: (f64, usize),
}

impl LossSums {
    fn add(&mut self, stats: &DdqnStats) {
        let add = |acc: &mut (f64, usize), v: f64| *acc = (acc.0 + v, acc.1 + 1);
        add(&mut self.total, stats.loss);
        if let Some(v) = stats.loss_static {
            add(&mut self.static_, v);
        }
        if let Some(v) = stats.loss_dynamic {
            add(&mut self.dynamic, v);
        }
    }

    fn mean((sum, n): (f64, usize)) -> Option<f64> {
        (n > 0).then(|| sum / n as f64)
    }
}

impl DdqnLearner {
    /// One decision of every environment: acts ε-greedily, stores the
    /// transitions, then takes the gradient steps once the buffer holds
    /// enough and refreshes the target when `target_every` steps passed.
    /// `env_steps` is counted on.
    /// `sources` holds each row's source, read once per update.
    fn step(
        &mut self,
        d: &DdqnConfig,
        x: &mut Experience,
        sources: &[Source],
        env_steps: &mut usize,
        sums: &mut LossSums,
    ) {
        let n = x.venv.len();
        let obs = x.venv.current().to_vec();
        let epsilon = d.epsilon(*env_steps);
        let acts = match &mut self.fused {
            Some(f) => {
                let qs = f.q_values(&obs, n);
                epsilon_greedy(x.meta, &qs, n, true, epsilon, x.rng)
            }
            None => Policy {
                meta: x.meta.clone(),
                model: Model::Ddqn(self.online.valid()),
                device: x.device.clone(),
            }
            .act(&obs, n, true, epsilon, x.rng),
        };
        let before = *env_steps / d.target_every.max(1);
        step_into_replay(&mut self.replay, x, (&obs, &acts), |a| a.raw, sources);
        *env_steps += n;
        if self.replay.len() >= d.learning_starts.max(d.batch_size) {
            for _ in 0..d.gradient_steps {
                let stats = match &mut self.fused {
                    Some(f) => f.train_step(d, &self.replay, x.weights, x.rng),
                    None => {
                        let (m, stats) = train_step(
                            self.online.clone(),
                            &self.target,
                            &mut self.optim,
                            d,
                            &self.replay,
                            x.weights,
                            x.rng,
                        );
                        self.online = m;
                        stats
                    }
                };
                sums.add(&stats);
            }
        }
        if *env_steps / d.target_every.max(1) != before {
            match &mut self.fused {
                Some(f) => f.refresh_target(),
                None => self.target = self.online.valid(),
            }
        }
    }
}

impl Learner for DdqnLearner {
    const NAME: &'static str = "DDQN";
    const KEY: &'static str = "ddqn";
    const NETWORK: NetworkKind = NetworkKind::QNetwork;
    type Config = DdqnConfig;
    type Stats = DdqnUpdateStats;

    /// One Q value per fraction of `[train.ddqn] actions`, picked whole
    /// (nothing to squash).
    fn shape(cfg: &TrainConfig) -> ActionShape {
        let actions = &Self::config(cfg).actions;
        ActionShape {
            head: Head::Categorical(actions.len()),
            squash: Squash::Clip,
            pace: Pace::Absolute,
            discrete: actions.clone(),
        }
    }

    fn fused_switch(cfg: &TrainConfig) -> bool {
        Self::config(cfg).fused
    }

    fn check(cfg: &TrainConfig) -> Result<(), TrainError> {
        if Self::config(cfg).actions.len() < 2 {
            return Err(TrainError::Config {
                field: "ddqn.actions".into(),
                message: "needs at least two actions".into(),
            });
        }
        Ok(())
    }

    fn build(
        cfg: &TrainConfig,
        meta: &PolicyMeta,
        autodiff: &Device,
        device: &Device,
    ) -> Result<Self, TrainError> {
        let Head::Categorical(k) = meta.head else {
            unreachable!("DDQN's head is categorical")
        };
        let d = Self::config(cfg);
        let online = QNetwork::new(&meta.spec, meta.obs_dim, k, autodiff)?;
        let target = online.valid();
        let fused = cfg
            .fused_backend(d.fused, &meta.spec)
            .then(|| FusedDdqn::new(&online, &target).map(Box::new))
            .flatten();
        Ok(DdqnLearner {
            target,
            online,
            fused,
            optim: optimizer(d),
            replay: Box::new(Replay::new(d.buffer, meta.obs_dim * meta.spec.window)),
            device: device.clone(),
        })
    }

    fn update(&mut self, cfg: &TrainConfig, mut x: Experience) -> DdqnUpdateStats {
        let d = Self::config(cfg);
        let mut env_steps = x.env_steps;
        let mut sums = LossSums::default();
        let sources = x.venv.sources();
        for _ in 0..cfg.decisions_per_update() {
            self.step(d, &mut x, &sources, &mut env_steps, &mut sums);
        }
        if let Some(f) = &self.fused {
            f.write_into(&mut self.online);
        }
        DdqnUpdateStats {
            loss: LossSums::mean(sums.total).unwrap_or(0.0),
            loss_static: LossSums::mean(sums.static_),
            loss_dynamic: LossSums::mean(sums.dynamic),
            epsilon: d.epsilon(x.env_steps),
        }
    }

    fn inference(&self) -> Model {
        Model::Ddqn(self.online.valid())
    }

    fn save(&self, ck: &Path, current: &Policy) -> Result<(), TrainError> {
        let mut target = self.target.clone();
        if let Some(f) = &self.fused {
            f.write_target_into(&mut target);
            save_fused_optimizer(ck, f.optimizer())?;
        }
        save_target(ck, &current.meta, Model::Ddqn(target), &self.device)?;
        save_optimizer(ck, &self.optim)
    }

    fn restore(&mut self, ck: &Path, saved: Model, _meta: &PolicyMeta) -> Result<(), TrainError> {
        let Model::Ddqn(m) = saved else {
            return Err(wrong_algorithm(ck));
        };
        let target = load_target(
            ck,
            &self.device,
            ("a DDQN network", |m| match m {
                Model::Ddqn(q) => Some(q),
                _ => None,
            }),
        )?;
        self.online = m.train();
        self.target = target;
        if self.fused.is_some() {
            let mut f =
                FusedDdqn::new(&self.online, &self.target).ok_or_else(|| wrong_algorithm(ck))?;
            restore_fused_optimizer(ck, |saved| f.restore_optimizer(saved))?;
            self.fused = Some(Box::new(f));
        }
        restore_optimizer(ck, &mut self.optim)
    }
}
