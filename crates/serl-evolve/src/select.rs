//! `[evolve.select]`: when a run recommends its chosen design over plain
//! PPO (a leaf: the config reads it, the evidence stage uses it).

use serde::{Deserialize, Serialize};

/// `[evolve.select]`: how the run decides whether its choice is better
/// than plain PPO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SelectConfig {
    /// The Reality Check's level: the chosen design is recommended only
    /// where the test rejects at it.
    pub alpha: f64,
    /// The power the minimum detectable edge is stated at.
    pub power: f64,
    /// Stationary-bootstrap resamples of the days.
    pub reps: usize,
    /// Their mean block length, days. 1 (the default) resamples days
    /// independently: with a handful of days, longer blocks keep the
    /// sample's chance autocorrelation and understate the mean's spread.
    pub mean_block: f64,
    /// The most blocks of days CSCV cuts the validation days into (the
    /// largest even number that leaves a day in each).
    pub max_blocks: usize,
    /// The best designs by selection score retrained from a fresh seed and
    /// validated again, to measure the winner's curse (0: none).
    pub finalists: usize,
}

impl Default for SelectConfig {
    fn default() -> Self {
        SelectConfig {
            alpha: 0.05,
            power: 0.8,
            reps: 2000,
            mean_block: 1.0,
            max_blocks: 16,
            finalists: 0,
        }
    }
}

impl SelectConfig {
    /// Checks every field, naming the one at fault.
    pub fn validate(&self) -> Result<(), String> {
        let open = |v: f64| v > 0.0 && v < 1.0;
        if !open(self.alpha) {
            return Err(format!(
                "[evolve.select] alpha = {}: give a level in (0, 1), e.g. 0.05",
                self.alpha
            ));
        }
        if !open(self.power) {
            return Err(format!(
                "[evolve.select] power = {}: give a probability in (0, 1), e.g. 0.8",
                self.power
            ));
        }
        if self.reps == 0 {
            return Err(
                "[evolve.select] reps = 0: the SPA test needs resamples (e.g. 2000)".into(),
            );
        }
        if self.mean_block.is_nan() || self.mean_block < 1.0 {
            return Err(format!(
                "[evolve.select] mean_block = {}: a block is at least one day",
                self.mean_block
            ));
        }
        if self.max_blocks < 2 {
            return Err(format!(
                "[evolve.select] max_blocks = {}: CSCV needs at least 2 blocks",
                self.max_blocks
            ));
        }
        Ok(())
    }
}
