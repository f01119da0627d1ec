//! The environments a config trains in over real orders: the builder
//! above the environments themselves (`task.rs`, `features.rs`,
//! `team_env.rs`), which it picks between and wraps.

use std::sync::Arc;

use serl_env::{
    DynamicVenue, EnvConfig, MarketConfig, MarketData, ParentOrder, Reward, StaticVenue, Venue,
};

use crate::config::TrainConfig;
use crate::features::WithFeatures;
use crate::task::{ExecutionEnv, TrainEnv};
use crate::team::Channel;
use crate::team_env::TeamEnv;
use crate::TrainError;

/// The environments a [`TrainConfig`] asks for over real orders:
/// `n_envs − dynamic_envs()` static ones and the rest dynamic (the first
/// `imagination.share` of those on imagined days), each carrying the
/// config's designed features.
pub fn execution_envs<'a>(
    cfg: &TrainConfig,
    market: &'a MarketData,
    orders: &'a [ParentOrder],
    env: &'a EnvConfig,
    reward: Arc<dyn Reward>,
    base_market: &MarketConfig,
) -> Result<Vec<Box<dyn TrainEnv + 'a>>, TrainError> {
    let observed = cfg.observed_features();
    let features =
        (!observed.is_empty()).then(|| observed.with_queue_input(!cfg.placements.is_empty()));
    let channel = cfg
        .team
        .as_ref()
        .and_then(|t| t.communication.as_ref())
        .map(Channel::new);
    let mut envs: Vec<Box<dyn TrainEnv + 'a>> = Vec::with_capacity(cfg.n_envs);
    for i in 0..cfg.n_envs {
        let venue = training_venue(cfg, base_market, i);
        if cfg.learning_team().is_some() {
            let e = TeamEnv::new(market, orders, env, reward.clone(), venue, cfg);
            envs.push(Box::new(e));
            continue;
        }
        let mut e = ExecutionEnv::new(market, orders, env, reward.clone(), venue)
            .with_pace(cfg.pace())
            .with_placements(&cfg.placements)
            .with_imagined_replay(cfg.imagination.replay_share, &cfg.imagination.scenarios);
        if let Some(team) = &cfg.team {
            e = e.with_team(team, channel.clone());
        }
        match &features {
            Some(f) => envs.push(Box::new(WithFeatures::new(e, f.clone()))),
            None => envs.push(Box::new(e)),
        }
    }
    Ok(envs)
}

/// Where environment `i` of `cfg`'s plays: the first `n_envs −
/// dynamic_envs()` replay history, the rest play the dynamic market
/// (`cfg.dynamic_market`: the calibrated population, an imagined scenario
/// for their share, a coarser flow where set). A dynamic venue's `seed`
/// is unused in training: every episode draws its own.
pub fn training_venue(
    cfg: &TrainConfig,
    base_market: &MarketConfig,
    i: usize,
) -> Box<dyn Venue + Send> {
    let n_static = cfg.n_envs - cfg.dynamic_envs();
    if i < n_static {
        Box::new(StaticVenue)
    } else {
        Box::new(DynamicVenue {
            market: cfg.dynamic_market(base_market, i - n_static),
            seed: 0,
        })
    }
}
