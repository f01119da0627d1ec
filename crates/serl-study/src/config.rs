//! The config files of serl's commands, as written in `configs/`: each is
//! the tables of the lower crates' configs side by side, read with errors
//! that name the file, the line and the field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serl_cluster::ClusterConfig;
use serl_data::DataConfig;
use serl_env::{EnvConfig, MarketConfig, OrderConfig};
use serl_eval::walk_forward::WalkForwardConfig;
use serl_evolve::EvolveConfig;
use serl_llm::HttpConfig;
use serl_train::TrainConfig;

use crate::error::{Context, Result, StudyError};
pub use crate::paths::Base;

/// A TOML config file, with errors that name the file (and, from toml,
/// the line and field).
pub fn read_toml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).map_err(|e| StudyError::msg(format!("{}: {e}", path.display())))
}

/// Who designs: the builtin offline search, an OpenAI-compatible server,
/// Ollama, the embedded GGUF model, or a replay of a recorded transcript.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Debug, Default)]
#[serde(rename_all = "snake_case")]
pub enum LlmChoice {
    /// The builtin offline search, no model asked.
    #[default]
    Builtin,
    /// An OpenAI-compatible chat server (`[llm.http]`).
    Openai,
    /// An Ollama server (`[llm.http]`, Ollama's API).
    Ollama,
    /// The embedded GGUF model of `[llm.local]`.
    Local,
    /// The replies of a recorded transcript, replayed in order.
    Replay,
    /// No model: each module drawn at random from its own grammar (the
    /// random-search control, `serl_llm::GrammarDesigner`).
    Grammar,
}

impl LlmChoice {
    /// Every designer's name, as `[llm] backend` and `--llm` take it.
    pub const NAMES: [&'static str; 6] =
        ["builtin", "openai", "ollama", "local", "replay", "grammar"];
}

/// The `[llm]` table: the designer's backend and how it is asked.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmSection {
    /// Who designs (`--llm`).
    pub backend: LlmChoice,
    /// How to reach the chat server of `openai` and `ollama`.
    pub http: HttpConfig,
    /// The sampling temperature of every ask (and the size of a grammar
    /// draw).
    pub temperature: f64,
    /// Constrain every reply to its module's JSON schema
    /// (`response_format` / Ollama's `format`).
    pub constrained: bool,
    /// Send each module's GBNF grammar (llama.cpp's `grammar` field)
    /// instead of its JSON schema.
    pub gbnf: bool,
    /// The embedded model (`--llm local`).
    pub local: LocalSection,
}

/// The `[llm.local]` table: the embedded backend's model and settings.
#[cfg(feature = "local")]
pub type LocalSection = serl_llm::LocalConfig;
/// Without the `local` feature the table is kept as written, unread.
#[cfg(not(feature = "local"))]
pub type LocalSection = toml::Table;

impl Default for LlmSection {
    fn default() -> Self {
        LlmSection {
            backend: LlmChoice::Builtin,
            http: HttpConfig::default(),
            temperature: 0.7,
            constrained: true,
            gbnf: false,
            local: LocalSection::default(),
        }
    }
}

impl LlmSection {
    /// The model and adapter of `[llm.local]` made absolute against `base`.
    #[cfg(feature = "local")]
    pub fn resolve_paths(&mut self, base: Base, w: &mut BTreeMap<String, PathBuf>) -> Result<()> {
        crate::paths::resolve("llm.local.model", &mut self.local.model, base, w)?;
        crate::paths::resolve("llm.local.adapter", &mut self.local.adapter, base, w)
    }

    /// Without the embedded backend `[llm.local]` is kept as written, unread.
    #[cfg(not(feature = "local"))]
    pub fn resolve_paths(&mut self, _: Base, _: &mut BTreeMap<String, PathBuf>) -> Result<()> {
        Ok(())
    }

    /// Asks the embedded backend for the GGUF model at `model`.
    #[cfg(feature = "local")]
    pub fn set_local_model(&mut self, model: &Path) -> Result<()> {
        self.local.model = Some(model.to_path_buf());
        Ok(())
    }

