//! SAC as a [`Learner`]: it samples its tanh-squashed Gaussian into a
//! replay buffer and, once the buffer holds enough, takes its gradient
//! steps (`sac.rs`). Its replay buffer is not checkpointed: a resumed run
//! refills it, as DDQN's does.

use std::path::Path;

use burn::module::Module;
use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use super::{optimizer, train_step, SacConfig, SacState, SacStats, Temperature, TwinQ};
use crate::config::TrainConfig;
use crate::files::write_atomic;
use crate::learner::{
    load_target, restore_optimizer, restore_optimizer_as, save_optimizer, save_optimizer_as,
    save_target, step_into_replay, wrong_algorithm, Experience, Learner, UpdateStats,
};
use crate::net::{ActorCritic, Head};
use crate::policy::{ActionShape, Model, NetworkKind, Policy, PolicyMeta, Sampled, Squash};
use crate::record::UpdateRecord;
use crate::replay::Replay;
use crate::TrainError;
use serl_env::Source;

/// SAC's learner: the policy's actor-critic (actor and V), its target V̄,
/// the twin Q networks, their optimisers, the temperature and the replay
/// buffer.
pub struct SacLearner {
    model: ActorCritic,
    target: ActorCritic,
    twin: TwinQ,
    model_optim: ModuleOptimizer,
    twin_optim: ModuleOptimizer,
    temperature: Temperature,
    replay: Box<Replay>,
    device: Device,
}

/// What one SAC update reports: the means over its gradient steps (none
/// before learning starts) and the temperature.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct SacUpdateStats {
    /// Means over the update's gradient steps (zeros before learning).
    pub sac: SacStats,
    /// The entropy temperature after the update.
    pub temperature: f64,
}

impl UpdateStats for SacUpdateStats {
    fn write_into(&self, rec: &mut UpdateRecord) {
        let s = &self.sac;
        rec.loss = s.loss;
        rec.loss_static = s.loss_static;
        rec.loss_dynamic = s.loss_dynamic;
        rec.policy_loss = Some(s.policy_loss);
        rec.value_loss = Some(s.value_loss);
        rec.entropy = Some(s.entropy);
        rec.learner.insert("temperature".into(), self.temperature);
    }
}

/// Sums of the gradient steps' statistics over an update.
#[derive(Default)]
struct Sums {
    n: usize,
    total: SacStats,
    statics: (f64, usize),
    dynamics: (f64, usize),
}

impl Sums {
    fn add(&mut self, s: &SacStats) {
        self.n += 1;
        let t = &mut self.total;
        t.loss += s.loss;
        t.policy_loss += s.policy_loss;
        t.value_loss += s.value_loss;
        t.entropy += s.entropy;
        if let Some(v) = s.loss_static {
            self.statics = (self.statics.0 + v, self.statics.1 + 1);
        }
        if let Some(v) = s.loss_dynamic {
            self.dynamics = (self.dynamics.0 + v, self.dynamics.1 + 1);
        }
    }

    fn mean(self) -> SacStats {
        let n = self.n.max(1) as f64;
        let part = |(sum, k): (f64, usize)| (k > 0).then(|| sum / k as f64);
        SacStats {
            loss: self.total.loss / n,
            loss_static: part(self.statics),
            loss_dynamic: part(self.dynamics),
            policy_loss: self.total.policy_loss / n,
            value_loss: self.total.value_loss / n,
            entropy: self.total.entropy / n,
        }
    }
}

/// The temperature's state in a checkpoint.
const TEMPERATURE: &str = "sac-temperature.json";
/// The twin Q networks' weights in a checkpoint.
const TWIN: &str = "twin-q.bpk";
/// Their optimiser's state.
const TWIN_OPTIMIZER: &str = "twin-optim.bin";

impl SacLearner {
    /// One decision of every environment: samples the policy, stores the
    /// transitions (the squashed action in (-1, 1)), then takes the
    /// gradient steps once the buffer holds enough (whose length, not a
    /// count of steps, says when learning starts).
    fn step(&mut self, d: &SacConfig, x: &mut Experience, sources: &[Source], sums: &mut Sums) {
        let n = x.venv.len();
        let obs = x.venv.current().to_vec();
        let policy = Policy {
            meta: x.meta.clone(),
            model: Model::Ppo(self.model.valid()),
            device: x.device.clone(),
        };
        let acts = policy.act(&obs, n, true, 0.0, x.rng);
        // The Q networks read the squashed action, in (-1, 1).
        let squashed = |a: &Sampled| (a.raw as f64).tanh() as f32;
        step_into_replay(&mut self.replay, x, (&obs, &acts), squashed, sources);
        if self.replay.len() < d.learning_starts.max(d.batch_size) {
            return;
        }
        for _ in 0..d.gradient_steps {
            let state = SacState {
                model: self.model.clone(),
                twin: self.twin.clone(),
                target: &mut self.target,
                model_optim: &mut self.model_optim,
                twin_optim: &mut self.twin_optim,
                temperature: &mut self.temperature,
            };
            let (model, twin, stats) = train_step(state, d, &self.replay, x.weights, x.rng);
            self.model = model;
            self.twin = twin;
            sums.add(&stats);
        }
    }
}

