//! Scoring a policy on held-out orders: the validation PA the trainer
//! selects checkpoints by.

use rayon::prelude::*;
use serl_env::{run_static, EnvConfig, MarketData, ParentOrder};

use crate::policy::Policy;
use crate::policy_strategy::PolicyStrategy;

/// Mean PA (bps) of `policy`, acting greedily, over `orders` in the static
/// environment.
pub fn static_pa(
    policy: &Policy,
    market: &MarketData,
    orders: &[ParentOrder],
    cfg: &EnvConfig,
) -> f64 {
    let reward = cfg.default_reward();
    let pas: Vec<f64> = orders
        .par_iter()
        .map_init(
            || PolicyStrategy::new(policy.clone(), "policy".into()),
            |s, o| {
                market
                    .get(&o.symbol, o.date)
                    .map(|view| run_static(s, view, o, cfg, &reward, false).pa_bps())
            },
        )
        .flatten()
        .collect();
    if pas.is_empty() {
        0.0
    } else {
        pas.iter().sum::<f64>() / pas.len() as f64
    }
}
