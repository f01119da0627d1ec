//! The learner interface: what the training loop (`run.rs`) asks of
//! every algorithm. [`Learner`] is the typed trait an algorithm implements
//! (its own settings table and its own update statistics); [`AnyLearner`]
//! is the same learner behind one object-safe face, which the loop holds
//! without asking which algorithm it is. The registry (`registry.rs`)
//! maps a config's `algo` to one of them.
//!
//! Checkpoint helpers every learner shares (burn's optimiser state, the
//! error for a checkpoint of another algorithm) live here too.

use std::fmt::Debug;
use std::path::Path;

use burn::optim::ModuleOptimizer;
use burn::tensor::Device;
use rand::rngs::SmallRng;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::algo::Algo;
use crate::align::{AlignmentConfig, Demonstrations};
use crate::config::TrainConfig;
use crate::files::write_atomic;
use crate::hybrid::LossWeights;
use crate::normalize::RunningNorm;
use crate::policy::{ActionShape, Model, NetworkKind, Policy, PolicyMeta, Sampled};
use crate::record::UpdateRecord;
use crate::replay::Replay;
use crate::rollout::VecEnv;
use crate::tables::Settings;
use crate::TrainError;
use serl_env::Source;

/// What one update works with: the environments, the observation
/// normaliser, the policy's metadata, the hybrid weights and a generator.
pub struct Experience<'s, 'a> {
    /// The environments, stepped by the learner.
    pub venv: &'s mut VecEnv<'a>,
    /// The observation normaliser, learning as the environments step.
    pub norm: &'s mut RunningNorm,
    /// Everything but the weights of the policy being trained.
    pub meta: &'s PolicyMeta,
    /// Where inference runs (no autodiff).
    pub device: &'s Device,
    /// The hybrid loss weights α (static) and β (dynamic) of this update.
    pub weights: LossWeights,
    /// Environment steps taken before this update.
    pub env_steps: usize,
    /// The update's own generator (actions and minibatches).
    pub rng: &'s mut SmallRng,
}

/// What one update of a learner reports. Serialisable so a caller can
/// keep it as it is; the metrics line ([`UpdateRecord`], whose form on
/// disk is fixed) takes its figures through [`UpdateStats::write_into`].
pub trait UpdateStats: Serialize + DeserializeOwned + Clone + Debug {
    /// Writes the figures into the update's metrics line: the hybrid
    /// losses (`loss`, `loss_static`, `loss_dynamic`: the last two move
    /// the weights α and β) and the algorithm's own fields. Fields of
    /// other algorithms stay empty.
    fn write_into(&self, rec: &mut UpdateRecord);
}

/// What of a training config only some learners take: the features built
/// on PPO's actor-critic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extras {
    /// Learns where its orders go (`[train] placements`).
    pub placements: bool,
    /// Trains a team of learning agents (MAPPO, independent PPO).
    pub team: bool,
    /// Clones the plan's controller into its actor first (`[train.alignment]`).
    pub alignment: bool,
    /// Trains the auxiliary transition head (`[train.transition]`).
    pub transition: bool,
}

impl Extras {
    /// None of them.
    pub const NONE: Extras = Extras {
        placements: false,
        team: false,
        alignment: false,
        transition: false,
    };
}

/// A learning algorithm: collects an update's experience and learns from
/// it, and decides how its policies act. A new algorithm implements this
/// in its own module and adds one entry to the registry (`registry.rs`).
pub trait Learner {
    /// Its name in messages (`PPO`).
    const NAME: &'static str;
    /// Its name in configs and on command lines (`ppo`): `[train] algo`'s
    /// value, and its table's (`[train.ppo]`).
    const KEY: &'static str;
    /// The kind of network its policies have.
    const NETWORK: NetworkKind;
    /// What of the config beyond its own table it takes.
    const EXTRAS: Extras = Extras::NONE;
    /// Whether its settings are a table of their own (`[train.sac]`),
    /// held for it by the config's [`crate::LearnerTables`]; false only
    /// for PPO, whose table is [`TrainConfig::ppo`] itself.
    const OWN_TABLE: bool = true;
    /// Its own settings (a table of `[train]`, e.g. `[train.ddqn]`).
    type Config: Settings;
    /// What one update reports.
    type Stats: UpdateStats;

    /// Its settings within `cfg`: its own table.
    fn config(cfg: &TrainConfig) -> &Self::Config
    where
        Self: Sized,
    {
        cfg.table::<Self>()
    }

    /// A fresh learner for `cfg`, its network initialised on `autodiff`
    /// (the caller has seeded it) and acting on `device`.
    fn build(
        cfg: &TrainConfig,
        meta: &PolicyMeta,
        autodiff: &Device,
        device: &Device,
    ) -> Result<Self, TrainError>
    where
        Self: Sized;

