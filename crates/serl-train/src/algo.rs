//! Which learner a config names: the list of learners, a leaf that
//! policies, configs and the registry all read. What each one is, and how
//! it is built, is the registry's (`registry.rs`); its name on a command
//! line and in a config is its `Learner::KEY`.

use serde::{Deserialize, Serialize};

/// Which learner produced the network (`[train] algo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algo {
    /// Proximal policy optimisation (an actor-critic).
    Ppo,
    /// Double DQN (a Q-network over discrete actions).
    Ddqn,
    /// Soft actor-critic (a tanh-squashed Gaussian actor, twin soft Q
    /// networks and a learned entropy temperature).
    Sac,
}

impl Algo {
    /// Every learner, in the order commands list them.
    pub const ALL: [Algo; 3] = [Algo::Ppo, Algo::Ddqn, Algo::Sac];
}
