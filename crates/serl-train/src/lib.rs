//! # serl-train: PPO and DDQN execution agents on burn
//!
//! The inner loop of SE-RL: train an execution policy in the static replay
//! and the dynamic market at once, re-weighting their losses adaptively.
//! How the pieces connect:
//!
//! - [`TrainConfig`]: everything a run is set with, validated with errors
//!   that name the field; it decides PPO's backend
//!   ([`TrainConfig::trains_fused`]) and how many environments are dynamic.
//! - Environments (`task.rs`): [`TrainEnv`], the interface rollouts step;
//!   real orders in either venue ([`ExecutionEnv`], built for a config by
//!   [`execution_envs`]) and a synthetic task with a closed-form optimum
//!   ([`DriftTask`]). [`WithFeatures`] appends designed state features
//!   (the state module's compiled programs); a [`TeamConfig`] adds
//!   scripted peers and a [`Channel`] for the messages agents broadcast,
//!   or makes a team of learning agents ([`TeamEnv`]: every order worked
//!   by N agents at once, one observation row each).
//! - Rollouts (`rollout.rs`): N environments stepped in parallel with one
//!   batched network call per step, observations normalised by a
//!   [`RunningNorm`], and GAE.
//! - [`net`]: the burn modules built from a [`NetworkSpec`] (the
//!   architecture module, `serl_design`); a [`Policy`] holds them.
//! - Learners: one public trait, [`Learner`] (its settings, its
//!   [`UpdateStats`], save and restore, its policies' shape and its fused
//!   switch, from which whether it is reproducible side by side follows),
//!   and a registry ([`registered`], [`build_learner`],
//!   [`reproducible_side_by_side`]) mapping the config's `algo` to one.
//!   [`PpoLearner`] has two backends: burn's autodiff (any network and
//!   device) and the fused learner (`fused.rs`: MLPs, layer norms and
//!   residual blocks included, on the CPU without autodiff, same loss and
//!   optimiser, several times faster); [`DdqnLearner`] learns a Q-network
//!   ([`DdqnConfig`]). All use the hybrid loss L = α·L_static +
//!   β·L_dynamic, whose weights ([`LossWeights`]) move as [`HybridConfig`]
//!   says. A new algorithm is one module implementing [`Learner`] and one
//!   arm of [`registered`]. [`parts`] exposes the pieces the benchmarks
//!   time.
//! - [`train`]: the training loop (`run.rs`). It holds one learner behind
//!   one interface ([`AnyLearner`]) and calls it once per update, validates with a
//!   [`Validator`] (usually [`static_pa`]), reports each [`UpdateRecord`]
//!   to an [`OnUpdate`] callback, and keeps a run directory: checkpoints
//!   for resume, metrics JSONL ([`read_metrics`]), the best and final
//!   policies ([`load_run_policy`]) and the training report.
//! - [`TrainSession`]: the pipeline "design + data + orders + market ->
//!   trained policy" that both `serl train` and `serl evolve` run.
//! - Policies (`policy.rs`): a trained [`Policy`] at inference, saved and
//!   loaded as a burnpack file plus JSON ([`PolicyMeta`]), and
//!   [`PolicyStrategy`], which plays it in `serl-eval` backtests.
//! - Teams (`team*.rs`): MAPPO (a centralised critic over the whole
//!   team's observations, [`Critic::Centralized`]) and independent PPO
//!   share everything above: a team's environment gives a row per member,
//!   and the critic's input rows ride along in the rollout. A trained team
//!   plays as a [`TeamPolicyStrategy`] (its members hearing each other, or
//!   silenced) and is validated by [`team_pa`] in the dynamic market.
//!
//! The backend is chosen at run time by the device ([`DeviceChoice`]):
//! NdArray on the CPU by default, wgpu with the `wgpu` cargo feature.

#![deny(missing_docs)]

