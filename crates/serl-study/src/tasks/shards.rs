//! `serl backtest` on a cluster: the orders cut into contiguous shards,
//! each a `backtest.shard` task that replays its orders and writes its
//! rows; the coordinator merges them into the rows the local backtest
//! gives (`docs/cluster.md`).

use std::path::{Path, PathBuf};

use crate::error::{Context, Result};
use serde::{Deserialize, Serialize};
use serl_cluster::{ClusterConfig, NewTask, Plan, Task};
use serl_data::Split;
use serl_env::{generate_orders, ParentOrder};
use serl_eval::{OrderResult, EXAMPLE_ORDERS};

use crate::backtest::{EnvChoice, PlayedAt};
use crate::config::BacktestFile;

/// The kind of a backtest shard task.
pub const SHARD_TASK: &str = "backtest.shard";

/// A shard's line of the plan: the backtest as resolved, and which shard.
#[derive(Serialize, Deserialize)]
struct ShardInput {
    data: PathBuf,
    split: Split,
    strategies: Vec<String>,
    env: EnvChoice,
    cfg: BacktestFile,
    shard: usize,
    shards: usize,
}

/// A row as a shard writes it: the result and its inventory path (kept
/// for the report's plots of the first orders).
#[derive(Serialize, Deserialize)]
struct ShardRow {
    result: OrderResult,
    inventory_path: Vec<f32>,
}

/// The backtest as the coordinator resolved it.
pub struct Backtest<'a> {
    /// The bar data each shard loads.
    pub data: &'a Path,
    /// The split the orders come from.
    pub split: Split,
    /// The strategies by their command-line names.
    pub strategies: &'a [String],
    /// Where the orders play.
    pub env: EnvChoice,
    /// The backtest's config.
    pub cfg: &'a BacktestFile,
}

/// Orders `shard` of `shards` covers: contiguous, the first shards one
/// longer where they do not divide evenly.
fn chunk(orders: &[ParentOrder], shard: usize, shards: usize) -> &[ParentOrder] {
    let size = orders.len().div_ceil(shards.max(1));
    let start = (shard * size).min(orders.len());
    &orders[start..(start + size).min(orders.len())]
}

/// Runs the backtest as `shards` tasks on `engine` with its plan in `out`,
/// and returns the merged rows.
pub fn run(
    b: &Backtest,
    cluster_cfg: &ClusterConfig,
    shards: usize,
    orders: &[ParentOrder],
    out: &Path,
    say: &dyn Fn(&str),
) -> Result<Vec<OrderResult>> {
    if shards == 0 {
        crate::bail!("--shards must be at least 1");
    }
    let cluster = crate::cluster::cluster_of(cluster_cfg, out)?
        .context("a sharded backtest needs a cluster engine")?;
    let root = cluster.plan().root().to_path_buf();
    let tasks = (0..shards)
        .map(|k| {
            // Who runs the shards is not part of what they compute.
            let cfg = BacktestFile {
                cluster: ClusterConfig::default(),
                ..b.cfg.clone()
            };
            let input = ShardInput {
                data: b.data.to_path_buf(),
                split: b.split,
                strategies: b.strategies.to_vec(),
                env: b.env,
                cfg,
                shard: k,
                shards,
            };
            Ok(NewTask {
                kind: SHARD_TASK.into(),
                seed: b.cfg.orders.seed,
                output: PathBuf::from("shards").join(format!("{k}-of-{shards}.json")),
                input: serde_json::to_value(input)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let idx = cluster.plan_batch("backtest", tasks)?;
    say(&format!(
        "{} orders in {shards} shards on {} (tasks in {})",
        orders.len(),
        cluster_cfg.engine.name(),
        root.join(serl_cluster::PLAN_FILE).display()
    ));
    cluster.run_batch("backtest", &idx)?;
    let examples: Vec<u64> = orders.iter().take(EXAMPLE_ORDERS).map(|o| o.id).collect();
    let shards: Vec<Vec<ShardRow>> = cluster.read_outputs(&idx)?;
    let mut rows = Vec::new();
    for shard in shards {
        rows.extend(shard.into_iter().map(|r| {
            let mut result = r.result;
            // A shard keeps the paths of its own first orders; the report
            // shows those of the whole backtest's.
            if examples.contains(&result.order_id) {
                result.inventory_path = r.inventory_path;
            }
            result
        }));
    }
    rows.sort_by(|a, b| (&a.env, &a.strategy, a.order_id).cmp(&(&b.env, &b.strategy, b.order_id)));
    Ok(rows)
}

/// A shard of a backtest's orders: replays them and writes their rows.
pub struct Shard;

impl super::TaskKind for Shard {
    const NAME: &'static str = SHARD_TASK;
    fn run(plan: &Plan, task: &Task) -> Result<()> {
        run_shard(plan, task)
    }
}

/// Runs shard task `task` of the backtest's `plan`.
fn run_shard(plan: &Plan, task: &Task) -> Result<()> {
    let input: ShardInput = serde_json::from_value(task.input.clone())
        .with_context(|| format!("task {} is not a backtest shard", task.index))?;
    let cfg = &input.cfg;
    // A task says nothing of what the load left out: its coordinator did.
    let ds = crate::data::load_data(&input.data, &cfg.data, &|_| {})?;
    let orders = generate_orders(&ds, input.split, &cfg.data, &cfg.orders)?;
    let market = crate::data::market_data(&ds, &cfg.data);
    let mine = chunk(&orders, input.shard, input.shards);
    let at = PlayedAt {
        env: input.env,
        cfg,
        lobster: None,
    };
    let results = crate::backtest::replay(&market, mine, &input.strategies, at, &|_| {})?;
    let rows: Vec<ShardRow> = results
        .into_iter()
        .map(|mut result| ShardRow {
            inventory_path: std::mem::take(&mut result.inventory_path),
            result,
        })
        .collect();
    Ok(plan.write_output(task, serde_json::to_string(&rows)?.as_bytes())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_every_order_once_in_order() {
        let orders: Vec<ParentOrder> = (0..10)
            .map(|id| ParentOrder {
                id,
                symbol: "AAPL".into(),
                date: chrono::NaiveDate::from_ymd_opt(2018, 1, 2).unwrap(),
                side: serl_env::OrderSide::Buy,
                qty: 100.0,
                start_minute: 570,
                end_minute: 960,
            })
            .collect();
        for shards in [1, 3, 4, 10, 12] {
            let ids: Vec<u64> = (0..shards)
                .flat_map(|k| chunk(&orders, k, shards).iter().map(|o| o.id))
                .collect();
            assert_eq!(ids, (0..10).collect::<Vec<_>>(), "{shards} shards");
        }
    }
}