    /// `--adapter`: the LoRA adapter of `[llm.local]`.
    #[cfg(feature = "local")]
    pub fn set_local_adapter(&mut self, adapter: &Path) -> Result<()> {
        self.local.adapter = Some(adapter.to_path_buf());
        Ok(())
    }

    /// Without the embedded backend there is no adapter to set.
    #[cfg(not(feature = "local"))]
    pub fn set_local_adapter(&mut self, _: &Path) -> Result<()> {
        crate::bail!(
            "--adapter is for --llm local, and this serl was built without it (`--features local`)"
        )
    }

    /// Without the embedded backend there is no model to set.
    #[cfg(not(feature = "local"))]
    pub fn set_local_model(&mut self, _: &Path) -> Result<()> {
        crate::bail!(
            "--model is for --llm local, and this serl was built without it (`--features local`)"
        )
    }
}

/// `serl evolve`'s config.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvolveFile {
    /// How the bars are read, cleaned and split (`[data]`).
    pub data: DataConfig,
    /// The parent orders drawn (`[orders]`).
    pub orders: OrderConfig,
    /// The environment the candidates train and score in (`[env]`).
    pub env: EnvConfig,
    /// The dynamic market's population (`[market]`).
    pub market: MarketConfig,
    /// The search itself (`[evolve]`).
    pub evolve: EvolveConfig,
    /// The designer's backend and how it is asked (`[llm]`).
    pub llm: LlmSection,
    /// The bar data the run reads; `data/lean` when absent
    /// ([`EvolveFile::data_path`]).
    pub data_path: Option<PathBuf>,
    /// The prompt templates the run starts from; `prompts/` when absent
    /// ([`EvolveFile::prompt_dir`]).
    pub prompts: Option<PathBuf>,
    /// Where the trainings run (`[cluster] engine`).
    pub cluster: ClusterConfig,
    /// The rolling windows of `--walk-forward` (outside `[evolve]`, which
    /// every cluster task carries: a run planned before may still resume).
    pub walk_forward: WalkForwardConfig,
    /// The run's paths as they were written (in the config or on the
    /// command line), by field; the fields above hold them absolute
    /// (written by the run into its `evolve.toml`, crate::paths).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub paths_as_written: BTreeMap<String, PathBuf>,
}

impl EvolveFile {
    /// Reads the config file at `path`; its relative paths are taken from
    /// its directory.
    pub fn read(path: &Path) -> Result<EvolveFile> {
        let mut cfg: EvolveFile = read_toml(path)?;
        cfg.resolve_paths(Base::Config(path))?;
        Ok(cfg)
    }

    /// Makes every path absolute against `base` (the defaults too, when
    /// it is the working directory), keeping each as written.
    pub fn resolve_paths(&mut self, base: Base) -> Result<()> {
        if matches!(base, Base::WorkingDir) {
            self.data_path
                .get_or_insert_with(|| PathBuf::from("data/lean"));
            self.prompts.get_or_insert_with(|| PathBuf::from("prompts"));
        }
        let w = &mut self.paths_as_written;
        crate::paths::resolve("data_path", &mut self.data_path, base, w)?;
        crate::paths::resolve("prompts", &mut self.prompts, base, w)?;
        self.llm.resolve_paths(base, w)
    }

    /// The bar data the run reads.
    pub fn data_path(&self) -> PathBuf {
        self.data_path
            .clone()
            .unwrap_or_else(|| PathBuf::from("data/lean"))
    }

    /// The prompt templates the run starts from.
    pub fn prompt_dir(&self) -> PathBuf {
        self.prompts
            .clone()
            .unwrap_or_else(|| PathBuf::from("prompts"))
    }

    /// Every table checked, the table named in the error.
    pub fn validate(&self) -> Result<()> {
        self.data
            .validate()
            .map_err(|m| StudyError::msg(format!("[data] {m}")))?;
        self.env.validate()?;
        self.evolve
            .validate()
            .map_err(|m| StudyError::msg(format!("[evolve] {m}")))?;
        self.cluster.validate()?;
        Ok(())
    }
}

/// Validation settings of `serl train`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValidationConfig {
    /// Validation orders scored each time (spread evenly over the split).
    pub max_orders: usize,
}

