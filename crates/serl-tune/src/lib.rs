//! # serl-tune: the designer learns from its results
//!
//! SE-RL's low-level enhancement fine-tunes the designing model on what
//! its designs achieved. This crate trains a LoRA adapter ([`Lora`]) on
//! the embedded model (`serl-local`) in-process:
//!
//! - **The network** ([`FloatModel`]): the GGUF file's weights dequantized
//!   to f32, the same layout as the engine's decoder (`llama`, `gemma3`),
//!   frozen; the adapter's matrices are the only variables. candle's
//!   autograd differentiates it (candle already reads the file, and the
//!   engine's tests use it as their reference; see `docs/llm.md`).
//! - **The signal is the reply:** a prompt's keys and values are computed
//!   once without gradients ([`FloatModel::cache`]) and shared by every
//!   example on that prompt (a round's candidates share their module's
//!   prompt), so an example costs about one reply's forward and backward.
//!   (candle's f32 products read a prompt as fast as the engine's
//!   quantized pass does, measured: so the cache is the float network's
//!   own, exact.)
//! - **Objectives** ([`Objective`]): SFT (the chosen reply's
//!   log-likelihood) and DPO against the frozen base.
//! - **Training** ([`train`]): seeded, gradients clipped by their global
//!   norm, a held-out share of the examples for early stopping, a
//!   checkpoint after each prompt group so that a killed run resumes to
//!   the very adapter an uninterrupted run writes.

#![deny(missing_docs)]

mod lora;
mod model;
mod optim;
mod train;

use serde::{Deserialize, Serialize};
use serl_local::Target;

pub use lora::Lora;
pub use model::{FloatModel, KvCache};
pub use train::{train, EpochLog, Progress, StepLog, TuneReport};

/// What can go wrong fine-tuning.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// The model file (from `serl-local`).
    #[error(transparent)]
    Local(#[from] serl_local::LocalError),
    /// The model's tensors do not fit the metadata.
    #[error("the model: {0}")]
    Model(String),
    /// A tensor operation failed.
    #[error("a tensor operation failed: {0}")]
    Tensor(#[from] candle_core::Error),
    /// The examples cannot be trained on.
    #[error("the examples: {0}")]
    Data(String),
    /// An invalid setting.
    #[error("the fine-tuning config: {0}")]
    Config(String),
    /// A checkpoint cannot be read or written, or belongs to another run.
    #[error("the checkpoint: {0}")]
    Checkpoint(String),
}

/// What the adapter learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Objective {
    /// The chosen reply's log-likelihood, per token.
    Sft,
    /// Direct preference optimization against the frozen base: the chosen
    /// reply made likelier than the rejected one, relative to the base.
    Dpo,
}

impl Objective {
    /// Every objective's name, as configs spell it and the command line
    /// lists it (with `-` for `_`).
    pub const NAMES: [&'static str; 2] = ["sft", "dpo"];
}

/// One example: a prompt's tokens (rendered with the model's chat
/// template), the reply to learn, and for preferences the reply to avoid.
#[derive(Debug, Clone, PartialEq)]
pub struct Example {
    /// The rendered prompt, the reply's first token to follow.
    pub prompt: Vec<u32>,
    /// The better reply.
    pub chosen: Vec<u32>,
    /// The worse reply (DPO); `None`: SFT only.
    pub rejected: Option<Vec<u32>>,
}

/// The fine-tuning settings (`[evolve.finetune]`, `serl llm finetune`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TuneConfig {
    /// SFT or DPO.
    pub objective: Objective,
    /// The adapter's rank.
    pub rank: usize,
    /// Updates are scaled by `alpha / rank`.
    pub alpha: f32,
    /// Dropout on each update's input while training.
    pub dropout: f32,
    /// The projections adapted.
    pub targets: Vec<Target>,
    /// AdamW's learning rate.
    pub learning_rate: f64,
    /// AdamW's decoupled weight decay.
    pub weight_decay: f64,
    /// Passes over the training examples at most.
    pub epochs: usize,
    /// Examples per optimizer step (of one prompt).
    pub batch: usize,
    /// DPO's temperature.
    pub beta: f64,
    /// The gradients' global norm is clipped to this (0: not clipped).
    pub clip: f64,
    /// The share of examples held out for early stopping.
    pub holdout: f64,
    /// Epochs without a better held-out loss before stopping.
    pub patience: usize,
    /// Seeds the adapter's start, the split, the order and dropout.
    pub seed: u64,
    /// Where the training runs. Left out of the written settings when it
    /// is the CPU, so that checkpoints from before the option resume.
    #[serde(skip_serializing_if = "TuneDevice::is_cpu")]
    pub device: TuneDevice,
}

