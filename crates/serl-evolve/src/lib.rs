//! # serl-evolve: the SE-RL outer loop
//!
//! `serl evolve` runs here. For each iteration the designer (an LLM or the
//! builtin search, from `serl-llm`) proposes K candidate algorithms, each a
//! set of modules (`serl-modules`); every valid candidate is trained in the
//! hybrid environment (`serl-train`) and scored on the validation split
//! (`serl-eval`). The Dual-Level Enhancement Kit then improves the
//! designer's instructions from the results (high level) and tunes the
//! best design's constants with a (1+λ)-ES (low level). At the end the
//! best design is retrained with the full budget and tested once against
//! TWAP, VWAP, AC, plain PPO and DDQN on identical orders.
//!
//! - [`config`]: the `[evolve]` table.
//! - [`run`]: the loop ([`evolve`]), its run directory and resume.
//! - [`report`]: the research report and the fine-tuning dataset.
//! - [`ablation`]: the same run with one part switched off, tabulated.

pub mod ablation;
pub mod config;
pub mod report;
pub mod run;

pub use ablation::{Ablation, AblationRow};
pub use config::EvolveConfig;
pub use run::{evolve, CandidateResult, EvolveError, EvolveInputs, EvolveOutcome};
