//! The metrics a run writes: one [`UpdateRecord`] per update in
//! `metrics.jsonl`. Its form on disk is fixed (runs, reports and the
//! reward critic's replay read it back), so every learner reports through
//! it: the learner's own statistics ([`crate::UpdateStats`], from `learner.rs`) fill
//! in their fields and leave the others empty.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::files::write_atomic;
use crate::TrainError;

/// One line of `metrics.jsonl`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UpdateRecord {
    /// The update's index, from 0.
    pub update: usize,
    /// Environment steps taken by the end of the update, over all
    /// environments.
    pub env_steps: usize,
    /// Seconds since the run began, over every session of a resumed run.
    pub secs: f64,
    /// Environment steps per second over this update, updates included.
    pub steps_per_sec: f64,
    /// Mean minimised loss, α·L_static + β·L_dynamic, over the update's
    /// minibatches (DDQN: gradient steps; 0 before learning starts).
    pub loss: f64,
    /// Mean loss of the static samples (`None` without any).
    pub loss_static: Option<f64>,
    /// Mean loss of the dynamic samples (`None` without any).
    pub loss_dynamic: Option<f64>,
    /// Weight of the static loss after the update.
    pub alpha: f64,
    /// Weight of the dynamic loss after the update.
    pub beta: f64,
    /// PPO's clipped surrogate loss (`None` for DDQN).
    pub policy_loss: Option<f64>,
    /// PPO's value loss (`None` for DDQN).
    pub value_loss: Option<f64>,
    /// PPO's policy entropy (`None` for DDQN).
    pub entropy: Option<f64>,
    /// PPO's estimated KL divergence from the rollout's policy (`None` for
    /// DDQN).
    pub approx_kl: Option<f64>,
    /// DDQN's exploration rate ε at the update's start (`None` for PPO).
    pub epsilon: Option<f64>,
    /// A learner's own figures beyond the fields above, each written as a
    /// field of the line (SAC's `temperature`: its entropy temperature
    /// after the update), so that a new learner's figures need no field
    /// here.
    #[serde(flatten)]
    pub learner: std::collections::BTreeMap<String, f64>,
    /// Training episodes that finished during the update.
    pub episodes: usize,
    /// Their mean summed reward (`None` when none finished).
    pub episode_reward: Option<f64>,
    /// Their mean PA, bps.
    pub episode_pa: Option<f64>,
    /// Mean PA, bps, of those played in static environments.
    pub episode_pa_static: Option<f64>,
    /// Mean PA, bps, of those played in dynamic environments.
    pub episode_pa_dynamic: Option<f64>,
    /// Validation PA, bps, when this update validated.
    pub val_pa: Option<f64>,
    /// The transition head's mean squared error predicting the next
    /// observation's market features (normalised), when it trains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition_error: Option<f64>,
    /// The same error for predicting no change (the current features).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transition_no_change: Option<f64>,
    /// The reward terms' weights after this update (and its review, at a
    /// review update): those the next update trains with, when a reward
    /// critic re-weights them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward_weights: Option<Vec<f64>>,
}

/// Reads a run's `metrics.jsonl`: one [`UpdateRecord`] per update (none
/// when the file does not exist).
pub fn read_metrics(path: &Path) -> Result<Vec<UpdateRecord>, TrainError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(TrainError::io(path, e)),
    };
    // A line cut short by a kill is dropped; every whole line is kept.
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

pub(crate) fn write_metrics(path: &Path, records: &[UpdateRecord]) -> Result<(), TrainError> {
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).unwrap_or_default());
        text.push('\n');
    }
    write_atomic(path, text.as_bytes())
}

pub(crate) fn append_metrics(path: &Path, r: &UpdateRecord) -> Result<(), TrainError> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| TrainError::io(path, e))?;
    let line = serde_json::to_string(r).unwrap_or_default();
    writeln!(f, "{line}").map_err(|e| TrainError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line every metrics file has held so far, field by field: a
    /// learner's statistics may fill fields in, never move or rename them.
    #[test]
    fn a_record_serialises_as_before() {
        let rec = UpdateRecord {
            update: 3,
            env_steps: 4096,
            loss: 0.5,
            loss_static: Some(0.25),
            alpha: 0.5,
            beta: 0.5,
            policy_loss: Some(-0.125),
            epsilon: None,
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&rec).unwrap(),
            r#"{"update":3,"env_steps":4096,"secs":0.0,"steps_per_sec":0.0,"loss":0.5,"loss_static":0.25,"loss_dynamic":null,"alpha":0.5,"beta":0.5,"policy_loss":-0.125,"value_loss":null,"entropy":null,"approx_kl":null,"epsilon":null,"episodes":0,"episode_reward":null,"episode_pa":null,"episode_pa_static":null,"episode_pa_dynamic":null,"val_pa":null}"#
        );
    }
}