/// Where an adapter is trained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TuneDevice {
    /// The CPU (every build).
    #[default]
    Cpu,
    /// The first CUDA GPU: a build with `--features cuda`, on a machine
    /// with the CUDA toolkit.
    Cuda,
}

impl TuneDevice {
    /// Every device's name, as configs spell it and the command line
    /// lists it (with `-` for `_`).
    pub const NAMES: [&'static str; 2] = ["cpu", "cuda"];

    fn is_cpu(&self) -> bool {
        *self == TuneDevice::Cpu
    }

    /// candle's device; a clear error for CUDA in a build without it, or on
    /// a machine without a GPU.
    pub fn device(self) -> Result<candle_core::Device, TuneError> {
        match self {
            TuneDevice::Cpu => Ok(candle_core::Device::Cpu),
            TuneDevice::Cuda if !candle_core::utils::cuda_is_available() => Err(TuneError::Config(
                "`device = \"cuda\"` needs a serl built with `--features cuda` \
                     (cargo build --release -p serl --features cuda, with the CUDA toolkit's nvcc \
                     on the PATH)"
                    .into(),
            )),
            TuneDevice::Cuda => candle_core::Device::new_cuda(0)
                .map_err(|e| TuneError::Config(format!("`device = \"cuda\"`: no usable GPU: {e}"))),
        }
    }
}

impl Default for TuneConfig {
    fn default() -> Self {
        TuneConfig {
            objective: Objective::Dpo,
            rank: 8,
            alpha: 16.0,
            dropout: 0.0,
            targets: Target::ALL.to_vec(),
            learning_rate: 5e-4,
            weight_decay: 0.0,
            epochs: 3,
            batch: 4,
            beta: 0.1,
            clip: 1.0,
            holdout: 0.2,
            patience: 1,
            seed: 0,
            device: TuneDevice::Cpu,
        }
    }
}

impl TuneConfig {
    /// Checks the ranges; the error names the field.
    pub fn check(&self) -> Result<(), TuneError> {
        let bad = |f: &str, why: &str| Err(TuneError::Config(format!("`{f}` {why}")));
        if self.rank == 0 {
            return bad("rank", "must be at least 1");
        }
        if self.targets.is_empty() {
            return bad("targets", "must name at least one projection");
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return bad("dropout", "must be in [0, 1)");
        }
        if !(self.learning_rate > 0.0 && self.learning_rate.is_finite()) {
            return bad("learning_rate", "must be positive");
        }
        if self.epochs == 0 || self.batch == 0 {
            return bad("epochs/batch", "must be at least 1");
        }
        if !(0.0..1.0).contains(&self.holdout) {
            return bad("holdout", "must be in [0, 1)");
        }
        if self.beta.is_nan() || self.beta <= 0.0 || self.clip < 0.0 || self.weight_decay < 0.0 {
            return bad(
                "beta/clip/weight_decay",
                "must be positive (clip, weight_decay: or 0)",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod names_tests {
    use super::*;

    /// The command line lists [`Objective::NAMES`]: each reads as the config
    /// reads it, and every variant is listed in its place (a new one fails
    /// to compile here until it is).
    #[test]
    fn every_objective_is_named_as_the_config_names_it() {
        use serde::de::value::{Error, StrDeserializer};
        let index = |v: Objective| match v {
            Objective::Sft => 0,
            Objective::Dpo => 1,
        };
        for (i, name) in Objective::NAMES.iter().enumerate() {
            let v = Objective::deserialize(StrDeserializer::<Error>::new(name)).unwrap();
            assert_eq!(index(v), i, "{name}");
        }
    }

    /// The command line lists [`TuneDevice::NAMES`]: each reads as the config
    /// reads it, and every variant is listed in its place (a new one fails
    /// to compile here until it is).
    #[test]
    fn every_tune_device_is_named_as_the_config_names_it() {
        use serde::de::value::{Error, StrDeserializer};
        let index = |v: TuneDevice| match v {
            TuneDevice::Cpu => 0,
            TuneDevice::Cuda => 1,
        };
        for (i, name) in TuneDevice::NAMES.iter().enumerate() {
            let v = TuneDevice::deserialize(StrDeserializer::<Error>::new(name)).unwrap();
            assert_eq!(index(v), i, "{name}");
        }
    }
}
