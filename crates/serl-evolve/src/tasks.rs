//! The run's parallel work as batches: trained here side by side, or
//! planned as cluster tasks (`serl-cluster`) and run by an engine.
//!
//! Two kinds of task, each a line of `tasks.jsonl` that holds everything
//! its result depends on:
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
use serl_cluster::{Cluster, NewTask, Task};
use serl_design::Design;
use serl_env::{EnvConfig, MarketConfig, MarketData, ParentOrder};
use serl_train::Algo;

use crate::candidate::CandidateResult;
use crate::config::EvolveConfig;
use crate::error::{file_err, read_json, write_json, EvolveError};
use crate::score::{side_by_side, train_and_score, train_design, trains_fused, Scoring};

/// The kind of a scoring task.
pub const SCORE_TASK: &str = "evolve.score";
/// The kind of a final retraining task.
pub const FINAL_TASK: &str = "evolve.final";

/// A design to train on the candidates' budget and validate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ScoreJob {
    pub(crate) design: Design,
    pub(crate) key: String,
    pub(crate) iteration: usize,
    pub(crate) success_rate: f64,
    pub(crate) seed: u64,
}

/// A scoring task's line: the job and the `[evolve]` table it ran under
/// (an ablation's differs from the run's).
#[derive(Serialize, Deserialize)]
struct ScoreInput {
    evolve: EvolveConfig,
    job: ScoreJob,
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
    pub(crate) switch: Option<crate::hierarchy::Switch>,
}

#[derive(Serialize, Deserialize)]
struct FinalInput {
    evolve: EvolveConfig,
    dir: PathBuf,
    job: FinalJob,
}

/// What a finished final retraining leaves beside its policy.
#[derive(Serialize, Deserialize)]
pub(crate) struct Trained {
    repaired: u64,
    /// Wall seconds the training took.
    #[serde(default)]
    pub(crate) secs: f64,
}

/// Seconds a scoring task took, beside its output.
#[derive(Serialize, Deserialize)]
struct Secs {
    train: f64,
    eval: f64,
    /// Where the training's seconds went.
    #[serde(default)]
    profile: serl_train::TrainProfile,
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
        cluster: None,
        critic: None,
    };
    let out = root.join(&task.output);
    match task.kind.as_str() {
        SCORE_TASK => {
            let input: ScoreInput = serde_json::from_value(task.input.clone()).map_err(bad)?;
            score_one(&scoring(&input.evolve), &input.job, &out)
        }
        FINAL_TASK => {
            let input: FinalInput = serde_json::from_value(task.input.clone()).map_err(bad)?;
            final_one(&scoring(&input.evolve), &input.job, &root.join(&input.dir), &out)
        }
        other => Err(EvolveError::Config(format!(
            "task {} has kind `{other}`, which this serl does not know (it runs {SCORE_TASK} and {FINAL_TASK})",
            task.index
        ))),
    }
}

/// Trains and scores one job, writing its result (without timings) to
/// `out` and the seconds beside it.
fn score_one(scoring: &Scoring, job: &ScoreJob, out: &Path) -> Result<(), EvolveError> {
    let (mut r, eval) = train_and_score(
        scoring,
        &job.design,
        job.key.clone(),
        job.iteration,
        job.success_rate,
        job.seed,
    )?;
    let secs = Secs {
        train: std::mem::take(&mut r.train_secs),
        eval,
        profile: std::mem::take(&mut r.train_profile),
    };
    write_json(&out.with_extension("secs.json"), &secs)?;
    write_json(out, &r)
}

fn final_one(scoring: &Scoring, job: &FinalJob, dir: &Path, out: &Path) -> Result<(), EvolveError> {
    // A team's other critic, or a hierarchy row's part, trains under a
    // copy of the config naming it.
    let with_critic = (job.critic.is_some() || job.switch.is_some()).then(|| {
        let mut evolve = scoring.cfg.clone();
        evolve.train = crate::hierarchy::train_config(scoring.cfg, job.switch);
        if let (Some(team), Some(critic)) = (&mut evolve.train.team, job.critic) {
            team.critic = critic;
        }
        evolve
    });
    let started = std::time::Instant::now();
    let scoring = Scoring {
        cfg: with_critic.as_ref().unwrap_or(scoring.cfg),
        ..*scoring
    };
    let (_, repaired, _) = train_design(
        &scoring,
        &job.design,
        job.algo,
        job.steps,
        job.seed,
        Some(dir),
        job.eval_every,
    )?;
    let secs = started.elapsed().as_secs_f64();
    write_json(out, &Trained { repaired, secs })
}

/// The batch name of `name` in the run at `run_dir` of the plan in
/// `root` (an ablation's batches carry its folder).
fn batch_name(root: &Path, run_dir: &Path, name: &str) -> String {
    let rel = relative(root, run_dir);
    if rel.as_os_str().is_empty() {
        name.to_string()
    } else {
        format!(
            "{}-{name}",
            rel.display().to_string().replace(['/', '\\'], "-")
        )
    }
}

