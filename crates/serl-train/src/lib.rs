//! # serl-train: PPO and DDQN execution agents on burn
//!
//! The inner loop of SE-RL: train an execution policy in the static replay
//! and the dynamic market at once, re-weighting their losses adaptively.
//! How the pieces connect:
//!
//! - [`TrainConfig`]: everything a run is set with, validated with errors
//!   that name the field; it decides which learner trains
//!   ([`TrainConfig::trains_fused`]) and how many environments are dynamic.
//! - [`task`]: [`TrainEnv`], the interface rollouts step; real orders in
//!   either environment ([`ExecutionEnv`], built for a config by
//!   [`task::execution_envs`]) and a synthetic task with a closed-form
//!   optimum ([`DriftTask`]). [`WithFeatures`] appends designed state
//!   features (expression programs over the observation); [`team`] adds
//!   peer agents and the messages they broadcast.
//! - [`rollout`]: N environments stepped in parallel with one batched
//!   network call per step ([`rollout::VecEnv`]), observations normalised
//!   by a [`normalize::RunningNorm`], and GAE.
//! - [`net`]: the burn modules built from a [`NetworkSpec`] (the
//!   architecture module, `serl_design`).
//! - Learners: [`ppo`] (burn's autodiff, any network and device),
//!   [`fused`] (PPO's plain-MLP networks on the CPU without autodiff: same
//!   loss, same optimiser, several times faster) and DDQN
//!   ([`DdqnConfig`]), all with the hybrid loss
//!   L = α·L_static + β·L_dynamic, whose weights ([`LossWeights`]) move as
//!   [`HybridConfig`] says.
//! - [`train`]: the training loop (`run.rs`). It holds one learner behind
//!   one interface and calls it once per update, validates with a
//!   [`Validator`] (see [`validate`]), reports each [`UpdateRecord`] to an
//!   [`OnUpdate`] callback, and keeps a run directory: checkpoints for
//!   resume, metrics JSONL ([`read_metrics`]), the best and final policies
//!   ([`load_run_policy`]) and the training report.
//! - [`policy`]: a trained [`Policy`] at inference, saved and loaded as a
//!   burnpack file plus JSON, and [`PolicyStrategy`], which plays it in
//!   `serl-eval` backtests.
//!
//! The backend is chosen at run time by the device ([`DeviceChoice`]):
//! NdArray on the CPU by default, wgpu with the `wgpu` cargo feature.

#![deny(missing_docs)]

mod config;
mod ddqn;
mod features;
pub mod fused;
mod hybrid;
mod learner;
pub mod net;
pub mod normalize;
pub mod policy;
pub mod ppo;
mod report;
pub mod rollout;
mod run;
mod rundir;
mod session;
pub mod task;
pub mod team;
pub mod validate;

use std::path::Path;

pub use burn;
pub use config::{DeviceChoice, TrainConfig};
pub use ddqn::DdqnConfig;
pub use features::WithFeatures;
pub use hybrid::{HybridConfig, HybridMode, LossWeights};
pub use policy::{Algo, Pace, Policy, PolicyStrategy, Squash};
pub use run::{initial_policy, train, OnUpdate, TrainOutcome, TrainSetup, UpdateRecord, Validator};
pub use rundir::{load_run_policy, read_metrics, write_atomic};
pub use serl_design::{NetworkSpec, SpecError};
pub use session::TrainSession;
pub use task::{DriftTask, ExecutionEnv, Source, TrainEnv, TrainVenue};

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
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The I/O error.
        source: std::io::Error,
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
            source,
        }
    }
}
