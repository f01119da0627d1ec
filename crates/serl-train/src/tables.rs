//! The learners' own tables of `[train]` (`[train.ddqn]`, `[train.sac]`):
//! each learner's settings, kept typed but held by key, so that a new
//! learner brings its table with it and `TrainConfig` names none of them.
//! PPO's table is `TrainConfig::ppo` itself: its rollout length and its
//! discrete actions are every training's (placements, teams).

use std::any::Any;
use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::TrainError;

/// A learner's own settings (`Learner::Config`): read from its table,
/// checked with the rest of the config, written back where it differs
/// from its defaults.
pub trait Settings:
    Serialize + DeserializeOwned + Clone + PartialEq + Debug + Default + Send + Sync + 'static
{
    /// Checks the settings; the error names the field (`ddqn.gamma`).
    fn check(&self) -> Result<(), TrainError> {
        Ok(())
    }
}

/// [`Settings`] of any learner, behind one face.
pub(crate) trait Table: Debug + Send + Sync {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn clone_table(&self) -> Box<dyn Table>;
    fn same_as(&self, other: &dyn Table) -> bool;
    fn is_default(&self) -> bool;
    fn check(&self) -> Result<(), TrainError>;
    fn to_value(&self) -> Result<serde_json::Value, serde_json::Error>;
}

impl<S: Settings> Table for S {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn clone_table(&self) -> Box<dyn Table> {
        Box::new(self.clone())
    }
    fn same_as(&self, other: &dyn Table) -> bool {
        other.as_any().downcast_ref::<S>() == Some(self)
    }
    fn is_default(&self) -> bool {
        *self == S::default()
    }
    fn check(&self) -> Result<(), TrainError> {
        Settings::check(self)
    }
    fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }
}

/// Every learner's own table but PPO's, by key, in the registry's order;
/// each present, at its defaults where the config has none. The registry
/// makes them (`Default`) and reads them (`Deserialize`).
#[derive(Debug)]
pub struct LearnerTables(pub(crate) Vec<(&'static str, Box<dyn Table>)>);

impl Clone for LearnerTables {
    fn clone(&self) -> Self {
        LearnerTables(self.0.iter().map(|(k, t)| (*k, t.clone_table())).collect())
    }
}

impl PartialEq for LearnerTables {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((a, x), (b, y))| a == b && x.same_as(y.as_ref()))
    }
}

impl LearnerTables {
    /// The settings under `key`, as `S`.
    pub(crate) fn get<S: Settings>(&self, key: &str) -> Option<&S> {
        let (_, t) = self.0.iter().find(|(k, _)| *k == key)?;
        t.as_any().downcast_ref()
    }

    /// The same, to change.
    pub(crate) fn get_mut<S: Settings>(&mut self, key: &str) -> Option<&mut S> {
        let (_, t) = self.0.iter_mut().find(|(k, _)| *k == key)?;
        t.as_any_mut().downcast_mut()
    }

    /// Checks every table; the error names the field.
    pub(crate) fn check(&self) -> Result<(), TrainError> {
        self.0.iter().try_for_each(|(_, t)| t.check())
    }
}

impl Serialize for LearnerTables {
    /// The tables that differ from their defaults, so that a config saved
    /// before a learner existed reads as it was written.
    fn serialize<Z: Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
        let mut map = s.serialize_map(None)?;
        for (key, t) in self.0.iter().filter(|(_, t)| !t.is_default()) {
            let value = t.to_value().map_err(serde::ser::Error::custom)?;
            map.serialize_entry(key, &value)?;
        }
        map.end()
    }
}
