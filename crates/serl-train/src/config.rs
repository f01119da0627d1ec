//! [`TrainConfig`]: everything a training run is set with, validated with
//! errors that name the field, and the few decisions it implies (which
//! environments are dynamic, which learner trains).

use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use serl_design::{FeatureSet, ImaginationModule, NetworkSpec, PlanModule, HARD_MAX_PARAMS};
use serl_env::MarketConfig;

use crate::algo::Algo;
use crate::align::AlignmentConfig;
use crate::critic::CriticConfig;
use crate::hybrid::{HybridConfig, HybridMode};
use crate::policy::Pace;
use crate::ppo::PpoConfig;
use crate::tables::LearnerTables;
use crate::transition::TransitionConfig;
use crate::TrainError;

/// Where tensors live.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceChoice {
    /// NdArray on the CPU.
    #[default]
    Cpu,
    /// wgpu (Vulkan, Metal, DX12); needs the `wgpu` cargo feature.
    Wgpu,
}

impl DeviceChoice {
    /// Every device's name, as configs spell it and the command line
    /// lists it (with `-` for `_`).
    pub const NAMES: [&'static str; 2] = ["cpu", "wgpu"];

    /// The burn device; [`TrainError::Device`] for wgpu in a build
    /// without the `wgpu` feature.
    pub fn device(self) -> Result<Device, TrainError> {
        match self {
            // The design card names burn-ndarray; it is deprecated upstream in
            // favour of flex, which a later release can switch to here.
            #[allow(deprecated)]
            DeviceChoice::Cpu => Ok(Device::ndarray()),
            #[cfg(feature = "wgpu")]
            DeviceChoice::Wgpu => Ok(Device::wgpu(burn::tensor::DeviceKind::DefaultDevice)),
            #[cfg(not(feature = "wgpu"))]
            DeviceChoice::Wgpu => Err(TrainError::Device("wgpu".into())),
        }
    }
}

/// Everything a training run is set with (`[train]` in configs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// No `deny_unknown_fields`: serde cannot pair it with `flatten`. The
// learners' tables take every key not named here and refuse any that is
// not a learner's (`registry.rs`), with the same error.
#[serde(default)]
pub struct TrainConfig {
    /// The learner: PPO or DDQN.
    pub algo: Algo,
    /// Seeds the weight initialisation, the environments' draws and the
    /// minibatches: the same config and data train the same policy.
    pub seed: u64,
    /// Environment steps to train for, over all environments.
    pub total_steps: usize,
    /// Environments stepped together.
    pub n_envs: usize,
    /// Where tensors live.
    pub device: DeviceChoice,
    /// The network (the architecture module).
    pub network: NetworkSpec,
    /// PPO's settings (also the rollout length per update).
    pub ppo: PpoConfig,
    /// Every other learner's own table (`[train.ddqn]`, `[train.sac]`),
    /// each left out of saved configs at its defaults, so that a config
    /// written before a learner existed reads as it was written.
    #[serde(flatten)]
    pub learners: LearnerTables,
    /// How the static and dynamic losses are weighted, and how many
    /// environments are dynamic.
    pub hybrid: HybridConfig,
    /// Imagined days (the imagination module): dynamic environments that
    /// play a scenario, and replayed days reshaped by one.
    pub imagination: ImaginationModule,
    /// Validate every this many updates (and after the last).
    pub eval_every: usize,
    /// Save a checkpoint every this many updates (and after the last).
    pub checkpoint_every: usize,
    /// Designed state features (the state-space module), appended to the
    /// observation; the environments must already carry them
    /// ([`crate::WithFeatures`]). Written as a list of `{name, program}`,
    /// checked and compiled when the config is read.
    pub features: FeatureSet,
    /// The multi-agent scenario: peers in every dynamic episode, and what
    /// the agents tell each other. None trains alone.
    pub team: Option<crate::team::TeamConfig>,
    /// Where the policy may place its child orders (`["cross", "touch"]`,
    /// docs/placement.md): PPO then picks a discrete share and one of
    /// these at every decision, and sees its resting order's place in the
    /// queue. Empty: every order crosses.
    pub placements: Vec<serl_env::Placement>,
    /// The most parameters the network may have (without the heads): the
    /// designer's limit by default ([`serl_design::MAX_PARAMS`]); raise it,
    /// up to [`HARD_MAX_PARAMS`], for a large network written by hand (on
    /// a GPU, `device = "wgpu"`). Designed networks keep the default.
    pub max_params: usize,
    /// An execution plan the executor follows (the plan module, written
    /// like one: `plan = { shape = "u_shaped", strength = 0.5 }`): its gap
    /// and its next checkpoint join the observation, and the reward may
    /// read `plan_gap` and `subgoal_hit`. A design's own plan replaces it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanModule>,
    /// Behaviour cloning of the plan's tracking controller before PPO
    /// (`[train.alignment]`; off without `steps`).
    #[serde(skip_serializing_if = "AlignmentConfig::is_off")]
    pub alignment: AlignmentConfig,
    /// The auxiliary head that predicts the next observation's market
    /// features (`[train.transition]`; off at weight 0).
    #[serde(skip_serializing_if = "TransitionConfig::is_off")]
    pub transition: TransitionConfig,
    /// The reward critic that re-weights the reward's terms during the run
    /// (`[train.reward_critic]`; off at `every = 0`).
    #[serde(skip_serializing_if = "CriticConfig::is_off")]
    pub reward_critic: CriticConfig,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            algo: Algo::PPO,
            seed: 7,
            total_steps: 100_000,
            n_envs: 8,
            device: DeviceChoice::Cpu,
            network: NetworkSpec::default(),
            ppo: PpoConfig::default(),
            learners: LearnerTables::default(),
            hybrid: HybridConfig::default(),
            imagination: ImaginationModule::none(),
            eval_every: 5,
            checkpoint_every: 1,
            features: FeatureSet::default(),
            team: None,
            placements: Vec::new(),
            max_params: serl_design::MAX_PARAMS,
            plan: None,
            alignment: AlignmentConfig::default(),
            transition: TransitionConfig::default(),
            reward_critic: CriticConfig::default(),
        }
    }
}

