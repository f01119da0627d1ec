//! The learner registry: every learner, in the order commands list them.
//! Adding an algorithm is its module (implementing [`Learner`]) and one
//! line in [`LEARNERS`]; its name, its network, its table of `[train]`
//! and its checks all come from there, and everything else asks the
//! registry.

use burn::tensor::Device;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serl_design::NetworkSpec;

use crate::algo::Algo;
use crate::config::TrainConfig;
use crate::learner::{AnyLearner, Extras, Learner};
use crate::policy::{ActionShape, Model, NetworkKind, PolicyMeta};
use crate::tables::{LearnerTables, Settings, Table};
use crate::TrainError;

/// The registry: each learner, in the order commands list them.
static LEARNERS: &[Registered] = &[
    Registered::of::<crate::ppo::learner::PpoLearner>(),
    Registered::of::<crate::ddqn::learner::DdqnLearner>(),
    Registered::of::<crate::sac::learner::SacLearner>(),
];

/// Builds a boxed learner for a config (see [`Learner::build`]).
type BuildFn =
    fn(&TrainConfig, &PolicyMeta, &Device, &Device) -> Result<Box<dyn AnyLearner>, TrainError>;

/// How the registry reads a learner's own table and makes its default.
#[derive(Clone, Copy)]
struct TableKind {
    parse: fn(serde_json::Value) -> Result<Box<dyn Table>, String>,
    default: fn() -> Box<dyn Table>,
}

fn parse_table<S: Settings>(v: serde_json::Value) -> Result<Box<dyn Table>, String> {
    match serde_json::from_value::<S>(v) {
        Ok(s) => Ok(Box::new(s)),
        Err(e) => Err(e.to_string()),
    }
}

fn default_table<S: Settings>() -> Box<dyn Table> {
    Box::new(S::default())
}

/// One algorithm of the registry: how to build its learner, and what it
/// promises before one is built.
#[derive(Clone, Copy)]
pub struct Registered {
    /// The algorithm.
    pub algo: Algo,
    /// Its name in messages.
    pub name: &'static str,
    /// Its name in configs and on command lines.
    pub key: &'static str,
    /// The kind of network its policies have.
    pub network_kind: NetworkKind,
    /// What of the config beyond its own table it takes.
    pub extras: Extras,
    build: BuildFn,
    /// Its own table of `[train]`; `None` for PPO's, a field of
    /// [`TrainConfig`] itself.
    table: Option<TableKind>,
    pub(crate) shape: fn(&TrainConfig) -> ActionShape,
    pub(crate) fused_switch: fn(&TrainConfig) -> bool,
    pub(crate) check: fn(&TrainConfig) -> Result<(), TrainError>,
}

impl Registered {
    /// The entry of learner `L`.
    const fn of<L: Learner + 'static>() -> Self {
        Registered {
            algo: Algo::from_key(L::KEY),
            name: L::NAME,
            key: L::KEY,
            network_kind: L::NETWORK,
            extras: L::EXTRAS,
            build: build_boxed::<L>,
            table: if L::OWN_TABLE {
                Some(TableKind {
                    parse: parse_table::<L::Config>,
                    default: default_table::<L::Config>,
                })
            } else {
                None
            },
            shape: L::shape,
            fused_switch: L::fused_switch,
            check: L::check,
        }
    }
}

impl Registered {
    /// A freshly initialised network for its policies, as `meta` describes.
    pub fn network(&self, meta: &PolicyMeta, device: &Device) -> Result<Model, TrainError> {
        Model::build(meta, self.network_kind, device)
    }
}

impl Algo {
    /// Every learner, in the order commands list them.
    pub fn all() -> impl Iterator<Item = Algo> {
        LEARNERS.iter().map(|r| r.algo)
    }

    /// Every learner's [`Algo::key`], in [`Algo::all`]'s order.
    pub fn keys() -> Vec<&'static str> {
        Algo::all().map(Algo::key).collect()
    }
}

/// A name no learner has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no learner is called `{name}`: one of {}", Algo::keys().join(", "))]
pub struct UnknownAlgo {
    /// The name asked for.
    pub name: String,
}

impl std::str::FromStr for Algo {
    type Err = UnknownAlgo;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algo::all()
            .find(|a| a.key() == s)
            .ok_or_else(|| UnknownAlgo {
                name: s.to_string(),
            })
    }
}

