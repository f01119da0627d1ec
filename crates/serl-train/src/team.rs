//! The multi-agent scenario: several execution agents in one simulated
//! market, and what they tell each other.
//!
//! [`TeamConfig`] adds peers to every dynamic episode: other execution agents
//! working parent orders over the same window (at an even pace), whose
//! trades move the same price. With a [`Communication`] design each agent
//! broadcasts a few values computed by feature programs over its own
//! observation; the learner hears the others' messages combined (mean, sum
//! or attention) as extra observation columns, so its policy can react to
//! what the others are doing. A static episode has no one to hear: its
//! message columns are zero.

use serde::{Deserialize, Serialize};
use serl_design::{Communication, FeatureSet};
use serl_expr::State;

use crate::TrainError;

/// Peers in every dynamic episode, and how agents talk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TeamConfig {
    /// Other execution agents per dynamic episode.
    pub peers: usize,
    /// Each peer's order as a multiple of the learner's.
    pub peer_size: f64,
    /// Peers trade the learner's side (a crowded trade) or the opposite one.
    pub same_side: bool,
    /// What the agents broadcast and how the learner hears it (the
    /// communication module); none means no messages.
    pub communication: Option<Communication>,
}

impl Default for TeamConfig {
    fn default() -> Self {
        TeamConfig {
            peers: 2,
            peer_size: 1.0,
            same_side: true,
            communication: None,
        }
    }
}

/// Most peers an episode may have.
pub const MAX_PEERS: usize = 16;

impl TeamConfig {
    /// Checks the settings; the error names the field (`team.<field>`).
    pub fn validate(&self) -> Result<(), TrainError> {
        let bad = |field: &str, message: String| TrainError::Config {
            field: format!("team.{field}"),
            message,
        };
        if self.peers > MAX_PEERS {
            return Err(bad("peers", format!("{}; at most {MAX_PEERS}", self.peers)));
        }
        if !(self.peer_size > 0.0 && self.peer_size <= 100.0) {
            return Err(bad(
                "peer_size",
                format!("{} is not in (0, 100]", self.peer_size),
            ));
        }
        Ok(())
    }

    /// Observation columns the messages add.
    pub fn message_dims(&self) -> usize {
        self.communication.as_ref().map_or(0, |c| c.broadcast.len())
    }

    /// The names of those columns (`heard_<broadcast name>`).
    pub fn message_names(&self) -> Vec<String> {
        self.communication.as_ref().map_or(Vec::new(), |c| {
            c.broadcast
                .iter()
                .map(|d| format!("heard_{}", d.name))
                .collect()
        })
    }
}

/// Compiled broadcast programs, with one window state per agent.
#[derive(Debug, Clone)]
pub struct Channel {
    comm: Communication,
    programs: FeatureSet,
    states: Vec<Vec<State>>,
    messages: Vec<Vec<f64>>,
}

impl Channel {
    /// Programs over an agent's observation, named `obs_names`.
    pub fn compile(comm: &Communication, obs_names: &[String]) -> Result<Self, TrainError> {
        let programs =
            FeatureSet::compile(&comm.broadcast, obs_names).map_err(|e| TrainError::Config {
                field: e.field("team.communication.broadcast"),
                message: e.message,
            })?;
        Ok(Channel {
            comm: comm.clone(),
            programs,
            states: Vec::new(),
            messages: Vec::new(),
        })
    }

    /// A new episode with `agents` agents (the learner first).
    pub fn reset(&mut self, agents: usize) {
        self.states = (0..agents).map(|_| self.programs.states()).collect();
        self.messages = vec![vec![0.0; self.programs.len()]; agents];
    }

    /// Agent `k` broadcasts what its programs say about `obs`.
    pub fn broadcast(&mut self, k: usize, obs: &[f32]) {
        self.programs
            .eval_into(&mut self.states[k], obs, &mut self.messages[k]);
    }

    /// What the learner (agent 0) hears, written into `out`.
    pub fn heard(&self, out: &mut [f32]) {
        if self.messages.len() < 2 {
            out.fill(0.0);
            return;
        }
        for (o, v) in out.iter_mut().zip(self.comm.aggregate(&self.messages, 0)) {
            *o = v as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serl_design::{Aggregate, FeatureDef};

    fn comm(aggregate: Aggregate) -> Communication {
        Communication {
            broadcast: vec![FeatureDef {
                name: "left".into(),
                program: "inv".into(),
            }],
            aggregate,
        }
    }

    #[test]
    fn the_learner_hears_the_others_combined() {
        let names = vec!["inv".to_string()];
        let mut ch = Channel::compile(&comm(Aggregate::Mean), &names).unwrap();
        ch.reset(3);
        for (k, v) in [0.9f32, 0.2, 0.6].iter().enumerate() {
            ch.broadcast(k, &[*v]);
        }
        let mut out = [0.0f32];
        ch.heard(&mut out);
        assert!((out[0] - 0.4).abs() < 1e-6, "{out:?}");
        let mut sum = Channel::compile(&comm(Aggregate::Sum), &names).unwrap();
        sum.reset(1);
        sum.broadcast(0, &[0.5]);
        sum.heard(&mut out);
        assert_eq!(out[0], 0.0, "alone, the learner hears nothing");
        let bad = Communication {
            broadcast: vec![FeatureDef {
                name: "x".into(),
                program: "invv".into(),
            }],
            aggregate: Aggregate::Mean,
        };
        let err = Channel::compile(&bad, &names).unwrap_err().to_string();
        assert!(err.contains("team.communication.broadcast.x"), "{err}");
    }
}
