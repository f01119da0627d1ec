//! Hybrid-environment loss weighting: L = α·L_static + β·L_dynamic.
//!
//! In the adaptive mode α and β move toward each environment's share of
//! the loss through an EMA, are held above a floor, and are normalised to
//! sum to 1, so that the environment the agent currently fits worse gets
//! more of the gradient without the other being forgotten.

use serde::{Deserialize, Serialize};

/// How the static and dynamic losses are weighted, and which
/// environments are played.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HybridMode {
    /// Both environments; α and β follow each one's share of the loss
    /// (the SE-RL default).
    Adaptive,
    /// Ablation: fixed α (β = 1 − α).
    Fixed,
    /// Ablation: only static rollouts are collected.
    StaticOnly,
    /// Ablation: only dynamic (and imagined) rollouts are collected.
    DynamicOnly,
}

impl HybridMode {
    /// Every weighting's name, as configs spell it and the command line
    /// lists it (with `-` for `_`).
    pub const NAMES: [&'static str; 4] = ["adaptive", "fixed", "static_only", "dynamic_only"];
}

/// The hybrid loss's settings (`[train.hybrid]` in configs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HybridConfig {
    /// How the weights move and which environments play.
    pub mode: HybridMode,
    /// Start (and, in the fixed mode, constant) weight of the static loss.
    pub alpha: f64,
    /// EMA rate toward the loss shares, per update.
    pub ema: f64,
    /// Neither weight falls below this.
    pub floor: f64,
    /// How many of the rollout environments play the dynamic market.
    pub dynamic_envs: usize,
    /// A coarser order flow for the dynamic environments to train on
    /// (none: the calibrated one). Validation and the test always play
    /// the calibrated market; this only makes training's days cheaper.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coarse_flow: Option<serl_env::Coarsening>,
}

impl Default for HybridConfig {
    fn default() -> Self {
        HybridConfig {
            mode: HybridMode::Adaptive,
            alpha: 0.5,
            ema: 0.2,
            floor: 0.1,
            dynamic_envs: 2,
            coarse_flow: None,
        }
    }
}

/// The current α and β.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LossWeights {
    /// Weight of the static loss.
    pub alpha: f64,
    /// Weight of the dynamic loss.
    pub beta: f64,
}

impl LossWeights {
    /// The starting weights: α = `cfg.alpha`, β = 1 − α, or all on the one
    /// environment of a single-environment mode.
    pub fn new(cfg: &HybridConfig) -> Self {
        match cfg.mode {
            HybridMode::StaticOnly => LossWeights {
                alpha: 1.0,
                beta: 0.0,
            },
            HybridMode::DynamicOnly => LossWeights {
                alpha: 0.0,
                beta: 1.0,
            },
            _ => LossWeights {
                alpha: cfg.alpha,
                beta: 1.0 - cfg.alpha,
            },
        }
    }

    /// Moves the weights after an update whose mean losses were
    /// `static_loss` and `dynamic_loss` (`None` where the update had no
    /// samples of that kind).
    pub fn update(
        &mut self,
        cfg: &HybridConfig,
        static_loss: Option<f64>,
        dynamic_loss: Option<f64>,
    ) {
        if cfg.mode != HybridMode::Adaptive {
            return;
        }
        let (Some(ls), Some(ld)) = (static_loss, dynamic_loss) else {
            return;
        };
        let (ls, ld) = (ls.abs(), ld.abs());
        if !(ls + ld).is_finite() || ls + ld <= 0.0 {
            return;
        }
        let target = ls / (ls + ld);
        let a = (1.0 - cfg.ema) * self.alpha + cfg.ema * target;
        let b = (1.0 - cfg.ema) * self.beta + cfg.ema * (1.0 - target);
        let (a, b) = (a.max(cfg.floor), b.max(cfg.floor));
        self.alpha = a / (a + b);
        self.beta = b / (a + b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line lists [`HybridMode::NAMES`]: each reads as the config
    /// reads it, and every variant is listed in its place (a new one fails
    /// to compile here until it is).
    #[test]
    fn every_weighting_is_named_as_the_config_names_it() {
        use serde::de::value::{Error, StrDeserializer};
        let index = |v: HybridMode| match v {
            HybridMode::Adaptive => 0,
            HybridMode::Fixed => 1,
            HybridMode::StaticOnly => 2,
            HybridMode::DynamicOnly => 3,
        };
        for (i, name) in HybridMode::NAMES.iter().enumerate() {
            let v = HybridMode::deserialize(StrDeserializer::<Error>::new(name)).unwrap();
            assert_eq!(index(v), i, "{name}");
        }
    }

    #[test]
    fn weights_follow_the_loss_shares_but_never_drop_below_the_floor() {
        let cfg = HybridConfig::default();
        let mut w = LossWeights::new(&cfg);
        for _ in 0..100 {
            w.update(&cfg, Some(9.0), Some(1.0));
        }
        assert!((w.alpha - 0.9).abs() < 1e-6, "{w:?}");
        for _ in 0..100 {
            w.update(&cfg, Some(0.0), Some(5.0));
        }
        assert!(
            (w.alpha - cfg.floor / (cfg.floor + 1.0)).abs() < 0.02,
            "{w:?}"
        );
        assert!((w.alpha + w.beta - 1.0).abs() < 1e-12);
    }

    #[test]
    fn fixed_and_single_environment_modes_do_not_move() {
        let cfg = HybridConfig {
            mode: HybridMode::Fixed,
            alpha: 0.3,
            ..Default::default()
        };
        let mut w = LossWeights::new(&cfg);
        w.update(&cfg, Some(9.0), Some(1.0));
        assert_eq!(
            w,
            LossWeights {
                alpha: 0.3,
                beta: 0.7
            }
        );
        let cfg = HybridConfig {
            mode: HybridMode::StaticOnly,
            ..Default::default()
        };
        assert_eq!(
            LossWeights::new(&cfg),
            LossWeights {
                alpha: 1.0,
                beta: 0.0
            }
        );
    }
}