impl Default for ValidationConfig {
    fn default() -> Self {
        ValidationConfig { max_orders: 300 }
    }
}

/// `serl train`'s config.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainFile {
    /// How the bars are read, cleaned and split (`[data]`).
    pub data: DataConfig,
    /// The parent orders drawn (`[orders]`).
    pub orders: OrderConfig,
    /// The environment the agent trains in (`[env]`).
    pub env: EnvConfig,
    /// The dynamic market's population (`[market]`).
    pub market: MarketConfig,
    /// The learner and its schedule (`[train]`).
    pub train: TrainConfig,
    /// How the policy is scored while it trains (`[validation]`).
    pub validation: ValidationConfig,
    /// A reward program in the reward module's language (docs/modules.md),
    /// for example `step_pa + (fill_qty - 1 / steps) * timing`; the default
    /// reward when absent.
    pub reward: Option<String>,
    /// The rolling windows of `serl train --walk-forward`.
    pub walk_forward: WalkForwardConfig,
    /// Where the bars came from (filled in by `serl train`).
    pub data_path: Option<PathBuf>,
    /// The language model of an LLM reward critic
    /// (`[train.reward_critic] critic = "llm"`; docs/hierarchy.md): the
    /// `[llm]` table of the evolve configs.
    pub llm: LlmSection,
    /// The templates an LLM critic renders (`reward_critic.j2`; default
    /// `prompts/`).
    pub prompts: Option<PathBuf>,
    /// The run's paths as written, by field (crate::paths).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub paths_as_written: BTreeMap<String, PathBuf>,
}

impl TrainFile {
    /// Reads the config file at `path`; its relative paths are taken from
    /// its directory.
    pub fn read(path: &Path) -> Result<TrainFile> {
        let mut cfg: TrainFile = read_toml(path)?;
        cfg.resolve_paths(Base::Config(path))?;
        Ok(cfg)
    }

    /// Makes every path absolute against `base`, keeping each as written.
    pub fn resolve_paths(&mut self, base: Base) -> Result<()> {
        let w = &mut self.paths_as_written;
        crate::paths::resolve("data_path", &mut self.data_path, base, w)?;
        crate::paths::resolve("prompts", &mut self.prompts, base, w)?;
        self.llm.resolve_paths(base, w)
    }

    /// The tables a new run checks, the table named in the error; the
    /// discrete actions belong to the learner's table.
    pub fn validate(&self) -> Result<()> {
        self.data
            .validate()
            .map_err(|m| StudyError::msg(format!("[data] {m}")))?;
        self.env.validate()?;
        if let serl_env::ActionSpace::Discrete(_) = self.env.action {
            crate::bail!("[env] action: training sets its discrete actions in [train.ppo] discrete or [train.ddqn] actions; leave [env] action continuous");
        }
        Ok(())
    }
}

/// `serl backtest`'s config.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BacktestFile {
    /// How the bars are read, cleaned and split (`[data]`).
    pub data: DataConfig,
    /// The parent orders drawn (`[orders]`).
    pub orders: OrderConfig,
    /// The environment the orders play in (`[env]`).
    pub env: EnvConfig,
    /// The dynamic market's population (for --env dynamic|both).
    pub market: MarketConfig,
    /// Where the orders are replayed (`[cluster] engine`).
    pub cluster: ClusterConfig,
}

impl BacktestFile {
    /// The orders, decisions and market a team trained with
    /// (`RUN_DIR/train.toml`), replayed here.
    pub fn of_training(t: TrainFile) -> BacktestFile {
        BacktestFile {
            data: t.data,
            orders: t.orders,
            env: t.env,
            market: t.market,
            cluster: ClusterConfig::default(),
        }
    }

    /// Every table checked, the table named in the error.
    pub fn validate(&self) -> Result<()> {
        self.cluster.validate()?;
        self.data
            .validate()
            .map_err(|m| StudyError::msg(format!("[data] {m}")))?;
        self.env.validate()?;
        Ok(())
    }
}

/// A `serl simulate` config: the data layer and the market.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimulateFile {
    /// How the bars are read, cleaned and split (`[data]`).
    pub data: DataConfig,
    /// The simulated market's population (`[market]`).
    pub market: MarketConfig,
    /// Where the seeds are simulated (`[cluster] engine`).
    pub cluster: ClusterConfig,
}