    /// How the policies it trains under `cfg` act: the head, the squash,
    /// the pace and the discrete actions.
    fn shape(cfg: &TrainConfig) -> ActionShape
    where
        Self: Sized;

    /// Its own switch for the fused backend (`[train.<algo>] fused`); a
    /// learner without a fused backend keeps this default.
    fn fused_switch(cfg: &TrainConfig) -> bool
    where
        Self: Sized,
    {
        let _ = cfg;
        false
    }

    /// Checks what only this learner asks of `cfg` (its own table is
    /// checked with the others); the error names the field.
    fn check(cfg: &TrainConfig) -> Result<(), TrainError>
    where
        Self: Sized,
    {
        let _ = cfg;
        Ok(())
    }

    /// One update: collects `cfg.decisions_per_update()` decisions of
    /// every environment and learns from them.
    fn update(&mut self, cfg: &TrainConfig, x: Experience) -> Self::Stats;

    /// The network as it acts now.
    fn inference(&self) -> Model;

    /// Writes what resuming needs besides the policy (optimiser moments, a
    /// target network) into the checkpoint directory `ck`.
    fn save(&self, ck: &Path, current: &Policy) -> Result<(), TrainError>;

    /// Takes the weights of `saved` and the state [`Learner::save`] wrote
    /// into `ck`.
    fn restore(&mut self, ck: &Path, saved: Model, meta: &PolicyMeta) -> Result<(), TrainError>;

    /// Fits the actor to `demos` before any update (alignment); the
    /// cloning loss before and after. A learner without an actor keeps
    /// this default (the config refuses alignment for it).
    fn align(
        &mut self,
        demos: &Demonstrations,
        cfg: &AlignmentConfig,
        meta: &PolicyMeta,
        rng: &mut SmallRng,
    ) -> (f64, f64) {
        let _ = (demos, cfg, meta, rng);
        (0.0, 0.0)
    }
}

/// Any [`Learner`] behind one object-safe face: what the registry builds
/// and the training loop holds. Implemented for every learner.
pub trait AnyLearner {
    /// The learner's algorithm.
    fn algo(&self) -> Algo;
    /// One update; its statistics written into `rec`.
    fn update(&mut self, cfg: &TrainConfig, x: Experience, rec: &mut UpdateRecord);
    /// See [`Learner::inference`].
    fn inference(&self) -> Model;
    /// See [`Learner::save`].
    fn save(&self, ck: &Path, current: &Policy) -> Result<(), TrainError>;
    /// See [`Learner::restore`].
    fn restore(&mut self, ck: &Path, saved: Model, meta: &PolicyMeta) -> Result<(), TrainError>;
    /// See [`Learner::align`].
    fn align(
        &mut self,
        demos: &Demonstrations,
        cfg: &AlignmentConfig,
        meta: &PolicyMeta,
        rng: &mut SmallRng,
    ) -> (f64, f64);
}

impl<L: Learner> AnyLearner for L {
    fn algo(&self) -> Algo {
        Algo::from_key(L::KEY)
    }

    fn update(&mut self, cfg: &TrainConfig, x: Experience, rec: &mut UpdateRecord) {
        Learner::update(self, cfg, x).write_into(rec);
    }

    fn inference(&self) -> Model {
        Learner::inference(self)
    }

    fn save(&self, ck: &Path, current: &Policy) -> Result<(), TrainError> {
        Learner::save(self, ck, current)
    }

    fn restore(&mut self, ck: &Path, saved: Model, meta: &PolicyMeta) -> Result<(), TrainError> {
        Learner::restore(self, ck, saved, meta)
    }

    fn align(
        &mut self,
        demos: &Demonstrations,
        cfg: &AlignmentConfig,
        meta: &PolicyMeta,
        rng: &mut SmallRng,
    ) -> (f64, f64) {
        Learner::align(self, demos, cfg, meta, rng)
    }
}

/// Steps the environments of `x` with `acts` (decided on the windows
/// `obs`) and keeps each row's transition in `replay`, the action as
/// `kept` says: what an off-policy learner (DDQN, SAC) does at every
/// decision. A finished episode's next window is the new episode's;
/// `done` masks it out of the targets. `sources` holds each row's source.
pub(crate) fn step_into_replay(
    replay: &mut Replay,
    x: &mut Experience,
    (obs, acts): (&[f32], &[Sampled]),
    kept: impl Fn(&Sampled) -> f32,
    sources: &[Source],
) {
    let width = x.meta.obs_dim * x.meta.spec.window;
    let actions: Vec<f64> = acts.iter().map(|a| a.env_action).collect();
    let (rew, done) = x.venv.step(&actions, x.norm, true);
    let next = x.venv.current();
    for (i, a) in acts.iter().enumerate() {
        let row = i * width..(i + 1) * width;
        replay.push(
            &obs[row.clone()],
            kept(a),
            rew[i],
            &next[row],
            done[i],
            sources[i],
        );
    }
}

