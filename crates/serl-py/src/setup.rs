//! What an environment or a backtest is set up from: a config file (or a
//! dict), the bars, a split of orders, and the designed modules (a reward
//! file, a state module file), read with serl's own readers so that the
//! errors name the file, the line and the field as `serl train` does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serl_data::Split;
use serl_design::FeatureSet;
use serl_env::{MarketData, ParentOrder, Placement, Reward};
use serl_study::config::{BacktestFile, TrainFile};
use serl_train::{HybridMode, Pace, TrainConfig};

use crate::error::{chain, Fail};

/// How a config reaches the native module: a TOML file, or the JSON of
/// a Python dict with the same tables.
pub enum ConfigSource {
    /// No config: every table at its default.
    Default,
    /// A TOML file (`configs/train.toml`).
    File(PathBuf),
    /// The tables as JSON.
    Json(String),
}

impl ConfigSource {
    /// From the Python arguments `config` (a path) and `config_json`.
    pub fn of(path: Option<PathBuf>, json: Option<String>) -> Self {
        match (path, json) {
            (_, Some(j)) => ConfigSource::Json(j),
            (Some(p), None) => ConfigSource::File(p),
            (None, None) => ConfigSource::Default,
        }
    }

    /// The config as `serl train` reads it. A file's reward program is
    /// checked with the file's line, as `serl train` does.
    pub fn train_file(&self) -> Result<TrainFile, Fail> {
        let cfg = match self {
            ConfigSource::Default => TrainFile::default(),
            ConfigSource::File(p) => {
                if !p.is_file() {
                    return Err(Fail::new(format!(
                        "config file {} does not exist",
                        p.display()
                    )));
                }
                let cfg = TrainFile::read(p).map_err(|e| Fail::new(chain(&e)))?;
                serl_study::train::check_reward(&cfg, p).map_err(|e| Fail::new(chain(&e)))?;
                cfg
            }
            ConfigSource::Json(j) => serde_json::from_str(j).map_err(dict_error)?,
        };
        cfg.validate().map_err(|e| Fail::new(chain(&e)))?;
        Ok(cfg)
    }

    /// The config as `serl backtest` reads it; a training's config (with a
    /// `[train]`, `[validation]` or `reward`) gives its data, orders, env
    /// and market tables.
    pub fn backtest_file(&self) -> Result<BacktestFile, Fail> {
        let cfg = match self {
            ConfigSource::Default => BacktestFile::default(),
            _ if self.is_training()? => BacktestFile::of_training(self.train_file()?),
            ConfigSource::File(p) => {
                serl_study::config::read_toml(p).map_err(|e| Fail::new(chain(&e)))?
            }
            ConfigSource::Json(j) => serde_json::from_str(j).map_err(dict_error)?,
        };
        cfg.validate().map_err(|e| Fail::new(chain(&e)))?;
        Ok(cfg)
    }

    /// Whether the config is a training's (`[train]`, `[validation]`,
    /// `reward` or `[walk_forward]`).
    pub fn is_training(&self) -> Result<bool, Fail> {
        let table: toml::Table = match self {
            ConfigSource::Default => return Ok(false),
            ConfigSource::File(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| Fail::new(format!("reading config file {}: {e}", p.display())))?;
                toml::from_str(&text).map_err(|e| Fail::new(format!("{}: {e}", p.display())))?
            }
            ConfigSource::Json(j) => serde_json::from_str(j).map_err(dict_error)?,
        };
        Ok(["train", "validation", "reward", "walk_forward"]
            .iter()
            .any(|k| table.contains_key(*k)))
    }
}

/// A config dict that does not parse, in words.
fn dict_error(e: serde_json::Error) -> Fail {
    Fail::new(format!("config (a dict of serl's config tables): {e}"))
}

/// The split orders come from, by its name.
pub fn split(name: &str) -> Result<Split, Fail> {
    name.parse()
        .map_err(|e: String| Fail::new(format!("split {name:?}: {e}")))
}

/// Refuses a data path that is not there, naming it.
pub fn check_data_path(path: &Path) -> Result<(), Fail> {
    if path.exists() {
        return Ok(());
    }
    Err(Fail::new(format!(
        "data path {} does not exist",
        path.display()
    )))
}