impl Learner for SacLearner {
    const NAME: &'static str = "SAC";
    const KEY: &'static str = "sac";
    const NETWORK: NetworkKind = NetworkKind::ActorCritic;
    type Config = SacConfig;
    type Stats = SacUpdateStats;

    /// A Gaussian head squashed by tanh, paced as `[train.sac] pace` says.
    fn shape(cfg: &TrainConfig) -> ActionShape {
        ActionShape {
            head: Head::Gaussian,
            squash: Squash::Tanh,
            pace: Self::config(cfg).pace,
            discrete: Vec::new(),
        }
    }

    fn build(
        cfg: &TrainConfig,
        meta: &PolicyMeta,
        autodiff: &Device,
        device: &Device,
    ) -> Result<Self, TrainError> {
        let d = Self::config(cfg);
        let width = meta.obs_dim * meta.spec.window;
        let model = ActorCritic::new(&meta.spec, meta.obs_dim, Head::Gaussian, autodiff)?;
        Ok(SacLearner {
            target: model.valid(),
            twin: TwinQ::new(&meta.spec, width, autodiff)?,
            model,
            model_optim: optimizer(d),
            twin_optim: optimizer(d),
            temperature: Temperature::new(d.initial_temperature),
            replay: Box::new(Replay::new(d.buffer, width)),
            device: device.clone(),
        })
    }

    fn update(&mut self, cfg: &TrainConfig, mut x: Experience) -> SacUpdateStats {
        let d = Self::config(cfg);
        let mut sums = Sums::default();
        let sources = x.venv.sources();
        for _ in 0..cfg.decisions_per_update() {
            self.step(d, &mut x, &sources, &mut sums);
        }
        SacUpdateStats {
            sac: sums.mean(),
            temperature: self.temperature.value(),
        }
    }

    fn inference(&self) -> Model {
        Model::Ppo(self.model.valid())
    }

    fn save(&self, ck: &Path, current: &Policy) -> Result<(), TrainError> {
        save_target(
            ck,
            &current.meta,
            Model::Ppo(self.target.clone()),
            &self.device,
        )?;
        let twin = ck.join(TWIN);
        let tmp = ck.join(format!("{TWIN}.tmp"));
        self.twin
            .clone()
            .save_file(&tmp)
            .map_err(|e| TrainError::io(&twin, std::io::Error::other(format!("{e:?}"))))?;
        std::fs::rename(&tmp, &twin).map_err(|e| TrainError::io(&twin, e))?;
        let path = ck.join(TEMPERATURE);
        let text = serde_json::to_string(&self.temperature)
            .map_err(|e| TrainError::io(&path, std::io::Error::other(e)))?;
        write_atomic(&path, text.as_bytes())?;
        save_optimizer_as(ck, TWIN_OPTIMIZER, &self.twin_optim)?;
        save_optimizer(ck, &self.model_optim)
    }

    fn restore(&mut self, ck: &Path, saved: Model, _meta: &PolicyMeta) -> Result<(), TrainError> {
        let Model::Ppo(m) = saved else {
            return Err(wrong_algorithm(ck));
        };
        let target = load_target(
            ck,
            &self.device,
            ("an actor-critic", |m| match m {
                Model::Ppo(ac) => Some(ac),
                _ => None,
            }),
        )?;
        let corrupt = |path: &Path, message: String| TrainError::Corrupt {
            path: path.display().to_string(),
            message,
        };
        let twin = ck.join(TWIN);
        self.twin = self
            .twin
            .clone()
            .try_load_file(&twin)
            .map_err(|e| corrupt(&twin, format!("{e:?}")))?;
        let path = ck.join(TEMPERATURE);
        let text = std::fs::read_to_string(&path).map_err(|e| TrainError::io(&path, e))?;
        self.temperature =
            serde_json::from_str(&text).map_err(|e| corrupt(&path, e.to_string()))?;
        self.model = m.train();
        self.target = target;
        restore_optimizer_as(ck, TWIN_OPTIMIZER, &mut self.twin_optim)?;
        restore_optimizer(ck, &mut self.model_optim)
    }
}
