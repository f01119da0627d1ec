//! `serl simulate` and `serl simulate impact` on a cluster: each seed's
//! simulated days are a task (`simulate.day`, `simulate.impact_seed`) whose
//! line holds the calibration, the market and the seed, so a node needs
//! no data; the coordinator pools the seeds as the local run does
//! (`docs/cluster.md`).

use std::path::PathBuf;

use crate::error::Result;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serl_cluster::{Cluster, NewTask, Plan, Task};
use serl_env::MarketConfig;
use serl_market::{Calibration, ImpactSpec, MinuteStats, SeedPaths, Simulator};

/// A simulated day of one seed.
pub const DAY_TASK: &str = "simulate.day";
/// One seed of the impact study.
pub const IMPACT_TASK: &str = "simulate.impact_seed";

#[derive(Serialize, Deserialize)]
struct DayInput {
    cal: Calibration,
    market: MarketConfig,
}

#[derive(Serialize, Deserialize)]
struct ImpactInput {
    cal: Calibration,
    market: MarketConfig,
    spec: ImpactSpec,
    k: u64,
}

/// Plans `inputs` as batch `batch` (outputs `<batch>/<seed>.json`), runs
/// it, and reads the outputs back in order.
fn run_batch<I: Serialize, O: DeserializeOwned>(
    cluster: &Cluster,
    batch: &str,
    kind: &str,
    inputs: Vec<(u64, I)>,
    say: &dyn Fn(&str),
) -> Result<Vec<O>> {
    let tasks = inputs
        .into_iter()
        .map(|(seed, input)| {
            Ok(NewTask {
                kind: kind.into(),
                seed,
                output: PathBuf::from(batch).join(format!("{seed}.json")),
                input: serde_json::to_value(input)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let idx = cluster.plan_batch(batch, tasks)?;
    say(&format!(
        "{} tasks on {} (plan: {})",
        idx.len(),
        cluster.config().engine.name(),
        cluster
            .plan()
            .root()
            .join(serl_cluster::PLAN_FILE)
            .display()
    ));
    cluster.run_batch(batch, &idx)?;
    Ok(cluster.read_outputs(&idx)?)
}

/// The days of seeds `seeds` of the calibrated market, as cluster tasks.
pub fn days(
    cluster: &Cluster,
    cal: &Calibration,
    market: &MarketConfig,
    seeds: impl Iterator<Item = u64>,
    say: &dyn Fn(&str),
) -> Result<Vec<MinuteStats>> {
    let inputs = seeds
        .map(|s| {
            let input = DayInput {
                cal: cal.clone(),
                market: market.clone(),
            };
            (s, input)
        })
        .collect();
    run_batch(cluster, "days", DAY_TASK, inputs, say)
}

/// Every seed's paths of the impact study, as cluster tasks.
pub fn impact_paths(
    cluster: &Cluster,
    cal: &Calibration,
    market: &MarketConfig,
    spec: &ImpactSpec,
    say: &dyn Fn(&str),
) -> Result<Vec<SeedPaths>> {
    let inputs = (0..spec.seeds.max(1))
        .map(|k| {
            let input = ImpactInput {
                cal: cal.clone(),
                market: market.clone(),
                spec: spec.clone(),
                k,
            };
            (spec.first_seed + k, input)
        })
        .collect();
    run_batch(cluster, "impact-seeds", IMPACT_TASK, inputs, say)
}

/// A simulated day of one seed.
pub struct Day;

impl super::TaskKind for Day {
    const NAME: &'static str = DAY_TASK;
    fn run(plan: &Plan, task: &Task) -> Result<()> {
        let i: DayInput = serde_json::from_value(task.input.clone())?;
        let day = Simulator::new(&i.cal, &i.market, task.seed).finish();
        Ok(plan.write_output(task, serde_json::to_string(&day)?.as_bytes())?)
    }
}

/// One seed of the impact study.
pub struct ImpactSeed;

impl super::TaskKind for ImpactSeed {
    const NAME: &'static str = IMPACT_TASK;
    fn run(plan: &Plan, task: &Task) -> Result<()> {
        let i: ImpactInput = serde_json::from_value(task.input.clone())?;
        let paths = serl_market::impact_seed(&i.cal, &i.market, &i.spec, i.k)?;
        Ok(plan.write_output(task, serde_json::to_string(&paths)?.as_bytes())?)
    }
}