fn bad(field: &str, message: impl Into<String>) -> TrainError {
    TrainError::Config {
        field: field.into(),
        message: message.into(),
    }
}

impl TrainConfig {
    /// Checks every setting for an observation `obs_dim` wide that does not
    /// depend on the learner; the error names the field.
    /// [`TrainConfig::validate`] (`shape.rs`) adds the learner's checks.
    pub(crate) fn validate_settings(&self, obs_dim: usize) -> Result<(), TrainError> {
        self.validate_hierarchy()?;
        if !(1..=HARD_MAX_PARAMS).contains(&self.max_params) {
            return Err(bad(
                "max_params",
                format!("{} is not in 1..={HARD_MAX_PARAMS}", self.max_params),
            ));
        }
        let shape = self.network.validate_within(obs_dim, HARD_MAX_PARAMS)?;
        if shape.params > self.max_params {
            return Err(bad(
                "network",
                format!(
                    "{} parameters (without the heads) over the {obs_dim}-column observation; at most {} (a network you write yourself may have up to {HARD_MAX_PARAMS} with [train] max_params)",
                    shape.params, self.max_params
                ),
            ));
        }
        if self.n_envs == 0 {
            return Err(bad("n_envs", "must be at least 1"));
        }
        if self.total_steps == 0 {
            return Err(bad("total_steps", "must be at least 1"));
        }
        let p = &self.ppo;
        if p.n_steps == 0 || p.batch_size == 0 || p.epochs == 0 {
            return Err(bad(
                "ppo",
                "n_steps, batch_size and epochs must be at least 1",
            ));
        }
        if let Pace::Tilt(max) = p.pace {
            if !(max > 0.0 && max <= 1.0) {
                return Err(bad("ppo.pace", format!("tilt {max} is not in (0, 1]")));
            }
            if p.discrete.iter().any(|a| !(-1.0..=1.0).contains(a)) {
                return Err(bad(
                    "ppo.discrete",
                    "with a tilted pace, discrete actions are tilts in [-1, 1]",
                ));
            }
        }
        self.validate_placements()?;
        if !(p.learning_rate > 0.0 && p.learning_rate < 1.0) {
            return Err(bad(
                "ppo.learning_rate",
                format!("{} is not in (0, 1)", p.learning_rate),
            ));
        }
        for (f, v) in [("ppo.gamma", p.gamma), ("ppo.gae_lambda", p.gae_lambda)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(f, format!("{v} is not in [0, 1]")));
            }
        }
        let tilted = matches!(p.pace, Pace::Tilt(_));
        if p.discrete
            .iter()
            .any(|a| !tilted && !(0.0..=1.0).contains(a))
        {
            return Err(bad("discrete", "action fractions must be in [0, 1]"));
        }
        self.learners.check()?;
        self.validate_mixing()?;
        if let Some(t) = &self.team {
            t.validate()?;
        }
        Ok(())
    }

    /// The hybrid weights, the coarse flow and the imagined days' shares.
    fn validate_mixing(&self) -> Result<(), TrainError> {
        let h = &self.hybrid;
        if !(0.0..=1.0).contains(&h.alpha)
            || !(0.0..0.5).contains(&h.floor)
            || !(0.0..=1.0).contains(&h.ema)
        {
            return Err(bad(
                "hybrid",
                "alpha and ema must be in [0, 1], floor in [0, 0.5)",
            ));
        }
        if let Some(c) = &h.coarse_flow {
            c.check().map_err(|why| bad("hybrid.coarse_flow", why))?;
        }
        for (field, share) in [
            ("imagination.share", self.imagination.share),
            ("imagination.replay_share", self.imagination.replay_share),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Err(bad(field, "must be in [0, 1]"));
            }
        }
        Ok(())
    }

    /// The width of the observation its policy sees
    /// ([`crate::execution_envs`]): the market's columns, the resting
    /// order's queue when it places orders, the heard messages and the
    /// designed features.
    pub fn obs_dim(&self) -> usize {
        let queue = if self.placements.is_empty() {
            0
        } else {
            serl_env::QueueState::COLUMNS
        };
        let (messages, role) = self
            .team
            .as_ref()
            .map_or((0, 0), |t| (t.message_dims(), t.role_dims()));
        serl_env::OBS_DIM + queue + messages + role + self.observed_features().len()
    }

    /// Checks where orders may go, and that only a placing agent's
    /// features read its resting order.
    fn validate_placements(&self) -> Result<(), TrainError> {
        if !self.placements.is_empty() {
            if self.ppo.discrete.is_empty() {
                return Err(bad(
                    "placements",
                    "placement is learned by PPO over discrete actions: set algo = \"ppo\" and [train.ppo] discrete (shares, or tilts with a tilted pace)",
                ));
            }
            if self.placements.len() > 16 {
                return Err(bad("placements", "at most 16 placements"));
            }
        } else if let Some((d, column)) = self.features.queue_reader() {
            return Err(bad(
                &format!("features.{}", d.name),
                format!("reads `{column}`, the agent's resting order: set [train] placements, or the agent crosses every order and nothing of it rests"),
            ));
        }
        Ok(())
    }

    /// Checks the plan, alignment, transition and critic settings.
    fn validate_hierarchy(&self) -> Result<(), TrainError> {
        if let Some(plan) = &self.plan {
            let mut defs = self.features.defs().to_vec();
            defs.extend(plan.features());
            if let Err(e) = serl_design::check_features(&defs) {
                return Err(bad(
                    "plan",
                    format!("its features clash with the state module's: {e}"),
                ));
            }
        }
        let team = self.learning_team().is_some();
        self.alignment.check(self.plan.is_some(), team)?;
        self.transition.check()?;
        self.reward_critic.check()
    }

    /// The designed features the policy observes: the state module's, then
    /// the plan's two ([`PlanModule::features`]).
    pub fn observed_features(&self) -> FeatureSet {
        match &self.plan {
            None => self.features.clone(),
            Some(plan) => {
                let mut defs = self.features.defs().to_vec();
                defs.extend(plan.features());
                // `validate` refuses a clash of names; until then the
                // state module's features alone.
                serl_design::check_features(&defs).unwrap_or_else(|_| self.features.clone())
            }
        }
    }

    /// The team of learning agents this config trains (`[train.team]`
    /// with `agents` ≥ 2), if any.
    pub fn learning_team(&self) -> Option<&crate::team::TeamConfig> {
        self.team.as_ref().filter(|t| t.learns_together())
    }

    /// What the trained policy records of its team, for an observation
    /// `obs_dim` wide: a MAPPO critic reads the agent's own window and
    /// every member's newest observation.
    pub(crate) fn team_meta(&self, obs_dim: usize) -> Option<crate::policy::TeamMeta> {
        self.learning_team().map(|t| crate::policy::TeamMeta {
            agents: t.agents,
            mode: t.mode,
            critic: t.critic,
            critic_width: match t.critic {
                crate::team::Critic::Centralized => (self.network.window + t.agents) * obs_dim,
                crate::team::Critic::Local => 0,
            },
            communication: t.communication.clone(),
        })
    }

    /// How many of the environments play the dynamic market.
    pub fn dynamic_envs(&self) -> usize {
        match self.hybrid.mode {
            HybridMode::StaticOnly => 0,
            HybridMode::DynamicOnly => self.n_envs,
            _ => self.hybrid.dynamic_envs.min(self.n_envs),
        }
    }

    /// The market each dynamic environment `j` (of `dynamic_envs()`)
    /// plays: the calibrated day, or for the imagined share a scenario,
    /// with `[hybrid] coarse_flow`'s coarser flow where it is set.
    pub fn dynamic_market(&self, base: &MarketConfig, j: usize) -> MarketConfig {
        let n = self.dynamic_envs();
        let imagined = (self.imagination.share * n as f64).round() as usize;
        let mut m = match &self.hybrid.coarse_flow {
            Some(c) => c.apply(base),
            None => base.clone(),
        };
        if j < imagined && !self.imagination.scenarios.is_empty() {
            m.scenario = self.imagination.scenarios[j % self.imagination.scenarios.len()].clone();
        }
        m
    }

    /// Environment steps one update collects (over all environments).
    pub fn steps_per_update(&self) -> usize {
        self.n_envs * self.decisions_per_update()
    }

    /// Decisions of every environment one update collects, whatever the
    /// learner. The setting is `[train.ppo] n_steps` because configs have
    /// always written it there (DDQN's updates are as long as PPO's);
    /// moving it would change every saved config and its fingerprint.
    pub fn decisions_per_update(&self) -> usize {
        self.ppo.n_steps
    }

    /// Whether a learner whose own switch (`[train.<algo>] fused`) reads
    /// `switch` would train `network` with the fused backend: on the CPU,
    /// with a network of the grammar's blocks (a GRU over the window and
    /// book attention included).
    pub(crate) fn fused_backend(&self, switch: bool, network: &NetworkSpec) -> bool {
        switch && self.device == DeviceChoice::Cpu && crate::fused::implements(network)
    }

    /// Updates a run of `total_steps` takes, and the environment steps they
    /// collect in all (a whole number of updates).
    pub fn planned(&self) -> (usize, usize) {
        let per_update = self.steps_per_update();
        let updates = self.total_steps.div_ceil(per_update);
        (updates, updates * per_update)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line lists [`DeviceChoice::NAMES`]: each reads as the config
    /// reads it, and every variant is listed in its place (a new one fails
    /// to compile here until it is).
    #[test]
    fn every_device_is_named_as_the_config_names_it() {
        use serde::de::value::{Error, StrDeserializer};
        let index = |v: DeviceChoice| match v {
            DeviceChoice::Cpu => 0,
            DeviceChoice::Wgpu => 1,
        };
        for (i, name) in DeviceChoice::NAMES.iter().enumerate() {
            let v = DeviceChoice::deserialize(StrDeserializer::<Error>::new(name)).unwrap();
            assert_eq!(index(v), i, "{name}");
        }
    }

    #[test]
    fn a_network_past_the_designers_limit_needs_max_params_and_then_builds() {
        // 29 × 1,500 + 1,500 + 1,500 × 1,400 + 1,400 = 2,146,400.
        let cfg = TrainConfig {
            network: NetworkSpec::mlp(&[1500, 1400]),
            ..Default::default()
        };
        let e = cfg.validate(serl_env::OBS_DIM).unwrap_err().to_string();
        assert!(
            e.starts_with("train config, network: 2146400 parameters (without the heads) over the 29-column observation; at most 2000000")
                && e.contains("[train] max_params"),
            "{e}"
        );
        let raised = TrainConfig {
            max_params: 3_000_000,
            ..cfg.clone()
        };
        raised.validate(serl_env::OBS_DIM).unwrap();
        crate::net::ActorCritic::new(
            &raised.network,
            serl_env::OBS_DIM,
            raised.action_shape().head,
            &Default::default(),
        )
        .unwrap();
        for bad_limit in [0, HARD_MAX_PARAMS + 1] {
            let e = TrainConfig {
                max_params: bad_limit,
                ..cfg.clone()
            }
            .validate(serl_env::OBS_DIM)
            .unwrap_err()
            .to_string();
            assert!(e.starts_with("train config, max_params: "), "{e}");
        }
    }

    /// `[train.hybrid] coarse_flow` reaches the dynamic environments that
    /// train (and only them: validation builds its own market), keeps an
    /// imagined share's scenario, and is checked by name.
    #[test]
    fn a_coarse_flow_makes_the_training_market_coarser_and_is_checked() {
        let text = r#"
            [hybrid]
            dynamic_envs = 2
            coarse_flow = { noise_limit_mult = 8.0, mm_interval_mult = 3.0 }
            [imagination]
            share = 0.5
            scenarios = [{ drift_bps = 20.0 }]
        "#;
        let cfg: TrainConfig = toml::from_str(text).unwrap();
        let base = MarketConfig::default();
        let (imagined, calibrated) = (cfg.dynamic_market(&base, 0), cfg.dynamic_market(&base, 1));
        for m in [&imagined, &calibrated] {
            assert_eq!(m.noise_limit_mult, 8.0);
            assert_eq!(m.mm_interval_ms, 3 * base.mm_interval_ms);
        }
        assert_eq!(imagined.scenario.drift_bps, 20.0);
        assert_eq!(calibrated.scenario, base.scenario);
        cfg.validate(serl_env::OBS_DIM).unwrap();

        let mut finer = cfg.clone();
        finer.hybrid.coarse_flow = Some(serl_env::Coarsening {
            noise_limit_mult: 0.5,
            ..Default::default()
        });
        let e = finer.validate(serl_env::OBS_DIM).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "train config, hybrid.coarse_flow: noise_limit_mult = 0.5 is not in [1, 64]"
            ),
            "{e}"
        );
        let unset = TrainConfig::default();
        assert_eq!(unset.dynamic_market(&base, 0), base);
    }
}