/// `path` relative to the plan's `root` (which is absolute).
fn relative(root: &Path, path: &Path) -> PathBuf {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    path.strip_prefix(root).unwrap_or(&path).to_path_buf()
}

/// Trains and scores `jobs` and returns each result with the seconds its
/// validation took, in order: side by side here, or as batch `batch` of
/// the cluster's plan. Either way each result goes to
/// `scores/<key>.json` as soon as it is known, and a job whose file is
/// there (a resumed run) is not trained again. `done` is told of each
/// finished job.
pub(crate) fn score_batch(
    scoring: &Scoring,
    run_dir: &Path,
    batch: &str,
    jobs: &[ScoreJob],
    done: &(dyn Fn() + Sync),
) -> Result<Vec<(CandidateResult, f64)>, EvolveError> {
    let out_of = |j: &ScoreJob| run_dir.join("scores").join(format!("{}.json", j.key));
    match scoring.cluster {
        None => {
            let todo: Vec<&ScoreJob> = jobs.iter().filter(|j| !out_of(j).exists()).collect();
            (0..jobs.len() - todo.len()).for_each(|_| done());
            let fused = |j: &&ScoreJob| trains_fused(&scoring.cfg.train, &j.design, Algo::Ppo);
            side_by_side(&todo, scoring.cfg.parallel_candidates(), fused, |j| {
                score_one(scoring, j, &out_of(j))?;
                done();
                Ok(())
            })?;
        }
        Some(cluster) => {
            let root = cluster.plan().root().to_path_buf();
            let tasks = jobs
                .iter()
                .map(|j| {
                    let out = relative(&root, &out_of(j));
                    let input = ScoreInput {
                        evolve: scoring.cfg.clone(),
                        job: j.clone(),
                    };
                    Ok(NewTask {
                        kind: SCORE_TASK.into(),
                        seed: j.seed,
                        input: serde_json::to_value(input).map_err(|e| file_err(&out, e))?,
                        output: out,
                    })
                })
                .collect::<Result<Vec<_>, EvolveError>>()?;
            run_on(cluster, &batch_name(&root, run_dir, batch), tasks)?;
            jobs.iter().for_each(|_| done());
        }
    }
    jobs.iter()
        .map(|j| {
            let path = out_of(j);
            let mut r: CandidateResult = read_json(&path)
                .ok_or_else(|| file_err(&path, "a finished task's output does not parse"))?;
            let secs: Option<Secs> = read_json(&path.with_extension("secs.json"));
            r.train_secs = secs.as_ref().map_or(0.0, |s| s.train);
            r.train_profile = secs.as_ref().map(|s| s.profile).unwrap_or_default();
            Ok((r, secs.map_or(0.0, |s| s.eval)))
        })
        .collect()
}

/// Plans `tasks` as one batch and runs it on the cluster's engine.
fn run_on(cluster: &Cluster, batch: &str, tasks: Vec<NewTask>) -> Result<(), EvolveError> {
    let cluster_err = |e: serl_cluster::ClusterError| EvolveError::Cluster(e.to_string());
    let indices = cluster.plan_batch(batch, tasks).map_err(cluster_err)?;
    let report = cluster.run_batch(batch, &indices).map_err(cluster_err)?;
    tracing::info!(batch, ?report, "batch finished");
    Ok(())
}

/// Runs the final retrainings `jobs` into `final/<name>/` of `run_dir`
/// (here side by side, or as the cluster's batch `final`) and returns
/// the seconds they took.
pub(crate) fn final_batch(
    scoring: &Scoring,
    run_dir: &Path,
    jobs: &[FinalJob],
) -> Result<f64, EvolveError> {
    let t = Instant::now();
    let dir_of = |j: &FinalJob| run_dir.join("final").join(&j.name);
    let todo: Vec<&FinalJob> = jobs
        .iter()
        .filter(|j| !dir_of(j).join("final.bpk").exists())
        .collect();
    match scoring.cluster {
        None => {
            let fused = |j: &&FinalJob| trains_fused(&scoring.cfg.train, &j.design, j.algo);
            side_by_side(&todo, scoring.cfg.parallel_candidates(), fused, |j| {
                let dir = dir_of(j);
                let out = dir.join("trained.json");
                final_one(scoring, j, &dir, &out)
            })?;
        }
        Some(cluster) => {
            let root = cluster.plan().root().to_path_buf();
            let tasks = todo
                .iter()
                .map(|j| {
                    let dir = relative(&root, &dir_of(j));
                    let input = FinalInput {
                        evolve: scoring.cfg.clone(),
                        dir: dir.clone(),
                        job: (*j).clone(),
                    };
                    Ok(NewTask {
                        kind: FINAL_TASK.into(),
                        seed: j.seed,
                        output: dir.join("trained.json"),
                        input: serde_json::to_value(input).map_err(|e| file_err(&dir, e))?,
                    })
                })
                .collect::<Result<Vec<_>, EvolveError>>()?;
            run_on(cluster, &batch_name(&root, run_dir, "final"), tasks)?;
        }
    }
    Ok(t.elapsed().as_secs_f64())
}
