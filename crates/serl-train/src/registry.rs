//! The learner registry: which [`Learner`] each `algo` of a config names.
//! Adding an algorithm is its module (implementing [`Learner`]) and one
//! arm in [`registered`]; everything else asks the registry.

use burn::tensor::Device;
use serl_design::NetworkSpec;

use crate::config::TrainConfig;
use crate::ddqn::learner::DdqnLearner;
use crate::learner::{AnyLearner, Extras, Learner};
use crate::policy::{ActionShape, Algo, PolicyMeta};
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
            extras: L::EXTRAS,
            build: build_boxed::<L>,
            shape: L::shape,
            fused_switch: L::fused_switch,
            check: L::check,
        }
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
        for algo in [Algo::Ppo, Algo::Ddqn, Algo::Sac] {
            assert_eq!(registered(algo).algo, algo);
        }
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