/// burn's optimiser state in `optim.bin`.
const OPTIMIZER: &str = "optim.bin";

/// Writes burn's optimiser state into the checkpoint directory `ck`.
pub(crate) fn save_optimizer(ck: &Path, optim: &ModuleOptimizer) -> Result<(), TrainError> {
    save_optimizer_as(ck, OPTIMIZER, optim)
}

/// Reads back what [`save_optimizer`] wrote.
pub(crate) fn restore_optimizer(ck: &Path, optim: &mut ModuleOptimizer) -> Result<(), TrainError> {
    restore_optimizer_as(ck, OPTIMIZER, optim)
}

/// Writes the state of a learner's further optimiser as `name` in `ck`
/// (SAC's twin critics have their own).
pub(crate) fn save_optimizer_as(
    ck: &Path,
    name: &str,
    optim: &ModuleOptimizer,
) -> Result<(), TrainError> {
    let path = ck.join(name);
    let bytes = optim
        .into_bytes()
        .map_err(|e| TrainError::io(&path, std::io::Error::other(format!("{e:?}"))))?;
    write_atomic(&path, &bytes)
}

/// Reads back what [`save_optimizer_as`] wrote.
pub(crate) fn restore_optimizer_as(
    ck: &Path,
    name: &str,
    optim: &mut ModuleOptimizer,
) -> Result<(), TrainError> {
    let path = ck.join(name);
    let bytes = std::fs::read(&path).map_err(|e| TrainError::io(&path, e))?;
    *optim = optim
        .clone()
        .from_bytes(burn::tensor::Bytes::from_bytes_vec(bytes))
        .map_err(|e| TrainError::Corrupt {
            path: path.display().to_string(),
            message: format!("{e:?}"),
        })?;
    Ok(())
}

/// The fused backends' optimiser state (Adam's moments), beside burn's
/// `optim.bin`.
const FUSED_OPTIMIZER: &str = "fused-optim.json";

/// Writes a fused backend's optimiser state into the checkpoint `ck`.
pub(crate) fn save_fused_optimizer(ck: &Path, state: &impl Serialize) -> Result<(), TrainError> {
    let path = ck.join(FUSED_OPTIMIZER);
    let text = serde_json::to_string(state)
        .map_err(|e| TrainError::io(&path, std::io::Error::other(e)))?;
    write_atomic(&path, text.as_bytes())
}

/// Restores a fused backend's optimiser from the checkpoint `ck` through
/// `restore` (which answers whether the state fits the network). A
/// checkpoint written by the burn backend has none: Adam then starts
/// afresh.
pub(crate) fn restore_fused_optimizer<T: DeserializeOwned>(
    ck: &Path,
    restore: impl FnOnce(T) -> bool,
) -> Result<(), TrainError> {
    let path = ck.join(FUSED_OPTIMIZER);
    if !path.exists() {
        tracing::warn!("{} is missing: the optimiser starts afresh", path.display());
        return Ok(());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| TrainError::io(&path, e))?;
    let corrupt = |message: String| TrainError::Corrupt {
        path: path.display().to_string(),
        message,
    };
    let saved = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
    if restore(saved) {
        Ok(())
    } else {
        Err(corrupt("its shapes differ from the network's".into()))
    }
}

/// The target network in a checkpoint (DDQN's Q-network, SAC's V̄ with
/// its actor-critic), saved as a policy beside the trained one.
const TARGET: &str = "target";

/// Writes `model` as the checkpoint's target network, described by `meta`.
pub(crate) fn save_target(
    ck: &Path,
    meta: &PolicyMeta,
    model: Model,
    device: &Device,
) -> Result<(), TrainError> {
    let target = Policy {
        meta: meta.clone(),
        model,
        device: device.clone(),
    };
    target.save(ck, TARGET)
}

/// Reads back the target network [`save_target`] wrote; `Err` names the
/// file when it is not `kind` (`check` says whether it is).
pub(crate) fn load_target<T>(
    ck: &Path,
    device: &Device,
    (kind, check): (&str, impl FnOnce(Model) -> Option<T>),
) -> Result<T, TrainError> {
    check(Policy::load(ck, TARGET, device)?.model).ok_or_else(|| TrainError::Corrupt {
        path: ck.join(format!("{TARGET}.json")).display().to_string(),
        message: format!("not {kind}"),
    })
}

/// The checkpoint in `ck` holds another algorithm's network.
pub(crate) fn wrong_algorithm(ck: &Path) -> TrainError {
    TrainError::Corrupt {
        path: ck.display().to_string(),
        message: "the checkpoint's algorithm differs from the config's".into(),
    }
}
