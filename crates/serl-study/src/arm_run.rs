//! What one arm-seed run of a designer study came to, as the study keeps
//! it: what the study's runs write and its report reads.

use serde::{Deserialize, Serialize};
use serl_evolve::PairedScore;

/// What one arm-seed's run came to, as the study keeps it
/// (`OUT/ARM/seedS/study-run.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArmRun {
    /// The arm.
    pub arm: String,
    /// The search seed.
    pub seed: u64,
    /// The study's score of the best design so far after each candidate
    /// (invalid ones included: they spent the designer's budget).
    pub curve: Vec<Option<f64>>,
    /// The design the run chose, by its own ranking.
    pub chosen: String,
    /// The chosen design's daily edge over plain PPO on validation.
    pub chosen_paired: Option<PairedScore>,
    /// The study's score of the chosen design.
    pub chosen_score: Option<f64>,
    /// The chosen design's reward program.
    pub chosen_reward: String,
    /// Candidates made (designed and low-level trials).
    pub candidates: usize,
    /// Designed candidates that were valid.
    pub valid: usize,
    /// Designed candidates.
    pub designed: usize,
    /// Tokens the designer read and wrote.
    pub tokens: u64,
    /// Wall seconds of the run.
    pub secs: f64,
    /// Per operator: (written, valid), from the program database.
    pub operators: std::collections::BTreeMap<String, (usize, usize)>,
    /// The best and worst designs by the study's score: (key, score,
    /// reward program).
    pub best_designs: Vec<(String, f64, String)>,
    /// The worst scored designs.
    pub worst_designs: Vec<(String, f64, String)>,
}