/// The bars under `data` (or the config's `data_path`) as market views,
/// and the orders of `split`, loaded as `serl backtest` loads them.
pub fn market_and_orders(
    data: Option<&Path>,
    file: &TrainFile,
    split: Split,
) -> Result<(MarketData, Vec<ParentOrder>), Fail> {
    let path = data
        .or(file.data_path.as_deref())
        .ok_or_else(|| Fail::new("give data=PATH: a folder or file of minute bars (data/lean)"))?;
    check_data_path(path)?;
    let cfg = BacktestFile::of_training(file.clone());
    let loaded = serl_study::backtest::BacktestData::bars(path, split, &cfg, &|_| {})
        .map_err(|e| Fail::new(chain(&e)))?;
    if loaded.orders.is_empty() {
        return Err(Fail::new(format!(
            "the {split:?} split of {} has no orders (see [data.splits] and [orders])",
            path.display()
        )));
    }
    Ok((loaded.market, loaded.orders))
}

/// A reward file: the program itself as text, or JSON holding it
/// (`{"program": ...}`, or an evolve run's candidate with its design).
pub fn reward_program(path: &Path) -> Result<String, Fail> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Fail::new(format!("reading reward file {}: {e}", path.display())))?;
    let program = if is_json(path) {
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Fail::new(format!("reward file {}: {e}", path.display())))?;
        let found = v
            .pointer("/design/reward/program")
            .or_else(|| v.pointer("/reward/program"))
            .or_else(|| v.get("program"))
            .and_then(|p| p.as_str());
        match found {
            Some(p) => p.to_string(),
            None => {
                return Err(Fail::new(format!(
                    "reward file {}: no `program` (write the program as text, or {{\"program\": \"...\"}})",
                    path.display()
                )))
            }
        }
    } else {
        text.trim().to_string()
    };
    serl_design::RewardModule::compile(&program)
        .map_err(|e| Fail::new(format!("reward file {}: {}", path.display(), chain(&e))))?;
    Ok(program)
}

/// A state module file: TOML or JSON with `features = [{name, program}]`,
/// a JSON list of them, or an evolve run's candidate with its design.
pub fn state_features(path: &Path) -> Result<FeatureSet, Fail> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct StateFile {
        features: FeatureSet,
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Fail::new(format!("reading state module file {}: {e}", path.display())))?;
    let named =
        |e: &dyn std::fmt::Display| Fail::new(format!("state module file {}: {e}", path.display()));
    if !is_json(path) {
        let f: StateFile = toml::from_str(&text).map_err(|e| named(&e))?;
        return Ok(f.features);
    }
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| named(&e))?;
    let list = v
        .pointer("/design/state/features")
        .or_else(|| v.pointer("/state/features"))
        .or_else(|| v.get("features"))
        .unwrap_or(&v);
    FeatureSet::deserialize(list).map_err(|e| named(&e))
}

fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// The actions an agent takes, as the trainer's policy heads take them.
#[derive(Debug, Clone)]
pub enum Actions {
    /// One number: a share of the order (`[0, 1]`) or a tilt of TWAP
    /// (`[-1, 1]`), as the pace says.
    Continuous(Pace),
    /// An index into `shares`, and with placements also an index into
    /// them: PPO's categorical head, DDQN's actions.
    Discrete {
        /// The share (or tilt) of each index.
        shares: Vec<f64>,
        /// Where an order may go; empty: every order crosses.
        placements: Vec<Placement>,
        /// How a share is read.
        pace: Pace,
    },
}

impl Actions {
    /// The actions of a training config.
    pub fn of(train: &TrainConfig) -> Actions {
        let shape = train.action_shape();
        let (pace, shares) = (shape.pace, shape.discrete);
        if shares.is_empty() {
            Actions::Continuous(pace)
        } else {
            Actions::Discrete {
                shares,
                placements: train.placements.clone(),
                pace,
            }
        }
    }

    /// The (action, placement number) the environment steps with, from
    /// the numbers of one Python action; an error names what is wrong.
    pub fn decode(&self, action: &[f64]) -> Result<(f64, u8), String> {
        match self {
            Actions::Continuous(_) => match action {
                [a] => Ok((*a, 0)),
                _ => Err(format!(
                    "a continuous action is one number, got {} numbers",
                    action.len()
                )),
            },
            Actions::Discrete {
                shares, placements, ..
            } => {
                let want = if placements.is_empty() { 1 } else { 2 };
                if action.len() != want {
                    return Err(format!(
                        "this action space takes {want} index(es) per action (a share{}), got {} numbers",
                        if want == 2 { " and a placement" } else { "" },
                        action.len()
                    ));
                }
                let index = |x: f64, n: usize, what: &str| -> Result<usize, String> {
                    if x.fract() != 0.0 || x < 0.0 || x >= n as f64 {
                        return Err(format!("{what} index {x} is not one of 0..{n}"));
                    }
                    Ok(x as usize)
                };
                let share = shares[index(action[0], shares.len(), "share")?];
                let placement = match placements.len() {
                    0 => 0,
                    n => index(action[1], n, "placement")? as u8,
                };
                Ok((share, placement))
            }
        }
    }