impl TrainConfig {
    /// Learner `L`'s own table (`[train.<key>]`); PPO's is [`Self::ppo`].
    pub fn table<L: Learner>(&self) -> &L::Config {
        self.learners
            .get(L::KEY)
            .expect("every registered learner's table is held, at its defaults if unset")
    }

    /// The same, to change.
    pub fn table_mut<L: Learner>(&mut self) -> &mut L::Config {
        self.learners
            .get_mut(L::KEY)
            .expect("every registered learner's table is held, at its defaults if unset")
    }
}

/// The learners with a table of their own, and how to read it.
fn own_tables() -> impl Iterator<Item = (&'static str, TableKind)> {
    LEARNERS.iter().filter_map(|r| Some((r.key, r.table?)))
}

impl Default for LearnerTables {
    fn default() -> Self {
        LearnerTables(own_tables().map(|(k, t)| (k, (t.default)())).collect())
    }
}

impl<'de> Deserialize<'de> for LearnerTables {
    /// The keys [`TrainConfig`] does not name itself: each must be a
    /// learner's table, so that a misspelt setting is still refused.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TablesVisitor)
    }
}

struct TablesVisitor;

impl<'de> Visitor<'de> for TablesVisitor {
    type Value = LearnerTables;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("the learners' tables")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LearnerTables, A::Error> {
        use serde::de::Error;
        let mut tables = LearnerTables::default();
        while let Some(key) = map.next_key::<String>()? {
            let Some((k, kind)) = own_tables().find(|(k, _)| *k == key) else {
                let tables: Vec<String> =
                    own_tables().map(|(k, _)| format!("[train.{k}]")).collect();
                return Err(A::Error::custom(format!(
                    "unknown field `{key}`: neither a setting of [train] nor a learner's table ({})",
                    tables.join(", ")
                )));
            };
            let value: serde_json::Value = map.next_value()?;
            let table =
                (kind.parse)(value).map_err(|e| A::Error::custom(format!("[train.{k}]: {e}")))?;
            if let Some(slot) = tables.0.iter_mut().find(|(slot, _)| *slot == k) {
                slot.1 = table;
            }
        }
        Ok(tables)
    }
}

fn build_boxed<L: Learner + 'static>(
    cfg: &TrainConfig,
    meta: &PolicyMeta,
    autodiff: &Device,
    device: &Device,
) -> Result<Box<dyn AnyLearner>, TrainError> {
    Ok(Box::new(L::build(cfg, meta, autodiff, device)?))
}

/// The registry's entry for the learner `algo` names.
pub fn registered(algo: Algo) -> Registered {
    *LEARNERS
        .iter()
        .find(|r| r.algo == algo)
        .expect("an Algo is made only from a registered learner's key")
}

/// The learner `cfg` trains with (its `algo`), its network initialised on
/// `autodiff` and acting on `device`.
pub fn build_learner(
    cfg: &TrainConfig,
    meta: &PolicyMeta,
    autodiff: &Device,
    device: &Device,
) -> Result<Box<dyn AnyLearner>, TrainError> {
    (registered(cfg.algo).build)(cfg, meta, autodiff, device)
}

