//! A backtest run, as `serl backtest` makes one of strategies: the
//! config it runs with (its config file, or the training config of the
//! first team it plays, since a team plays the orders, steps and market
//! it trained on, or the defaults; with the command line's overrides on
//! top, checked), the request checked before any order plays, and the
//! orders played here or as shards on a cluster.

use std::path::{Path, PathBuf};

use serl_cluster::EngineKind;
use serl_env::Quantity;
use serl_eval::OrderResult;

use crate::backtest::{replay, strategy_factory, BacktestData, EnvChoice, PlayedAt, NEEDS_LOBSTER};
use crate::config::{read_toml, BacktestFile, TrainFile};
use crate::error::Result;
use crate::tasks::shards::{self, Backtest};

/// What the command line changes of a backtest's config.
#[derive(Debug, Clone, Default)]
pub struct BacktestOverrides {
    /// An `[orders]` table of its own, from this file.
    pub orders: Option<PathBuf>,
    /// Each order's size as a fraction of the day's volume.
    pub qty_adv: Option<f64>,
    /// Each order's size in shares.
    pub qty_shares: Option<f64>,
    /// Only these symbols (none: the config's).
    pub symbols: Vec<String>,
    /// The orders' seed.
    pub seed: Option<u64>,
    /// Minutes between decisions.
    pub decision_minutes: Option<u16>,
    /// Where the orders play: here, or shards on a cluster's engine.
    pub engine: Option<EngineKind>,
}

/// The config of a backtest of `config` (else of the first of `teams`
/// that has a `train.toml`, else the defaults), with `o` applied.
pub fn resolve(
    config: Option<&Path>,
    teams: &[PathBuf],
    o: &BacktestOverrides,
) -> Result<BacktestFile> {
    let mut cfg: BacktestFile = match (config, teams.first()) {
        (Some(p), _) => read_toml(p)?,
        (None, Some(dir)) if dir.join("train.toml").exists() => {
            BacktestFile::of_training(read_toml::<TrainFile>(&dir.join("train.toml"))?)
        }
        (None, _) => BacktestFile::default(),
    };
    if let Some(p) = &o.orders {
        cfg.orders = read_toml(p)?;
    }
    if let Some(q) = o.qty_adv {
        cfg.orders.quantity = Quantity::AdvFraction(q);
    }
    if let Some(q) = o.qty_shares {
        cfg.orders.quantity = Quantity::Shares(q);
    }
    if !o.symbols.is_empty() {
        cfg.orders.symbols = o.symbols.clone();
    }
    if let Some(s) = o.seed {
        cfg.orders.seed = s;
    }
    if let Some(k) = o.decision_minutes {
        cfg.env.decision_minutes = k;
    }
    if let Some(e) = o.engine {
        cfg.cluster.engine = e;
    }
    cfg.validate()?;
    Ok(cfg)
}

/// What a backtest of strategies plays, and where it writes.
pub struct BacktestRequest<'a> {
    /// The strategies by their command-line names.
    pub strategies: &'a [String],
    /// The venues.
    pub env: EnvChoice,
    /// Shards on a cluster engine (the config's `[cluster] engine`).
    pub shards: usize,
    /// The run directory.
    pub out: &'a Path,
}

impl BacktestRequest<'_> {
    /// Every strategy built once and the venues' data named, before any
    /// order is played or submitted.
    pub fn check(&self, has_lobster: bool) -> Result<()> {
        for s in self.strategies {
            strategy_factory(s)?;
        }
        if self.env.needs_lobster() && !has_lobster {
            crate::bail!("{NEEDS_LOBSTER}");
        }
        Ok(())
    }
}

/// Plays `data`'s orders with each strategy at the venues of `request`:
/// here, where `progress` hears each order done, or as shards on the
/// config's cluster engine, where `say` hears what is submitted.
pub fn play(
    data: &BacktestData,
    cfg: &BacktestFile,
    request: &BacktestRequest,
    progress: &(dyn Fn(u64) + Sync),
    say: &dyn Fn(&str),
) -> Result<Vec<OrderResult>> {
    let (strategies, env) = (request.strategies, request.env);
    if cfg.cluster.engine == EngineKind::Local {
        let at = PlayedAt {
            env,
            cfg,
            lobster: data.lobster.as_ref(),
        };
        return replay(&data.market, &data.orders, strategies, at, progress);
    }
    let b = Backtest {
        data: &data.data_path,
        split: data.split,
        strategies,
        env,
        cfg,
    };
    let (orders, out) = (&data.orders, request.out);
    shards::run(&b, &cfg.cluster, request.shards, orders, out, say)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_go_over_the_config_and_a_bad_one_is_refused() {
        let o = BacktestOverrides {
            qty_shares: Some(500.0),
            symbols: vec!["SPY".into()],
            decision_minutes: Some(15),
            ..BacktestOverrides::default()
        };
        let cfg = resolve(None, &[], &o).unwrap();
        assert_eq!(cfg.orders.quantity, Quantity::Shares(500.0));
        assert_eq!(cfg.orders.symbols, ["SPY"]);
        assert_eq!(cfg.env.decision_minutes, 15);
        let bad = BacktestOverrides {
            decision_minutes: Some(0),
            ..BacktestOverrides::default()
        };
        assert!(resolve(None, &[], &bad).is_err());
    }
}
