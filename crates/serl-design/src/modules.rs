//! [`Module`]: one validated module of any kind, and [`Design`]: a
//! candidate algorithm, one module of each kind the scenario needs.

use serde::{Deserialize, Serialize};

use crate::communication::{Communication, CommunicationText};
use crate::features::{check_features, FeatureDef, FeatureSet};
use crate::imagination::ImaginationModule;
use crate::kind::{err, json, ModuleError, ModuleKind};
use crate::network::NetworkSpec;
use crate::plan::PlanModule;
use crate::profiling::ProfilingModule;
use crate::reward::RewardModule;

/// Designed state features, compiled (a [`FeatureSet`] is only built by
/// checking and compiling its programs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateModule {
    /// The features, appended to the observation in order.
    pub features: FeatureSet,
}

impl StateModule {
    /// Checks the features against the task: one that reads the resting
    /// order's queue needs an agent that places its orders (`placing`).
    pub fn check_task(&self, placing: bool) -> Result<(), ModuleError> {
        match (placing, self.features.queue_reader()) {
            (false, Some((d, column))) => Err(err(
                ModuleKind::State,
                format!(
                    "feature `{}` reads `{column}`, the agent's resting order, but this task's agent crosses every order (no placements)",
                    d.name
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// The state module as it is written: JSON with a feature list, checked
/// by [`Module::parse`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StateText {
    features: Vec<FeatureDef>,
}

/// A validated, compiled module.
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
    /// An intraday execution plan.
    Plan(PlanModule),
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
            Module::Plan(_) => ModuleKind::Plan,
        }
    }

    /// Parses, checks and compiles a module's text (already extracted
    /// from a reply), with a message precise enough to send back to the
    /// designer. This is the only time a designer's text is compiled: the
    /// module holds the compiled programs from here on.
    pub fn parse(kind: ModuleKind, text: &str) -> Result<Module, ModuleError> {
        Ok(match kind {
            ModuleKind::Reward => {
                let reward = RewardModule::compile(text)?;
                reward.check_reads_state()?;
                Module::Reward(reward)
            }
            ModuleKind::State => {
                let defs: StateText = json(kind, text)?;
                if defs.features.is_empty() {
                    return Err(err(
                        kind,
                        "no features; give at least one {\"name\", \"program\"}",
                    ));
                }
                let features = check_features(&defs.features)
                    .map_err(|e| err(kind, format!("{}: {}", e.field("features"), e.message)))?;
                Module::State(StateModule { features })
            }
            ModuleKind::Architecture => {
                let spec: NetworkSpec = json(kind, text)?;
                spec.validate(serl_env::OBS_DIM)
                    .map_err(|e| err(kind, e.to_string()))?;
                Module::Architecture(spec)
            }
            ModuleKind::Imagination => {
                let m: ImaginationModule = json(kind, text)?;
                m.validate()?;
                Module::Imagination(m)
            }
            ModuleKind::Profiling => {
                let p: ProfilingModule = json(kind, text)?;
                p.validate()?;
                Module::Profiling(p)
            }
            ModuleKind::Communication => {
                let c: CommunicationText = json(kind, text)?;
                Module::Communication(Communication::new(&c.broadcast, c.aggregate)?)
            }
            ModuleKind::Plan => Module::Plan(json(kind, text)?),
        })
    }

    /// The module as a JSON value, as a designer's constrained reply
    /// holds it: a program as `{"program": ...}`, the rest as their JSON
    /// text reads ([`Module::text`] parsed, without the text).
    pub fn value(&self) -> serde_json::Value {
        let v = |v: serde_json::Result<serde_json::Value>| v.unwrap_or_default();
        match self {
            Module::Reward(r) => serde_json::json!({ "program": r.source() }),
            Module::State(s) => v(serde_json::to_value(s)),
            Module::Architecture(s) => v(serde_json::to_value(s)),
            Module::Imagination(s) => v(serde_json::to_value(s)),
            Module::Profiling(s) => v(serde_json::to_value(s)),
            Module::Communication(s) => v(serde_json::to_value(s)),
            Module::Plan(s) => v(serde_json::to_value(s)),
        }
    }

    /// The module as the text a designer writes (a program or JSON).
    pub fn text(&self) -> String {
        let j = |v: serde_json::Result<String>| v.unwrap_or_default();
        match self {
            Module::Reward(r) => r.source().to_string(),
            Module::State(s) => j(serde_json::to_string_pretty(s)),
            Module::Architecture(s) => j(serde_json::to_string_pretty(s)),
            Module::Imagination(s) => j(serde_json::to_string_pretty(s)),
            Module::Profiling(s) => j(serde_json::to_string_pretty(s)),
            Module::Communication(s) => j(serde_json::to_string_pretty(s)),
            Module::Plan(s) => j(serde_json::to_string_pretty(s)),
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
    /// The intraday plan the executor follows, when designed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanModule>,
}

impl Design {
    /// The default design: the environment's default reward, no extra
    /// features, the MLP [64, 64], no imagined days ("plain PPO").
    pub fn baseline() -> Self {
        Design {
            reward: RewardModule::plain(),
            state: StateModule::default(),
            architecture: NetworkSpec::default(),
            imagination: ImaginationModule::none(),
            profiling: None,
            communication: None,
            plan: None,
        }
    }
}