/// The dotted paths at which two configs differ, with both values: what a
/// resumed run would change.
pub(crate) fn differences<T: Serialize>(was: &T, now: &T) -> Result<Vec<String>> {
    let (was, now) = (serde_json::to_value(was)?, serde_json::to_value(now)?);
    let mut out = Vec::new();
    differences_at("", &was, &now, &mut out);
    Ok(out)
}

fn differences_at(at: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value::Object;
    match (a, b) {
        (Object(x), Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let null = serde_json::Value::Null;
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                differences_at(
                    &path,
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        _ if a != b => out.push(format!("{at} (the run has {a}, now {b})")),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--llm` lists [`LlmChoice::NAMES`]: each reads as `[llm] backend`
    /// reads it and writes back the same, one designer each; a new designer
    /// fails to compile here until it is listed.
    #[test]
    fn every_designer_is_named_as_the_config_names_it() {
        let index = |c: LlmChoice| match c {
            LlmChoice::Builtin => 0,
            LlmChoice::Openai => 1,
            LlmChoice::Ollama => 2,
            LlmChoice::Local => 3,
            LlmChoice::Replay => 4,
            LlmChoice::Grammar => 5,
        };
        for (i, name) in LlmChoice::NAMES.iter().enumerate() {
            let c: LlmChoice = serde_json::from_str(&format!("\"{name}\"")).unwrap();
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{name}\""));
            assert_eq!(index(c), i, "{name}");
        }
    }
    use serl_cluster::EngineKind;

    /// `(file name, path)` of every shipped config whose name starts with
    /// `prefix`. Read at run time: a clone sharing the target directory
    /// must check its own files.
    fn shipped_configs(prefix: &str) -> Vec<(String, PathBuf)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&root)
            .expect("configs/ is readable")
            .map(|e| e.expect("a directory entry").path())
            .filter_map(|p| {
                let name = p.file_name()?.to_string_lossy().to_string();
                (name.starts_with(prefix) && name.ends_with(".toml")).then_some((name, p))
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn every_shipped_evolve_config_parses_and_validates() {
        let configs = shipped_configs("evolve");
        for (name, p) in &configs {
            let cfg: EvolveFile = read_toml(p).unwrap();
            cfg.evolve
                .validate()
                .unwrap_or_else(|m| panic!("{name}: {m}"));
        }
        assert!(configs.len() >= 4, "found {} evolve configs", configs.len());
    }

    #[test]
    fn the_slurm_config_is_the_quick_run_on_slurm() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs");
        let read = |name: &str| read_toml::<EvolveFile>(&dir.join(name)).unwrap();
        let (quick, mut slurm) = (read("evolve.toml"), read("evolve-slurm.toml"));
        assert_eq!(slurm.cluster.engine, EngineKind::Slurm);
        slurm.cluster = quick.cluster.clone();
        // Without the embedded backend `[llm.local]` is kept as written,
        // and the quick config writes its defaults out.
        slurm.llm.local = quick.llm.local.clone();
        assert_eq!(
            toml::to_string(&slurm).unwrap(),
            toml::to_string(&quick).unwrap(),
            "evolve-slurm.toml must be evolve.toml with a [cluster] table"
        );
    }

    #[test]
    fn every_shipped_train_config_parses_and_validates() {
        let configs = shipped_configs("train");
        for (name, p) in &configs {
            let cfg: TrainFile = read_toml(p).unwrap();
            cfg.env.validate().unwrap();
            cfg.train
                .validate(cfg.train.obs_dim())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            crate::train::reward_of(&cfg).unwrap_or_else(|e| panic!("{name}: {}", e.chain()));
        }
        assert!(configs.len() >= 2, "found {} train configs", configs.len());
    }

    #[test]
    fn differences_name_the_setting_and_both_values() {
        let mut now = TrainFile::default();
        now.train.seed += 1;
        let d = differences(&TrainFile::default(), &now).unwrap();
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(d[0].starts_with("train.seed (the run has"), "{d:?}");
    }
}
