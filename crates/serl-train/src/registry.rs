//! The learner registry: which [`Learner`] each `algo` of a config names.
//! Adding an algorithm is its module (implementing [`Learner`]) and one
//! arm in [`registered`]; everything else asks the registry.

use burn::tensor::Device;
use serl_design::NetworkSpec;

use crate::algo::Algo;
use crate::config::TrainConfig;
use crate::ddqn::learner::DdqnLearner;
use crate::learner::{AnyLearner, Extras, Learner};
use crate::policy::{ActionShape, Model, NetworkKind, PolicyMeta};
use crate::ppo::learner::PpoLearner;
use crate::sac::learner::SacLearner;
use crate::TrainError;

/// Builds a boxed learner for a config (see [`Learner::build`]).
type BuildFn =
    fn(&TrainConfig, &PolicyMeta, &Device, &Device) -> Result<Box<dyn AnyLearner>, TrainError>;

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
    pub(crate) shape: fn(&TrainConfig) -> ActionShape,
    pub(crate) fused_switch: fn(&TrainConfig) -> bool,
    pub(crate) check: fn(&TrainConfig) -> Result<(), TrainError>,
}

impl Registered {
    /// The entry of learner `L`.
    const fn of<L: Learner + 'static>() -> Self {
        Registered {
            algo: L::ALGO,
            name: L::NAME,
            key: L::KEY,
            network_kind: L::NETWORK,
            extras: L::EXTRAS,
            build: build_boxed::<L>,
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
    /// Its name in configs and on command lines (`ppo`).
    pub fn key(self) -> &'static str {
        registered(self).key
    }

    /// Every learner's [`Algo::key`], in [`Algo::ALL`]'s order.
    pub fn keys() -> Vec<&'static str> {
        Algo::ALL.iter().map(|a| a.key()).collect()
    }
}

impl std::fmt::Display for Algo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
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
        Algo::ALL
            .into_iter()
            .find(|a| a.key() == s)
            .ok_or_else(|| UnknownAlgo {
                name: s.to_string(),
            })
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

/// The registry: the learner `algo` names.
pub fn registered(algo: Algo) -> Registered {
    match algo {
        Algo::Ppo => Registered::of::<PpoLearner>(),
        Algo::Ddqn => Registered::of::<DdqnLearner>(),
        Algo::Sac => Registered::of::<SacLearner>(),
    }
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

    #[test]
    fn every_algorithm_is_registered_under_its_own_name() {
        for algo in Algo::ALL {
            assert_eq!(registered(algo).algo, algo);
        }
    }

    /// A learner's key is the name configs and policy files already carry
    /// (`"algo": "ppo"`), and reads back as the learner.
    #[test]
    fn a_key_is_the_config_name_and_parses_back() {
        for algo in Algo::ALL {
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
        for algo in [Algo::Ppo, Algo::Ddqn] {
            assert!(reproducible_side_by_side(&cfg, algo, &mlp), "{algo:?}");
        }
        assert_eq!(
            reproducible_side_by_side(&cfg, Algo::Ppo, &mlp),
            cfg.trains_fused()
        );
        let burn = TrainConfig {
            ppo: crate::ppo::PpoConfig {
                fused: false,
                ..Default::default()
            },
            ddqn: crate::ddqn::DdqnConfig {
                fused: false,
                ..Default::default()
            },
            ..Default::default()
        };
        for algo in [Algo::Ppo, Algo::Ddqn] {
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
        for algo in [Algo::Ppo, Algo::Ddqn] {
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
