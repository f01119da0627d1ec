//! PPO as a [`Learner`], on one of two backends that compute the same loss
//! with the same optimiser: burn's autodiff (any network, any device) or
//! the fused learner (`fused.rs`: MLPs, layer norms and residual blocks on
//! the CPU, several times faster, and the same numbers however many
//! trainings share the machine). The config picks the backend
//! ([`TrainConfig::trains_fused`]); everything downstream sees one kind of
//! policy, because the burn model mirrors the fused weights.

use std::path::Path;

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};

use super::{optimizer, update, PpoConfig, PpoStats};
use crate::align::{clone_policy, AlignmentConfig, Demonstrations};
use crate::config::TrainConfig;
use crate::fused::FusedPpo;
use crate::learner::{
    restore_fused_optimizer, restore_optimizer, save_fused_optimizer, save_optimizer,
    wrong_algorithm, Experience, Extras, Learner, UpdateStats,
};
use crate::net::{ActorCritic, Head};
use crate::policy::{ActionShape, Model, NetworkKind, Policy, PolicyMeta};
use crate::record::UpdateRecord;
use crate::rollout::collect;
use crate::TrainError;

/// Which code computes PPO's gradients.
enum Backend {
    /// burn's autodiff on the model itself.
    Burn,
    /// The fused learner; the burn model mirrors its weights after every
    /// update.
    Fused(Box<FusedPpo>),
}

/// PPO's learner: an actor-critic and its optimiser, on either backend.
pub struct PpoLearner {
    model: ActorCritic,
    /// burn's optimiser: the burn backend steps it; the fused one keeps it
    /// (unused) in checkpoints so that a run can resume with either.
    optim: ModuleOptimizer,
    backend: Backend,
}

/// What one PPO update reports: PPO's means over the minibatches and,
/// when the transition head trains, its errors.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct PpoUpdateStats {
    /// Means over the update's minibatches.
    pub ppo: PpoStats,
    /// The transition head's mean squared error predicting the next
    /// market features (normalised), when it trains.
    pub transition_error: Option<f64>,
    /// The same error for predicting no change.
    pub transition_no_change: Option<f64>,
}

impl UpdateStats for PpoUpdateStats {
    fn write_into(&self, rec: &mut UpdateRecord) {
        let s = &self.ppo;
        rec.loss = s.loss;
        rec.loss_static = s.loss_static;
        rec.loss_dynamic = s.loss_dynamic;
        rec.policy_loss = Some(s.policy_loss);
        rec.value_loss = Some(s.value_loss);
        rec.entropy = Some(s.entropy);
        rec.approx_kl = Some(s.approx_kl);
        // Only set when the head trains, so that other runs' lines keep
        // leaving the fields out.
        if self.transition_error.is_some() {
            rec.transition_error = self.transition_error;
            rec.transition_no_change = self.transition_no_change;
        }
    }
}

impl Learner for PpoLearner {
    const NAME: &'static str = "PPO";
    const KEY: &'static str = "ppo";
    /// PPO's table is [`TrainConfig::ppo`]: its rollout length is every
    /// learner's update, its discrete actions every placing agent's.
    const OWN_TABLE: bool = false;
    const NETWORK: NetworkKind = NetworkKind::ActorCritic;
    const EXTRAS: Extras = Extras {
        placements: true,
        team: true,
        alignment: true,
        transition: true,
    };
    type Config = PpoConfig;
    type Stats = PpoUpdateStats;

    fn config(cfg: &TrainConfig) -> &PpoConfig {
        &cfg.ppo
    }

    /// A Gaussian or a categorical head as `[train.ppo]` says; a placing
    /// policy picks a share and a placement at once (every pair a
    /// category).
    fn shape(cfg: &TrainConfig) -> ActionShape {
        let head = match cfg.ppo.head() {
            Head::Categorical(k) => Head::Categorical(k * cfg.placements.len().max(1)),
            gaussian => gaussian,
        };
        ActionShape {
            head,
            squash: cfg.ppo.squash,
            pace: cfg.ppo.pace,
            discrete: cfg.ppo.discrete.clone(),
        }
    }

