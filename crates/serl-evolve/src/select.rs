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
    /// Blocks of days the non-test sessions are cut into (0: none). With
    /// k ≥ 2, the finalists and plain PPO are each trained k times, each
    /// time without one block, and scored on it: the recommendation's
    /// test then runs on the non-test days that did not pick the
    /// finalists, each scored by a policy that never trained on it
    /// (`crate::fold`). The search's own scores are the cascade's cheap
    /// first stage; only the finalists go on to the folds.
    pub folds: usize,
    /// Trainings per fold of each finalist and of plain PPO, from
    /// independent seeds, their PA per stock-day averaged (1: one). A
    /// fold's days share its trainings, so one unlucky training of plain
    /// PPO shifts all of them; more seeds shrink that shift.
    pub seeds: usize,
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
            folds: 0,
            seeds: 1,
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
        if self.folds == 1 {
            return Err(
                "[evolve.select] folds = 1: give 0 (no folds) or at least 2 blocks of days".into(),
            );
        }
        if self.folds >= 2 && self.finalists == 0 {
            return Err(format!(
                "[evolve.select] folds = {}: the folds score the finalists; set finalists to 1 or more",
                self.folds
            ));
        }
        if self.seeds == 0 {
            return Err(
                "[evolve.select] seeds = 0: a fold trains each design at least once".into(),
            );
        }
        if self.seeds > 1 && self.folds < 2 {
            return Err(format!(
                "[evolve.select] seeds = {}: the seeds are the folds' trainings; set folds to 2 or more",
                self.seeds
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
