//! SE-RL's low-level enhancement of the designer itself (`[evolve.finetune]`):
//! between rounds, the designing model is fine-tuned on what its designs
//! achieved so far, and designs the next rounds with the adapter. The
//! loop asks a [`Learner`] (the study layer's, which knows the model file)
//! and records each adapter in the run directory.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serl_llm::Designer;
use serl_tune::TuneConfig;

use crate::error::EvolveError;
use crate::record::CandidateResult;

/// `[evolve.finetune]`: when the designer learns, and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinetuneConfig {
    /// Fine-tune after every `every` rounds (on all pairs so far); the
    /// last round is followed by none (no round would use it).
    pub every: usize,
    /// `[evolve.finetune.tune]`: the adapter and its training (rank,
    /// objective, learning rate, epochs, …; `serl llm finetune` takes the
    /// same settings).
    #[serde(default)]
    pub tune: TuneConfig,
}

impl FinetuneConfig {
    /// Checks the table, naming the field at fault.
    pub fn validate(&self) -> Result<(), String> {
        if self.every == 0 {
            return Err("evolve.finetune.every must be at least 1".into());
        }
        self.tune
            .check()
            .map_err(|e| format!("[evolve.finetune.tune]: {e}"))
    }

    /// Whether the designer learns after round `j` (from 0) of `rounds`.
    pub fn after(&self, j: usize, rounds: usize) -> bool {
        (j + 1).is_multiple_of(self.every) && j + 1 < rounds
    }
}

/// What one fine-tuning did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    /// The round (from 1) after which it ran.
    pub iteration: usize,
    /// The adapter now in use (inside the run directory), or none when
    /// there was nothing to learn from yet.
    pub adapter: Option<PathBuf>,
    /// Examples trained and held out.
    pub examples: usize,
    /// The held-out loss before and after (the base model's, the kept
    /// adapter's).
    pub heldout_loss: Option<(f64, f64)>,
    /// Seconds the training took, over every process that worked on it
    /// (the adapter's own record, so a resumed run that reads it back
    /// keeps it); without an adapter, the seconds spent finding too few
    /// examples.
    pub secs: f64,
}

/// Fine-tunes the designer between rounds.
pub trait Learner {
    /// Trains on the pairs of `all` (every candidate so far) after round
    /// `iteration` (from 0), into `dir`, and sets the adapter on
    /// `designer`. A resumed run calls it again with the same candidates:
    /// the adapter already in `dir` is read back, not trained again.
    fn learn(
        &mut self,
        iteration: usize,
        all: &[CandidateResult],
        dir: &std::path::Path,
        designer: &mut dyn Designer,
    ) -> Result<Learned, EvolveError>;
}
