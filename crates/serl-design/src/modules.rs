//! [`Module`]: one validated module of any kind, and [`Design`]: a
//! candidate algorithm, one module of each kind the scenario needs.

use serde::{Deserialize, Serialize};

use crate::communication::Communication;
use crate::features::{check_features, FeatureDef};
use crate::imagination::ImaginationModule;
use crate::kind::{err, json, ModuleError, ModuleKind};
use crate::network::NetworkSpec;
use crate::profiling::ProfilingModule;
use crate::reward::{ProgramReward, RewardModule, DEFAULT_REWARD_PROGRAM};

/// Designed state features.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateModule {
    /// The features, appended to the observation in order.
    pub features: Vec<FeatureDef>,
}

/// A validated module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "module")]
pub enum Module {
    /// A reward program.
    Reward(RewardModule),
    /// State features.
    State(StateModule),
    /// A policy network.
    Architecture(NetworkSpec),
    /// Imagined market days.
    Imagination(ImaginationModule),
    /// The market's population.
    Profiling(ProfilingModule),
    /// What agents tell each other.
    Communication(Communication),
}

impl Module {
    /// The module's kind.
    pub fn kind(&self) -> ModuleKind {
        match self {
            Module::Reward(_) => ModuleKind::Reward,
            Module::State(_) => ModuleKind::State,
            Module::Architecture(_) => ModuleKind::Architecture,
            Module::Imagination(_) => ModuleKind::Imagination,
            Module::Profiling(_) => ModuleKind::Profiling,
            Module::Communication(_) => ModuleKind::Communication,
        }
    }

    /// Parses and validates a module's text (already extracted from a
    /// reply), with a message precise enough to send back to the designer.
    pub fn parse(kind: ModuleKind, text: &str) -> Result<Module, ModuleError> {
        let m = match kind {
            ModuleKind::Reward => Module::Reward(RewardModule {
                program: text.trim().to_string(),
            }),
            ModuleKind::State => Module::State(json(kind, text)?),
            ModuleKind::Architecture => Module::Architecture(json(kind, text)?),
            ModuleKind::Imagination => Module::Imagination(json(kind, text)?),
            ModuleKind::Profiling => Module::Profiling(json(kind, text)?),
            ModuleKind::Communication => Module::Communication(json(kind, text)?),
        };
        m.validate()?;
        Ok(m)
    }

    /// Checks the module against every limit of its kind.
    pub fn validate(&self) -> Result<(), ModuleError> {
        let kind = self.kind();
        match self {
            Module::Reward(r) => ProgramReward::new(r).map(|_| ()),
            Module::State(s) => {
                if s.features.is_empty() {
                    return Err(err(
                        kind,
                        "no features; give at least one {\"name\", \"program\"}",
                    ));
                }
                check_features(&s.features)
                    .map(|_| ())
                    .map_err(|e| err(kind, format!("{}: {}", e.field("features"), e.message)))
            }
            Module::Architecture(spec) => spec
                .validate(serl_env::OBS_DIM)
                .map(|_| ())
                .map_err(|e| err(kind, e.to_string())),
            Module::Imagination(m) => m.validate(),
            Module::Profiling(p) => p.validate(),
            Module::Communication(c) => c.validate().map(|_| ()),
        }
    }

    /// The module as the text a designer writes (a program or JSON).
    pub fn text(&self) -> String {
        let j = |v: serde_json::Result<String>| v.unwrap_or_default();
        match self {
            Module::Reward(r) => r.program.clone(),
            Module::State(s) => j(serde_json::to_string_pretty(s)),
            Module::Architecture(s) => j(serde_json::to_string_pretty(s)),
            Module::Imagination(s) => j(serde_json::to_string_pretty(s)),
            Module::Profiling(s) => j(serde_json::to_string_pretty(s)),
            Module::Communication(s) => j(serde_json::to_string_pretty(s)),
        }
    }
}

/// A candidate algorithm: one module of each kind the scenario needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Design {
    /// The reward program.
    pub reward: RewardModule,
    /// Designed state features (may be none).
    pub state: StateModule,
    /// The policy network.
    pub architecture: NetworkSpec,
    /// Imagined days (may be none).
    pub imagination: ImaginationModule,
    /// The market's population, when designed.
    #[serde(default)]
    pub profiling: Option<ProfilingModule>,
    /// What agents tell each other, when designed.
    #[serde(default)]
    pub communication: Option<Communication>,
}

impl Design {
    /// The default design: the environment's default reward, no extra
    /// features, the MLP [64, 64], no imagined days ("plain PPO").
    pub fn baseline() -> Self {
        Design {
            reward: RewardModule {
                program: DEFAULT_REWARD_PROGRAM.into(),
            },
            state: StateModule {
                features: Vec::new(),
            },
            architecture: NetworkSpec::default(),
            imagination: ImaginationModule::none(),
            profiling: None,
            communication: None,
        }
    }
}