    fn fused_switch(cfg: &TrainConfig) -> bool {
        cfg.ppo.fused
    }

    fn build(
        cfg: &TrainConfig,
        meta: &PolicyMeta,
        autodiff: &Device,
        _device: &Device,
    ) -> Result<Self, TrainError> {
        let model = ActorCritic::with_critic_input(
            &meta.spec,
            meta.obs_dim,
            meta.joint_critic_width(),
            meta.head,
            autodiff,
        )?;
        let optim = optimizer(&cfg.ppo);
        let fused = cfg
            .trains_fused()
            .then(|| FusedPpo::new(&model, meta))
            .flatten()
            .map(|f| f.with_transition(cfg.transition.weight));
        if fused.is_none() && !cfg.transition.is_off() {
            return Err(TrainError::Config {
                field: "transition.weight".into(),
                message: "the transition head trains with the fused learner: PPO on the CPU (`[train.ppo] fused = true`, device cpu)".into(),
            });
        }
        let backend = match fused {
            Some(f) => Backend::Fused(Box::new(f)),
            None => Backend::Burn,
        };
        Ok(PpoLearner {
            model,
            optim,
            backend,
        })
    }

    fn update(&mut self, cfg: &TrainConfig, x: Experience) -> PpoUpdateStats {
        let steps = cfg.decisions_per_update();
        match &mut self.backend {
            Backend::Burn => {
                let policy = Policy {
                    meta: x.meta.clone(),
                    model: Model::Ppo(self.model.valid()),
                    device: x.device.clone(),
                };
                let rollout = collect(x.venv, &policy, x.norm, steps, x.rng);
                let (m, ppo) = update(
                    self.model.clone(),
                    &mut self.optim,
                    &cfg.ppo,
                    &rollout,
                    x.weights,
                    x.rng,
                );
                self.model = m;
                PpoUpdateStats {
                    ppo,
                    ..Default::default()
                }
            }
            Backend::Fused(fused) => {
                let rollout = collect(x.venv, &**fused, x.norm, steps, x.rng);
                let ppo = fused.update(&cfg.ppo, &rollout, x.weights, x.rng);
                fused.write_into(&mut self.model);
                let transition = fused.transition_error();
                PpoUpdateStats {
                    ppo,
                    transition_error: transition.map(|t| t.0),
                    transition_no_change: transition.map(|t| t.1),
                }
            }
        }
    }

    fn inference(&self) -> Model {
        Model::Ppo(self.model.valid())
    }

    fn save(&self, ck: &Path, _current: &Policy) -> Result<(), TrainError> {
        if let Backend::Fused(fused) = &self.backend {
            save_fused_optimizer(ck, fused.optimizer())?;
        }
        save_optimizer(ck, &self.optim)
    }

    fn restore(&mut self, ck: &Path, saved: Model, meta: &PolicyMeta) -> Result<(), TrainError> {
        let Model::Ppo(m) = saved else {
            return Err(wrong_algorithm(ck));
        };
        self.model = m.train();
        if let Backend::Fused(fused) = &mut self.backend {
            let weight = fused.transition_weight();
            **fused = FusedPpo::new(&self.model, meta)
                .ok_or_else(|| wrong_algorithm(ck))?
                .with_transition(weight);
            restore_fused_optimizer(ck, |saved| fused.restore_optimizer(saved))?;
        }
        restore_optimizer(ck, &mut self.optim)
    }

    fn align(
        &mut self,
        demos: &Demonstrations,
        cfg: &AlignmentConfig,
        meta: &PolicyMeta,
        rng: &mut SmallRng,
    ) -> (f64, f64) {
        let (m, before, after) = clone_policy(self.model.clone(), demos, cfg, meta.head, rng);
        self.model = m;
        if let Backend::Fused(fused) = &mut self.backend {
            // The same network as before, so the fused twin always exists.
            if let Some(f) = FusedPpo::new(&self.model, meta) {
                fused.take_weights(f);
            }
        }
        (before, after)
    }
}
