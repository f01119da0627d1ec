//! Scoring a policy on held-out orders: the validation PA the trainer
//! selects checkpoints by.

use rayon::prelude::*;
use serl_env::{run_static, DefaultReward, EnvConfig, MarketData, ParentOrder};

use crate::policy::{Policy, PolicyStrategy};

/// Mean PA (bps) of `policy`, acting greedily, over `orders` in the static
/// environment.
pub fn static_pa(
    policy: &Policy,
    market: &MarketData,
    orders: &[ParentOrder],
    cfg: &EnvConfig,
) -> f64 {
    let reward = DefaultReward {
        inventory_penalty: cfg.inventory_penalty,
        terminal_penalty: cfg.terminal_penalty,
    };
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

/// Mean episode PA of `policy`, acting greedily, over `episodes` episodes
/// of `env` (episode `i` drawn with seed `seed + i`).
pub fn greedy_pa(
    policy: &Policy,
    env: &mut dyn crate::TrainEnv,
    episodes: usize,
    seed: u64,
) -> f64 {
    use crate::policy::History;
    let dim = policy.meta.obs_dim;
    let mut rng = crate::task::env_rng(seed, 0);
    let mut total = 0.0;
    let mut obs = vec![0f32; dim];
    let mut row = Vec::new();
    for _ in 0..episodes {
        env.reset(&mut rng);
        let mut h = History::new(policy.meta.spec.window, dim);
        loop {
            env.observe(&mut obs);
            policy.meta.norm.apply(&mut obs);
            h.push(&obs);
            row.clear();
            h.write(&mut row);
            let a = policy.act(&row, 1, false, 0.0, &mut rng)[0].env_action;
            if env.step(a).1 {
                break;
            }
        }
        total += env.episode_pa();
    }
    total / episodes.max(1) as f64
}
