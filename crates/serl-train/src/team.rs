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
use serl_design::Communication;
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
        self.communication
            .as_ref()
            .map_or(0, |c| c.broadcast().len())
    }

    /// The names of those columns (`heard_<broadcast name>`).
    pub fn message_names(&self) -> Vec<String> {
        self.communication.as_ref().map_or(Vec::new(), |c| {
            c.broadcast()
                .defs()
                .iter()
                .map(|d| format!("heard_{}", d.name))
                .collect()
        })
    }
}

/// The broadcast programs (compiled with the communication module), with
/// one window state per agent.
#[derive(Debug, Clone)]
pub struct Channel {
    comm: Communication,
    states: Vec<Vec<State>>,
    messages: Vec<Vec<f64>>,
}

impl Channel {
    /// A channel for `comm`'s programs over an agent's observation.
    pub fn new(comm: &Communication) -> Self {
        Channel {
            comm: comm.clone(),
            states: Vec::new(),
            messages: Vec::new(),
        }
    }

    /// A new episode with `agents` agents (the learner first).
    pub fn reset(&mut self, agents: usize) {
        let programs = self.comm.broadcast();
        self.states = (0..agents).map(|_| programs.states()).collect();
        self.messages = vec![vec![0.0; programs.len()]; agents];
    }

    /// Agent `k` broadcasts what its programs say about `obs`.
    pub fn broadcast(&mut self, k: usize, obs: &[f32]) {
        self.comm
            .broadcast()
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
        let left = FeatureDef {
            name: "left".into(),
            program: "inventory_left".into(),
        };
        Communication::new(&[left], aggregate).unwrap()
    }

    /// An observation whose `inventory_left` column is `v`.
    fn obs(v: f32) -> Vec<f32> {
        let names = serl_env::obs::feature_names();
        let at = names.iter().position(|n| n == "inventory_left").unwrap();
        let mut o = vec![0.0; names.len()];
        o[at] = v;
        o
    }

    #[test]
    fn the_learner_hears_the_others_combined() {
        let mut ch = Channel::new(&comm(Aggregate::Mean));
        ch.reset(3);
        for (k, v) in [0.9f32, 0.2, 0.6].iter().enumerate() {
            ch.broadcast(k, &obs(*v));
        }
        let mut out = [0.0f32];
        ch.heard(&mut out);
        assert!((out[0] - 0.4).abs() < 1e-6, "{out:?}");
        let mut sum = Channel::new(&comm(Aggregate::Sum));
        sum.reset(1);
        sum.broadcast(0, &obs(0.5));
        sum.heard(&mut out);
        assert_eq!(out[0], 0.0, "alone, the learner hears nothing");
    }

    #[test]
    fn a_configured_broadcast_program_is_checked_when_read() {
        let text = r#"
            peers = 2
            [communication]
            aggregate = "mean"
            broadcast = [{ name = "x", program = "invv" }]
        "#;
        let err = toml::from_str::<TeamConfig>(text).unwrap_err().to_string();
        assert!(err.contains("broadcast.x") && err.contains("invv"), "{err}");
    }
}
