//! The multi-agent scenario: several execution agents in one simulated
//! market, and what they tell each other.
//!
//! [`TeamConfig`] sets it up two ways, which combine:
//!
//! - **Learning agents** (`agents` = N ≥ 2): a team that learns together.
//!   Every parent order is worked by N agents at once
//!   ([`serl_env::team_orders`]), stepped jointly in one market
//!   ([`serl_env::TeamEpisode`]); they share one policy (each sees its
//!   role in its observation) and learn it with MAPPO (a centralised
//!   critic over the whole team's observations, [`Critic::Centralized`])
//!   or independent PPO ([`Critic::Local`]). A cooperative team shares one
//!   reward, the team's; competitors each have their own.
//! - **Scripted peers** (`peers`): other execution agents in every
//!   dynamic episode working their own orders at an even pace (TWAP),
//!   whose trades move the same price.
//!
//! With a [`Communication`] design each agent broadcasts a few values
//! computed by feature programs over its own observation; every agent
//! hears the others' messages combined (mean, sum, attention or max) as extra
//! observation columns, in training and wherever the team plays
//! afterwards (validation, backtests). A static episode of a single agent
//! has no one to hear: its message columns are zero.

use serde::{Deserialize, Serialize};
use serl_design::Communication;
use serl_env::TeamMode;
use serl_expr::State;

use crate::TrainError;

/// What a team's critic sees.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Critic {
    /// MAPPO: the value of the whole team's state: an agent's own input
    /// and every member's newest observation (in member order).
    #[default]
    Centralized,
    /// Independent PPO: each agent's value of its own observation.
    Local,
}

impl Critic {
    /// The learner's name in reports: `mappo` or `ippo`.
    pub fn algo_name(self) -> &'static str {
        match self {
            Critic::Centralized => "mappo",
            Critic::Local => "ippo",
        }
    }
}

/// Peers in every dynamic episode, and how agents talk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TeamConfig {
    /// Learning agents working each parent order together (1: a single
    /// learner; 2 to [`serl_env::MAX_AGENTS`]: a team).
    pub agents: usize,
    /// How a team of learning agents shares the work and is judged.
    pub mode: TeamMode,
    /// What a team's critic sees: MAPPO's whole team, or each agent alone
    /// (independent PPO).
    pub critic: Critic,
    /// Scripted peers (TWAP) per dynamic episode (none by default).
    pub peers: usize,
    /// Each peer's order as a multiple of the learner's (of a team's
    /// parent order).
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
            agents: 1,
            mode: TeamMode::Cooperative,
            critic: Critic::Centralized,
            peers: 0,
            peer_size: 1.0,
            same_side: true,
            communication: None,
        }
    }
}

/// Most peers an episode may have.
pub const MAX_PEERS: usize = 16;

/// Columns every team member's observation adds after the heard
/// messages: its place in the team and the team's size.
pub const ROLE_NAMES: [&str; 2] = ["agent_role", "team_size"];

/// Member `k`'s role columns in a team of `agents`: its place in the
/// team (0 for the first, 1 for the last) and the team's size over
/// [`serl_env::MAX_AGENTS`].
pub fn role_columns(k: usize, agents: usize) -> [f32; 2] {
    let place = if agents > 1 {
        k as f32 / (agents - 1) as f32
    } else {
        0.0
    };
    [place, agents as f32 / serl_env::MAX_AGENTS as f32]
}

impl TeamConfig {
    /// Checks the settings; the error names the field (`team.<field>`).
    pub fn validate(&self) -> Result<(), TrainError> {
        let bad = |field: &str, message: String| TrainError::Config {
            field: format!("team.{field}"),
            message,
        };
        if !(1..=serl_env::MAX_AGENTS).contains(&self.agents) {
            return Err(bad(
                "agents",
                format!("{}; give 1 to {}", self.agents, serl_env::MAX_AGENTS),
            ));
        }
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

    /// Whether learning agents work each order together (`agents` ≥ 2).
    pub fn learns_together(&self) -> bool {
        self.agents > 1
    }

    /// Observation columns the messages add.
    pub fn message_dims(&self) -> usize {
        self.communication
            .as_ref()
            .map_or(0, |c| c.broadcast().len())
    }

    /// Observation columns a team member's role adds (none alone).
    pub fn role_dims(&self) -> usize {
        if self.learns_together() {
            ROLE_NAMES.len()
        } else {
            0
        }
    }

    /// The names of the message columns (`heard_<broadcast name>`).
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

    /// Agent `k` broadcasts what its programs say about `obs` (a
    /// broadcast reads only what every agent sees: no planted signal).
    pub fn broadcast(&mut self, k: usize, obs: &[f32]) {
        self.comm
            .broadcast()
            .eval_into(&mut self.states[k], obs, 0.0, &mut self.messages[k]);
    }

    /// What the learner (agent 0) hears, written into `out`.
    pub fn heard(&self, out: &mut [f32]) {
        self.heard_by(0, out)
    }

    /// What agent `k` hears from the others, written into `out`.
    pub fn heard_by(&self, k: usize, out: &mut [f32]) {
        if self.messages.len() < 2 {
            out.fill(0.0);
            return;
        }
        for (o, v) in out.iter_mut().zip(self.comm.aggregate(&self.messages, k)) {
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
