//! Which learner a config names: its key in the registry (`ppo`, `ddqn`,
//! `sac`), a leaf that policies, configs and the registry all read. What
//! each one is, and how it is built, is the registry's (`registry.rs`):
//! a new learner adds no name here.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which learner produced the network (`[train] algo`): a registered
/// learner's key. It reads and writes as the key (`"ppo"`), as configs
/// and policy files have always spelt it; a name no learner has is
/// refused when read.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Algo(&'static str);

impl Algo {
    /// Proximal policy optimisation: the default learner, and the one the
    /// search's designs train with.
    pub const PPO: Algo = Algo("ppo");
    /// Double DQN: the paper's value-based baseline.
    pub const DDQN: Algo = Algo("ddqn");

    /// The learner whose key is `key`; only the registry makes one from a
    /// learner's `KEY`, so every `Algo` names a registered learner.
    pub(crate) const fn from_key(key: &'static str) -> Algo {
        Algo(key)
    }

    /// Its name in configs and on command lines (`ppo`).
    pub fn key(self) -> &'static str {
        self.0
    }
}

impl std::fmt::Debug for Algo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::fmt::Display for Algo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl Serialize for Algo {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0)
    }
}

impl<'de> Deserialize<'de> for Algo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(D::Error::custom)
    }
}