    /// The pace that reads a share.
    pub fn pace(&self) -> Pace {
        match self {
            Actions::Continuous(p) | Actions::Discrete { pace: p, .. } => *p,
        }
    }

    /// Where orders may go (empty: they cross).
    pub fn placements(&self) -> &[Placement] {
        match self {
            Actions::Continuous(_) => &[],
            Actions::Discrete { placements, .. } => placements,
        }
    }
}

/// A placement's name as configs write it (`cross`, `touch`).
pub fn placement_name(p: &Placement) -> String {
    match serde_json::to_value(p) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(v) => v.to_string(),
        Err(_) => format!("{p:?}"),
    }
}

/// Everything the environments of one `ExecutionEnv` or
/// `VecExecutionEnv` share, read once.
pub struct Shared {
    /// The training config, with `n_envs` and the venue set.
    pub train: TrainConfig,
    /// The environment's settings (`[env]`).
    pub env: serl_env::EnvConfig,
    /// The dynamic market's population (`[market]`).
    pub market_cfg: serl_env::MarketConfig,
    /// The bars as market views.
    pub market: MarketData,
    /// The orders episodes draw from.
    pub orders: Vec<ParentOrder>,
    /// The reward of every step.
    pub reward: Arc<dyn Reward>,
    /// The actions the agent takes.
    pub actions: Actions,
}

/// What Python asked for.
pub struct EnvRequest {
    /// Bars to load (else the config's `data_path`).
    pub data: Option<PathBuf>,
    /// The config.
    pub config: ConfigSource,
    /// `static` or `dynamic`.
    pub venue: String,
    /// `train`, `validation`, `test` or `all`.
    pub split: String,
    /// Environments.
    pub n: usize,
    /// A reward file.
    pub reward: Option<PathBuf>,
    /// A state module file.
    pub state: Option<PathBuf>,
}

impl Shared {
    /// Reads and checks everything `req` names.
    pub fn load(req: &EnvRequest) -> Result<Shared, Fail> {
        let mut file = req.config.train_file()?;
        if let Some(path) = &req.reward {
            file.reward = Some(reward_program(path)?);
        }
        let reward = serl_study::train::reward_of(&file).map_err(|e| Fail::new(chain(&e)))?;
        let mut train = file.train.clone();
        if let Some(path) = &req.state {
            train.features = state_features(path)?;
        }
        if train.learning_team().is_some() {
            return Err(Fail::new(
                "[train] team: a team of learning agents (mappo, ippo) has a row per member; the Python environments play one agent",
            ));
        }
        if req.n == 0 {
            return Err(Fail::new("n: at least one environment"));
        }
        train.n_envs = req.n;
        // The trainer plays imagined scenarios in its first dynamic
        // environments (`TrainConfig::dynamic_market`): here environment k
        // would play another market than `ExecutionEnv` does. The dynamic
        // venue plays the calibrated day; imagined replays of the static
        // venue, drawn per episode, stay.
        train.imagination.share = 0.0;
        train.hybrid.mode = match req.venue.as_str() {
            "static" => HybridMode::StaticOnly,
            "dynamic" => HybridMode::DynamicOnly,
            v => {
                return Err(Fail::new(format!(
                    "venue {v:?}: \"static\" (the historical replay) or \"dynamic\" (the simulated market)"
                )))
            }
        };
        train
            .validate(train.obs_dim())
            .map_err(|e| Fail::new(chain(&e)))?;
        let (market, orders) = market_and_orders(req.data.as_deref(), &file, split(&req.split)?)?;
        Ok(Shared {
            actions: Actions::of(&train),
            train,
            env: file.env,
            market_cfg: file.market,
            market,
            orders,
            reward,
        })
    }

    /// The observation's column names, in order.
    pub fn obs_names(&self, obs_dim: usize) -> Vec<String> {
        let mut names = serl_env::obs::feature_names();
        if !self.train.placements.is_empty() {
            names.extend(serl_env::QueueState::NAMES.iter().map(|s| s.to_string()));
        }
        if let Some(team) = self.train.team.as_ref().filter(|t| t.message_dims() > 0) {
            names.extend(team.message_names());
        }
        names.extend(
            self.train
                .observed_features()
                .defs()
                .iter()
                .map(|d| d.name.clone()),
        );
        while names.len() < obs_dim {
            names.push(format!("column_{}", names.len()));
        }
        names.truncate(obs_dim);
        names
    }
}