mod algo;
mod align;
pub mod bench;
mod config;
mod critic;
mod ddqn;
mod envs;
mod features;
mod files;
mod fused;
mod hybrid;
mod learner;
pub mod net;
mod normalize;
mod policy;
mod policy_file;
mod policy_strategy;
mod ppo;
mod record;
mod registry;
mod replay;
mod report;
mod rollout;
mod run;
mod rundir;
mod sac;
mod session;
mod shape;
mod tables;
mod task;
mod team;
mod team_env;
mod team_play;
mod tensors;
#[cfg(test)]
mod tests;
mod transition;
mod validate;

use std::path::Path;

pub use algo::Algo;
pub use align::{AlignmentConfig, AlignmentStats};
pub use burn;
pub use config::{DeviceChoice, TrainConfig};
pub use critic::{BuiltinCritic, CriticConfig, CriticKind, CriticReview, RewardCritic};
pub use ddqn::learner::{DdqnLearner, DdqnUpdateStats};
pub use ddqn::DdqnConfig;
pub use envs::execution_envs;
pub use features::WithFeatures;
pub use files::write_atomic;
pub use hybrid::{HybridConfig, HybridMode, LossWeights};
pub use learner::{AnyLearner, Experience, Extras, Learner, UpdateStats};
pub use net::Head;
pub use normalize::RunningNorm;
pub use policy::{
    ActionShape, Model, NetworkKind, Pace, Policy, PolicyMeta, Sampled, Squash, TeamMeta,
};
pub use policy_strategy::{DecisionObserver, PolicyStrategy};
pub use ppo::learner::{PpoLearner, PpoUpdateStats};
pub use ppo::{PpoConfig, PpoStats};
pub use record::{read_metrics, UpdateRecord};
pub use registry::{build_learner, registered, reproducible_side_by_side, Registered, UnknownAlgo};
pub use report::updates_table;
pub use rollout::EpisodeStat;
pub use run::{train, OnUpdate, TrainOutcome, TrainProfile, TrainSetup, Validator};
pub use rundir::load_run_policy;
pub use sac::learner::{SacLearner, SacUpdateStats};
pub use sac::{SacConfig, SacStats};
pub use serl_design::{NetworkSpec, SpecError};
pub use serl_env::Source;
pub use session::TrainSession;
pub use tables::{LearnerTables, Settings};
pub use task::{env_rng, DriftTask, ExecutionEnv, TrainEnv};
pub use team::{role_columns, Channel, Critic, TeamConfig, MAX_PEERS, ROLE_NAMES};
pub use team_env::TeamEnv;
pub use team_play::{team_pa, TeamPolicyStrategy};
pub use transition::TransitionConfig;
pub use validate::static_pa;

/// The learners' inner parts, public for the criterion benches and `serl
/// bench train`, which time one update and the environments alone; a
/// training needs none of them ([`train`] and [`TrainSession`] build and
/// drive them).
pub mod parts {
    pub use crate::fused::{FusedDdqn, FusedPpo};
    pub use crate::net::ActorCritic;
    pub use crate::ppo::{optimizer as ppo_optimizer, update as ppo_update};
    pub use crate::rollout::{Rollout, VecEnv};
}

/// What can go wrong setting up, running, saving or loading a training.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The network spec is invalid for the observation.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A setting is out of range, or the setup does not fit it.
    #[error("train config, {field}: {message}")]
    Config {
        /// The setting's path, e.g. `ppo.gamma`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A file or directory cannot be read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file or directory.
        path: String,
        /// The I/O error (in the message, not a source: a chain of
        /// sources would say it twice).
        error: std::io::Error,
    },
    /// A saved file (policy, checkpoint, run marker) does not parse, or
    /// does not fit the network or algorithm it is loaded for.
    #[error("{path} is damaged: {message}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// The device asked for is not compiled into this build.
    #[error("device {0} is not available in this build (rebuild with `--features wgpu`)")]
    Device(String),
}

impl TrainError {
    /// An [`TrainError::Io`] error about `path`.
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        TrainError::Io {
            path: path.display().to_string(),
            error: source,
        }
    }
}
