//! # serl-train: PPO and DDQN execution agents on burn
//!
//! The inner loop of SE-RL: train an execution policy in the static replay
//! and the dynamic market at once, re-weighting their losses adaptively.
//!
//! - [`net`]: the burn modules built from a [`NetworkSpec`] (the
//!   architecture module, `serl_design`).
//! - [`task`]: [`TrainEnv`], the interface rollouts step; real orders in
//!   either environment ([`ExecutionEnv`]) and a synthetic task with a
//!   closed-form optimum ([`DriftTask`]).
//! - [`features`]: designed state features (expression programs over the
//!   observation) and [`features::WithFeatures`], which appends them.
//! - [`rollout`]: N environments stepped in parallel with one batched
//!   network call per step, and GAE.
//! - [`ppo`] and [`ddqn`]: the two learners, both with the hybrid loss
//!   L = α·L_static + β·L_dynamic of [`hybrid`]. [`fused`] trains PPO's
//!   plain-MLP networks on the CPU without autodiff (same loss, same
//!   optimiser, several times faster); other networks use burn.
//! - [`policy`]: a trained policy at inference, saved and loaded as a
//!   burnpack file plus JSON, and [`PolicyStrategy`], which plays it in
//!   `serl-eval` backtests.
//! - [`TrainConfig`]: everything a run is set with, validated with errors
//!   that name the field; it decides which learner trains
//!   ([`TrainConfig::trains_fused`]).
//! - [`run`]: the training loop, [`train`]. It holds one learner behind
//!   one interface (burn's PPO, the fused PPO learner or DDQN) and calls it
//!   once per update; run directories keep checkpoints for resume, metrics
//!   JSONL ([`read_metrics`]) and the training report.
//!
//! The backend is chosen at run time by the device: NdArray on the CPU by
//! default, wgpu with the `wgpu` cargo feature.

mod config;
pub mod ddqn;
pub mod features;
pub mod fused;
pub mod hybrid;
mod learner;
pub mod net;
pub mod normalize;
pub mod policy;
pub mod ppo;
pub mod report;
pub mod rollout;
pub mod run;
mod rundir;
mod session;
pub mod task;
pub mod team;
pub mod validate;

use std::path::Path;

pub use burn;
pub use config::{DeviceChoice, TrainConfig};
pub use hybrid::{HybridConfig, HybridMode, LossWeights};
pub use policy::{Algo, Pace, Policy, PolicyStrategy, Squash};
pub use run::{train, OnUpdate, TrainOutcome, TrainSetup, UpdateRecord, Validator};
pub use rundir::{load_run_policy, read_metrics, write_atomic};
pub use serl_design::{NetworkSpec, SpecError};
pub use session::TrainSession;
pub use task::{DriftTask, ExecutionEnv, Source, TrainEnv, TrainVenue};

#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("train config, {field}: {message}")]
    Config { field: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is damaged: {message}")]
    Corrupt { path: String, message: String },
    #[error("device {0} is not available in this build (rebuild with `--features wgpu`)")]
    Device(String),
}

impl TrainError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        TrainError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}
