//! `[plant]` in a study file: the planted strengths a study runs its arms
//! on (a leaf: the study file reads it, `planted_study.rs` runs it).

use serde::{Deserialize, Serialize};
use serl_data::PlantConfig;

/// `[plant]` in a study file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlantSweep {
    /// The forecast strengths (information coefficients) planted, one copy
    /// of the data each; include 0.
    pub strengths: Vec<f64>,
    /// How far ahead the forecast looks, minutes (best: the task's
    /// decision interval).
    #[serde(default = "default_horizon")]
    pub horizon: u16,
    /// Seed of the forecasts' noise.
    #[serde(default)]
    pub seed: u64,
}

fn default_horizon() -> u16 {
    30
}

impl PlantSweep {
    /// Checks the strengths, naming the field.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.strengths.is_empty() {
            return Err("strengths: give at least one (0 measures the false discoveries)".into());
        }
        for (i, &s) in self.strengths.iter().enumerate() {
            self.config(s)
                .validate()
                .map_err(|e| format!("strengths[{i}]: {e}"))?;
            if self.strengths[..i].contains(&s) {
                return Err(format!("strengths[{i}]: {s} is given twice"));
            }
        }
        Ok(())
    }

    /// What to plant at `strength`.
    pub(crate) fn config(&self, strength: f64) -> PlantConfig {
        PlantConfig {
            strength,
            horizon_minutes: self.horizon,
            seed: self.seed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_without_strengths_or_with_a_bad_one_is_refused() {
        let mut p = PlantSweep {
            strengths: vec![],
            horizon: 30,
            seed: 0,
        };
        assert!(p.check().unwrap_err().contains("strengths"));
        p.strengths = vec![0.0, 1.5];
        assert!(p.check().unwrap_err().contains("strengths[1]"));
        p.strengths = vec![0.0, 0.0];
        assert!(p.check().unwrap_err().contains("twice"));
        p.strengths = vec![0.0, 0.1, 0.3];
        p.check().unwrap();
    }
}
