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
use serl_expr::{Program, State, VarSet};

use crate::features::FeatureDef;
use crate::TrainError;

/// How the messages of the other agents are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    Mean,
    Sum,
    /// Softmax-weighted by the dot product of each message with the
    /// receiving agent's own message.
    Attention,
}

/// What each execution agent broadcasts and how it hears the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Communication {
    pub broadcast: Vec<FeatureDef>,
    pub aggregate: Aggregate,
}

impl Communication {
    /// The combined message agent `me` receives from the others.
    pub fn aggregate(&self, messages: &[Vec<f64>], me: usize) -> Vec<f64> {
        let dim = self.broadcast.len();
        let others: Vec<&Vec<f64>> = messages
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != me)
            .map(|(_, m)| m)
            .collect();
        let mut out = vec![0.0; dim];
        if others.is_empty() {
            return out;
        }
        let weights: Vec<f64> = match self.aggregate {
            Aggregate::Sum => vec![1.0; others.len()],
            Aggregate::Mean => vec![1.0 / others.len() as f64; others.len()],
            Aggregate::Attention => {
                let own = &messages[me];
                let scores: Vec<f64> = others
                    .iter()
                    .map(|m| {
                        m.iter().zip(own).map(|(a, b)| a * b).sum::<f64>()
                            / (dim.max(1) as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let z: f64 = e.iter().sum();
                e.iter().map(|v| v / z).collect()
            }
        };
        for (m, w) in others.iter().zip(weights) {
            for (o, v) in out.iter_mut().zip(m.iter()) {
                *o += w * v;
            }
        }
        out
    }
}

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
    programs: Vec<Program>,
    states: Vec<Vec<State>>,
    messages: Vec<Vec<f64>>,
}

impl Channel {
    /// Programs over an agent's observation, named `obs_names`.
    pub fn compile(comm: &Communication, obs_names: &[String]) -> Result<Self, TrainError> {
        let vars = VarSet::from_names(obs_names.to_vec());
        let programs = comm
            .broadcast
            .iter()
            .map(|d| {
                Program::compile(&d.program, &vars).map_err(|e| TrainError::Config {
                    field: format!("team.communication.broadcast.{}", d.name),
                    message: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Channel {
            comm: comm.clone(),
            programs,
            states: Vec::new(),
            messages: Vec::new(),
        })
    }

    /// A new episode with `agents` agents (the learner first).
    pub fn reset(&mut self, agents: usize) {
        self.states = (0..agents)
            .map(|_| self.programs.iter().map(Program::new_state).collect())
            .collect();
        self.messages = vec![vec![0.0; self.programs.len()]; agents];
    }

    /// Agent `k` broadcasts what its programs say about `obs`.
    pub fn broadcast(&mut self, k: usize, obs: &[f32]) {
        let vals: Vec<f64> = obs.iter().map(|&v| v as f64).collect();
        for (j, p) in self.programs.iter().enumerate() {
            self.messages[k][j] = p.eval(&mut self.states[k][j], &vals);
        }
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
