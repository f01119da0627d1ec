//! Transition supervision: an auxiliary head on the actor's trunk learns
//! to predict the next observation's market features (the returns, the
//! volume and the spread) from the trunk's features and the action taken,
//! and its squared error joins PPO's loss with a weight.
//!
//! This is the representation-learning half of the systems that alternate
//! transition supervision with policy optimisation: the trunk is pushed to
//! encode what moves the market next, which the policy then reads. The
//! fused learner implements the head ([`crate::parts::FusedPpo`]); each
//! update's mean prediction error is logged beside the error of
//! predicting "no change" (the current features), so a reader sees
//! whether the head learned anything.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use serl_env::obs::RETURNS;
use serl_env::OBS_DIM;

use crate::rollout::Rollout;
use crate::TrainError;

/// `[train.transition]`: the auxiliary next-observation head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TransitionConfig {
    /// Weight of the prediction loss added to PPO's; 0 switches the head
    /// off.
    pub weight: f64,
}

impl Default for TransitionConfig {
    fn default() -> Self {
        TransitionConfig { weight: 0.0 }
    }
}

impl TransitionConfig {
    /// Whether the head is off (and left out of saved configs).
    pub fn is_off(&self) -> bool {
        self.weight == 0.0
    }

    pub(crate) fn check(&self) -> Result<(), TrainError> {
        let bad = |message: String| {
            Err(TrainError::Config {
                field: "transition.weight".into(),
                message,
            })
        };
        if !(0.0..=100.0).contains(&self.weight) {
            return bad(format!("{} is not in [0, 100]", self.weight));
        }
        Ok(())
    }
}

/// The observation columns the head predicts: the returns over each
/// horizon, the last minute's volume and the spread.
pub const MARKET: Range<usize> = (OBS_DIM - RETURNS - 2)..OBS_DIM;

/// What the head is taught on one rollout: for every decision, the next
/// decision's market features (normalised as the policy saw them) and the
/// current ones, with a mask that drops a decision ending its episode
/// (its next row is another episode's) and each environment's last.
#[derive(Debug, Clone, Default)]
pub(crate) struct NextMarket {
    pub next: Vec<f32>,
    pub current: Vec<f32>,
    pub mask: Vec<bool>,
}

impl NextMarket {
    /// The targets of every decision of `r`, whose observations are
    /// `obs_dim` wide (a row holds a window of them, newest last).
    pub fn of(r: &Rollout, obs_dim: usize) -> Self {
        let m = MARKET.len();
        let n = r.n_envs;
        let newest = r.width - obs_dim;
        let features = |i: usize| {
            let at = i * r.width + newest;
            &r.obs[at + MARKET.start..at + MARKET.end]
        };
        let mut t = NextMarket {
            next: vec![0.0; r.raw.len() * m],
            current: vec![0.0; r.raw.len() * m],
            mask: vec![false; r.raw.len()],
        };
        for s in 0..r.steps {
            for e in 0..n {
                let i = s * n + e;
                t.current[i * m..(i + 1) * m].copy_from_slice(features(i));
                if s + 1 < r.steps && !r.done[i] {
                    t.next[i * m..(i + 1) * m].copy_from_slice(features(i + n));
                    t.mask[i] = true;
                }
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_the_next_row_of_the_same_episode() {
        // 2 environments, 3 steps, observations of OBS_DIM columns, a
        // window of one: each row's market columns hold its index.
        let (n, steps) = (2, 3);
        let mut obs = vec![0f32; n * steps * OBS_DIM];
        for i in 0..n * steps {
            for c in MARKET {
                obs[i * OBS_DIM + c] = i as f32;
            }
        }
        let r = Rollout {
            n_envs: n,
            steps,
            width: OBS_DIM,
            obs,
            raw: vec![0.0; n * steps],
            done: vec![false, true, false, false, false, false],
            ..Default::default()
        };
        let t = NextMarket::of(&r, OBS_DIM);
        assert_eq!(t.mask, [true, false, true, true, false, false]);
        let m = MARKET.len();
        assert_eq!(t.next[0], 2.0, "env 0's next row is row 2");
        assert_eq!(t.next[2 * m], 4.0);
        assert_eq!(t.current[3 * m], 3.0);
    }
}
