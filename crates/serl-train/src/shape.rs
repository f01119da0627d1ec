//! What a config's learner makes of it, asked of the registry: the shape
//! of the policy it trains, whether it trains on the fused backend, and
//! the settings only some learners take. `config.rs` holds the settings
//! themselves and checks what does not depend on the learner.

use serl_design::NetworkSpec;

use crate::algo::Algo;
use crate::config::TrainConfig;
use crate::learner::Extras;
use crate::normalize::RunningNorm;
use crate::policy::{ActionShape, Pace, PolicyMeta};
use crate::registry::registered;
use crate::TrainError;

impl TrainConfig {
    /// Checks every setting for an observation `obs_dim` wide; the error
    /// names the field.
    pub fn validate(&self, obs_dim: usize) -> Result<(), TrainError> {
        self.validate_settings(obs_dim)?;
        let learner = registered(self.algo);
        (learner.check)(self)?;
        self.check_extras(learner.name, learner.extras)
    }

    /// Refuses what the config's learner (`name`) does not take, naming
    /// the field.
    fn check_extras(&self, name: &str, takes: Extras) -> Result<(), TrainError> {
        let bad = |field: &str, message: String| {
            Err(TrainError::Config {
                field: field.into(),
                message,
            })
        };
        if !self.placements.is_empty() && !takes.placements {
            return bad(
                "placements",
                format!("placement is learned by PPO over discrete actions, not by {name}: set algo = \"ppo\" and [train.ppo] discrete (shares, or tilts with a tilted pace)"),
            );
        }
        if self.learning_team().is_some() && !takes.team {
            return bad(
                "team.agents",
                format!("a team learns with PPO (MAPPO or independent PPO): set algo = \"ppo\" ({name} trains one agent)"),
            );
        }
        if !self.alignment.is_off() && !takes.alignment {
            return bad(
                "alignment.steps",
                format!("alignment fits PPO's actor; {name} has none"),
            );
        }
        if !self.transition.is_off() && !takes.transition {
            return bad(
                "transition.weight",
                format!("the transition head trains beside PPO's actor; {name} has none"),
            );
        }
        Ok(())
    }

    /// What of the config beyond its own table the learner takes.
    pub fn learner_extras(&self) -> Extras {
        registered(self.algo).extras
    }

    /// How the trained policy acts: its head, squash, pace and discrete
    /// actions, as the learner decides.
    pub fn action_shape(&self) -> ActionShape {
        (registered(self.algo).shape)(self)
    }

    /// Everything but the weights of the policy this config trains, before
    /// any observation has been normalised.
    pub(crate) fn policy_meta(&self, obs_dim: usize) -> PolicyMeta {
        let shape = self.action_shape();
        PolicyMeta {
            algo: self.algo,
            spec: self.network.clone(),
            obs_dim,
            head: shape.head,
            squash: shape.squash,
            pace: shape.pace,
            discrete: shape.discrete,
            norm: RunningNorm::new(obs_dim),
            features: self.observed_features(),
            message_dims: self.team.as_ref().map_or(0, |t| t.message_dims()),
            placements: self.placements.clone(),
            team: self.team_meta(obs_dim),
        }
    }

    /// Whether this config trains with the fused learner (`fused.rs`): a
    /// learner with a fused backend, switched on, on the CPU with a
    /// network of the grammar's blocks. Burn's autodiff sums in parallel
    /// in an order that depends on what else the machine runs, so only
    /// fused trainings give the same numbers when several share it.
    pub fn trains_fused(&self) -> bool {
        self.fused_backend_for(self.algo, &self.network)
    }

    /// Whether `algo` would train `network` with the fused backend under
    /// these settings (the config's own algorithm and network aside).
    pub(crate) fn fused_backend_for(&self, algo: Algo, network: &NetworkSpec) -> bool {
        self.fused_backend((registered(algo).fused_switch)(self), network)
    }

    /// How the trained policy's actions become shares.
    pub fn pace(&self) -> Pace {
        self.action_shape().pace
    }
}
