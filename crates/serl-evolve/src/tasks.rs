//! The run's parallel work as tasks: everything a job's result depends
//! on, as a line of `tasks.jsonl` that a cluster's engine hands to
//! [`run_task`], and the one-job runs both executors share
//! (`executor.rs`).
//!
//! Two kinds of task:
//!
//! | kind | what | output |
//! |---|---|---|
//! | `evolve.score` | a design trained on the candidates' budget and validated | `scores/<key>.json` |
//! | `evolve.final` | a final retraining into `final/<name>/` | `final/<name>/trained.json` |
//!
//! An output holds no timings, so running a task twice writes the same
//! bytes; its seconds go beside it (`scores/<key>.secs.json`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serl_cluster::Task;
use serl_design::Design;
use serl_env::{EnvConfig, MarketConfig, MarketData, ParentOrder};
use serl_train::Algo;

use crate::candidate::ScoreJob;
use crate::config::EvolveConfig;
use crate::error::{write_json, EvolveError};
use crate::hierarchy::{train_config, Switch};
use crate::score::score;
use crate::train::{Scoring, TrainDesign};

/// The kind of a scoring task.
pub const SCORE_TASK: &str = "evolve.score";
/// The kind of a final retraining task.
pub const FINAL_TASK: &str = "evolve.final";

/// A scoring task's line: the job and the `[evolve]` table it ran under
/// (an ablation's differs from the run's).
#[derive(Serialize, Deserialize)]
pub(crate) struct ScoreInput {
    pub(crate) evolve: EvolveConfig,
    pub(crate) job: ScoreJob,
}

/// A final retraining: `design` trained by `algo` for `steps` into `dir`
/// (relative to the run directory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FinalJob {
    pub(crate) name: String,
    pub(crate) design: Design,
    pub(crate) algo: Algo,
    pub(crate) steps: usize,
    pub(crate) seed: u64,
    pub(crate) eval_every: usize,
    /// A team's critic, where it differs from the config's (independent
    /// PPO's plain baseline in a MAPPO run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) critic: Option<serl_train::Critic>,
    /// A hierarchy row's part, switched on for this training
    /// ([`crate::hierarchy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) switch: Option<Switch>,
}

/// A final retraining task's line: the job, the `[evolve]` table it runs
/// under and its folder (relative to the plan's root).
#[derive(Serialize, Deserialize)]
pub(crate) struct FinalInput {
    pub(crate) evolve: EvolveConfig,
    pub(crate) dir: PathBuf,
    pub(crate) job: FinalJob,
}

/// What a finished final retraining leaves beside its policy.
#[derive(Serialize, Deserialize)]
pub(crate) struct Trained {
    repaired: u64,
    /// Wall seconds the training took.
    #[serde(default)]
    pub(crate) secs: f64,
}

/// What a task needs besides its line: the run's sessions and orders, and
/// the execution task (from the run's config).
pub struct TaskInputs<'a> {
    /// The execution task.
    pub env_cfg: &'a EnvConfig,
    /// The dynamic market's population.
    pub market_cfg: &'a MarketConfig,
    /// The sessions.
    pub market: &'a MarketData,
    /// Orders the candidates train on.
    pub train_orders: &'a [ParentOrder],
    /// Orders they are validated on.
    pub val_orders: &'a [ParentOrder],
}

/// Runs task `task` of the run in `root` and writes its output.
pub fn run_task(inputs: &TaskInputs, root: &Path, task: &Task) -> Result<(), EvolveError> {
    let bad = |e: serde_json::Error| {
        EvolveError::Config(format!("task {} ({}): {e}", task.index, task.kind))
    };
    let scoring = |evolve| Scoring {
        cfg: evolve,
        env_cfg: inputs.env_cfg,
        market_cfg: inputs.market_cfg,
        market: inputs.market,
        train_orders: inputs.train_orders,
        val_orders: inputs.val_orders,
        critic: None,
        pairing: None,
    };
    let out = root.join(&task.output);
    match task.kind.as_str() {
        SCORE_TASK => {
            let input: ScoreInput = serde_json::from_value(task.input.clone()).map_err(bad)?;
            score(&scoring(&input.evolve), &input.job)?.write(&out)
        }
        FINAL_TASK => {
            let input: FinalInput = serde_json::from_value(task.input.clone()).map_err(bad)?;
            retrain_one(&scoring(&input.evolve), &input.job, &root.join(&input.dir), &out)
        }
        other => Err(EvolveError::Config(format!(
            "task {} has kind `{other}`, which this serl does not know (it runs {SCORE_TASK} and {FINAL_TASK})",
            task.index
        ))),
    }
}

/// Runs one final retraining into `dir`, and writes what it leaves beside
/// the policy to `out`.
pub(crate) fn retrain_one(
    scoring: &Scoring,
    job: &FinalJob,
    dir: &Path,
    out: &Path,
) -> Result<(), EvolveError> {
    // A team's other critic, or a hierarchy row's part, trains under a
    // copy of the config naming it.
    let with_critic = (job.critic.is_some() || job.switch.is_some()).then(|| {
        let mut evolve = scoring.cfg.clone();
        evolve.train = train_config(
            &scoring.cfg.train,
            scoring.cfg.hierarchy.as_ref(),
            job.switch,
        );
        if let (Some(team), Some(critic)) = (&mut evolve.train.team, job.critic) {
            team.critic = critic;
        }
        evolve
    });
    let started = Instant::now();
    let scoring = Scoring {
        cfg: with_critic.as_ref().unwrap_or(scoring.cfg),
        ..*scoring
    };
    let repaired = TrainDesign::new(&job.design)
        .algo(job.algo)
        .steps(job.steps)
        .seed(job.seed)
        .checkpoints(Some(dir))
        .select_every(job.eval_every)
        .run(&scoring)?
        .repaired;
    let secs = started.elapsed().as_secs_f64();
    write_json(out, &Trained { repaired, secs })
}