/// Whether training `network` with `algo`, under `cfg`'s other settings,
/// gives the same numbers however many trainings share the machine: then
/// several may run side by side (parallel candidates) without changing
/// any result. Only the fused backends do: burn's autodiff sums in
/// parallel in an order that depends on what else the machine runs.
pub fn reproducible_side_by_side(cfg: &TrainConfig, algo: Algo, network: &NetworkSpec) -> bool {
    cfg.fused_backend_for(algo, network)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each learner's table is its own: read by its key, refused by name
    /// when it or a setting beside it is misspelt, and written back only
    /// where it differs from its defaults.
    #[test]
    fn learners_tables_read_check_and_write_by_their_keys() {
        // A `[train]` as configs wrote it before the tables were keyed,
        // DDQN's table in full: it reads as the defaults it spells out.
        let before = r#"
            algo = "ddqn"
            total_steps = 5000
            [ppo]
            n_steps = 64
            [ddqn]
            actions = [0.0, 0.05, 0.1, 0.25, 0.5, 1.0]
            buffer = 50000
            batch_size = 32
            learning_rate = 0.001
            gamma = 0.99
            epsilon_start = 1.0
            epsilon_end = 0.05
            epsilon_decay_steps = 20000
            learning_starts = 1000
            gradient_steps = 1
            target_every = 1000
            max_grad_norm = 10.0
        "#;
        let cfg: TrainConfig = toml::from_str(before).unwrap();
        assert_eq!(cfg.algo, Algo::DDQN);
        assert_eq!(cfg.ppo.n_steps, 64);
        let ddqn = cfg.table::<crate::DdqnLearner>();
        assert_eq!(ddqn.batch_size, 32);
        assert!(ddqn.fused, "unset, at its default");
        assert_eq!(
            cfg.table::<crate::SacLearner>(),
            &crate::SacConfig::default()
        );
        // Written back: DDQN's table (it differs), no SAC table; the same
        // config reads back from TOML and from JSON.
        let text = toml::to_string(&cfg).unwrap();
        assert!(text.contains("[ddqn]") && !text.contains("[sac]"), "{text}");
        assert_eq!(toml::from_str::<TrainConfig>(&text).unwrap(), cfg);
        let json = serde_json::to_string(&cfg).unwrap();
        assert_eq!(serde_json::from_str::<TrainConfig>(&json).unwrap(), cfg);
        // The defaults write no learner's table.
        let plain = toml::to_string(&TrainConfig::default()).unwrap();
        assert!(
            !plain.contains("[ddqn]") && !plain.contains("[sac]"),
            "{plain}"
        );

        let typo = toml::from_str::<TrainConfig>("totl_steps = 5").unwrap_err();
        assert!(
            typo.to_string().contains("unknown field `totl_steps`"),
            "{typo}"
        );
        let inner = toml::from_str::<TrainConfig>("[sac]\nbufer = 5").unwrap_err();
        let said = inner.to_string();
        assert!(
            said.contains("[train.sac]") && said.contains("bufer"),
            "{said}"
        );
        // A table's own checks run with the rest of the config.
        let mut bad = TrainConfig::default();
        bad.table_mut::<crate::DdqnLearner>().gamma = 1.5;
        let err = bad.validate_settings(serl_env::OBS_DIM).unwrap_err();
        assert!(err.to_string().contains("ddqn.gamma"), "{err}");
    }

    /// The learners every `Algo` constant names are registered under the
    /// same key.
    #[test]
    fn the_named_learners_are_registered() {
        assert_eq!(registered(Algo::PPO).name, "PPO");
        assert_eq!(registered(Algo::DDQN).name, "DDQN");
        assert_eq!(Algo::keys(), ["ppo", "ddqn", "sac"]);
    }

    #[test]
    fn every_algorithm_is_registered_under_its_own_name() {
        for algo in Algo::all() {
            assert_eq!(registered(algo).algo, algo);
        }
    }

    /// A learner's key is the name configs and policy files already carry
    /// (`"algo": "ppo"`), and reads back as the learner.
    #[test]
    fn a_key_is_the_config_name_and_parses_back() {
        for algo in Algo::all() {
            let json = serde_json::to_string(&algo).unwrap();
            assert_eq!(json, format!("\"{}\"", algo.key()));
            assert_eq!(algo.key().parse::<Algo>(), Ok(algo));
        }
        let err = "td3".parse::<Algo>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "no learner is called `td3`: one of ppo, ddqn, sac"
        );
    }

    #[test]
    fn only_fused_trainings_are_reproducible_side_by_side() {
        let cfg = TrainConfig::default();
        let mlp = NetworkSpec::default();
        for algo in [Algo::PPO, Algo::DDQN] {
            assert!(reproducible_side_by_side(&cfg, algo, &mlp), "{algo:?}");
        }
        assert_eq!(
            reproducible_side_by_side(&cfg, Algo::PPO, &mlp),
            cfg.trains_fused()
        );
        let burn = TrainConfig {
            ppo: crate::ppo::PpoConfig {
                fused: false,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut burn = burn;
        burn.table_mut::<crate::DdqnLearner>().fused = false;
        for algo in [Algo::PPO, Algo::DDQN] {
            assert!(!reproducible_side_by_side(&burn, algo, &mlp), "{algo:?}");
        }
        // Book attention trains fused too, like every block of the grammar.
        let attention = NetworkSpec {
            blocks: vec![serl_design::BlockSpec::BookAttention {
                d_model: 8,
                heads: 2,
            }],
            ..Default::default()
        };
        for algo in [Algo::PPO, Algo::DDQN] {
            assert!(
                reproducible_side_by_side(&cfg, algo, &attention),
                "{algo:?}"
            );
            assert!(
                !reproducible_side_by_side(&burn, algo, &attention),
                "{algo:?}"
            );
        }
    }
}
