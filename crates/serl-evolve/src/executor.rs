//! Where a run's jobs run: here, side by side ([`Local`]), or as batches
//! of a cluster's plan ([`OnCluster`], `serl-cluster`). The rest of the
//! run hands its jobs to an [`Executor`] and gets their results back in
//! order, the same numbers either way.
//!
//! Scored jobs land in `scores/<key>.json` either way: a cluster task
//! writes its output there and the run reads it back; a local run keeps
//! its results in memory and writes each once, as it finishes, so that a
//! run killed mid-batch resumes without scoring it again.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serl_cluster::{Cluster, NewTask};
use serl_train::Algo;

use crate::candidate::{ScoreJob, Scored};
use crate::error::{file_err, EvolveError};
use crate::score::{score, trains_fused};
use crate::tasks::{retrain_one, FinalInput, FinalJob, ScoreInput, FINAL_TASK, SCORE_TASK};
use crate::train::Scoring;

/// Runs a run's jobs.
pub(crate) trait Executor: Sync {
    /// Who runs them, for the progress line: `local` or the cluster's
    /// engine.
    fn engine(&self) -> &'static str;

    /// Whether its jobs run in this process, so that two groups of them
    /// may run at once (a cluster's plan takes one batch at a time).
    fn runs_here(&self) -> bool;

    /// Scores `jobs` of the run in `run_dir` under `scoring` (as batch
    /// `batch`) and returns one result per job, in order. A job whose
    /// `scores/<key>.json` an earlier process left is not scored again.
    /// `done` is told of each finished job.
    fn score(
        &self,
        scoring: &Scoring,
        run_dir: &Path,
        batch: &str,
        jobs: &[ScoreJob],
        done: &(dyn Fn() + Sync),
    ) -> Result<Vec<Scored>, EvolveError>;

    /// Runs the final retrainings `jobs` into `final/<name>/` of
    /// `run_dir`; those an earlier process finished are not run again.
    fn retrain(
        &self,
        scoring: &Scoring,
        run_dir: &Path,
        jobs: &[FinalJob],
    ) -> Result<(), EvolveError>;
}

/// The executor for `cluster`: its engine, or here without one.
pub(crate) fn on(cluster: Option<&Cluster>) -> Box<dyn Executor + '_> {
    match cluster {
        Some(cluster) => Box::new(OnCluster { cluster }),
        None => Box::new(Local),
    }
}

/// Jobs run here, side by side where that gives the same numbers.
pub(crate) struct Local;

/// Jobs run as batches of a cluster's plan, by its engine.
pub(crate) struct OnCluster<'a> {
    pub(crate) cluster: &'a Cluster,
}

/// Where a scored job's result goes.
fn score_path(run_dir: &Path, job: &ScoreJob) -> PathBuf {
    run_dir.join("scores").join(format!("{}.json", job.key))
}

/// Where a final retraining trains.
fn final_dir(run_dir: &Path, job: &FinalJob) -> PathBuf {
    run_dir.join("final").join(&job.name)
}

/// The final retrainings of `jobs` no earlier process finished.
fn unfinished<'j>(run_dir: &Path, jobs: &'j [FinalJob]) -> Vec<&'j FinalJob> {
    jobs.iter()
        .filter(|j| !final_dir(run_dir, j).join("final.bpk").exists())
        .collect()
}

/// A scored job's output as a task (or an earlier process) wrote it.
fn read_scored(path: &Path) -> Result<Scored, EvolveError> {
    Scored::read(path).ok_or_else(|| file_err(path, "a finished task's output does not parse"))
}

impl Executor for Local {
    fn engine(&self) -> &'static str {
        "local"
    }

    fn runs_here(&self) -> bool {
        true
    }

    fn score(
        &self,
        scoring: &Scoring,
        run_dir: &Path,
        _batch: &str,
        jobs: &[ScoreJob],
        done: &(dyn Fn() + Sync),
    ) -> Result<Vec<Scored>, EvolveError> {
        // Each job with its place in `jobs`.
        type Placed<'j> = Vec<(usize, &'j ScoreJob)>;
        let (stored, todo): (Placed, Placed) = jobs
            .iter()
            .enumerate()
            .partition(|(_, j)| score_path(run_dir, j).exists());
        stored.iter().for_each(|_| done());
        let fused =
            |(_, j): &(usize, &ScoreJob)| trains_fused(&scoring.cfg.train, &j.design, Algo::Ppo);
        let scored = side_by_side(&todo, scoring.cfg.parallel_candidates(), fused, |(_, j)| {
            let s = score(scoring, j)?;
            // Written as well as kept: a run killed later in the batch
            // resumes from it.
            s.write(&score_path(run_dir, j))?;
            done();
            Ok(s)
        })?;
        let mut out: Vec<Option<Scored>> = jobs.iter().map(|_| None).collect();
        for ((i, _), s) in todo.iter().zip(scored) {
            out[*i] = Some(s);
        }
        for (i, j) in stored {
            out[i] = Some(read_scored(&score_path(run_dir, j))?);
        }
        Ok(out.into_iter().flatten().collect())
    }

    fn retrain(
        &self,
        scoring: &Scoring,
        run_dir: &Path,
        jobs: &[FinalJob],
    ) -> Result<(), EvolveError> {
        let todo = unfinished(run_dir, jobs);
        let fused = |j: &&FinalJob| trains_fused(&scoring.cfg.train, &j.design, j.algo);
        side_by_side(&todo, scoring.cfg.parallel_candidates(), fused, |j| {
            let dir = final_dir(run_dir, j);
            retrain_one(scoring, j, &dir, &dir.join("trained.json"))
        })?;
        Ok(())
    }
}

impl Executor for OnCluster<'_> {
    fn engine(&self) -> &'static str {
        self.cluster.config().engine.name()
    }

    fn runs_here(&self) -> bool {
        false
    }

    fn score(
        &self,
        scoring: &Scoring,
        run_dir: &Path,
        batch: &str,
        jobs: &[ScoreJob],
        done: &(dyn Fn() + Sync),
    ) -> Result<Vec<Scored>, EvolveError> {
        let root = self.cluster.plan().root().to_path_buf();
        // Every job is planned, finished or not: the plan knows which of
        // its tasks are done.
        let tasks = jobs
            .iter()
            .map(|j| {
                let out = relative(&root, &score_path(run_dir, j));
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
        self.run_batch(&batch_name(&root, run_dir, batch), tasks)?;
        jobs.iter().for_each(|_| done());
        jobs.iter()
            .map(|j| read_scored(&score_path(run_dir, j)))
            .collect()
    }

    fn retrain(
        &self,
        scoring: &Scoring,
        run_dir: &Path,
        jobs: &[FinalJob],
    ) -> Result<(), EvolveError> {
        let root = self.cluster.plan().root().to_path_buf();
        let tasks = unfinished(run_dir, jobs)
            .into_iter()
            .map(|j| {
                let dir = relative(&root, &final_dir(run_dir, j));
                let input = FinalInput {
                    evolve: scoring.cfg.clone(),
                    dir: dir.clone(),
                    job: j.clone(),
                };
                Ok(NewTask {
                    kind: FINAL_TASK.into(),
                    seed: j.seed,
                    output: dir.join("trained.json"),
                    input: serde_json::to_value(input).map_err(|e| file_err(&dir, e))?,
                })
            })
            .collect::<Result<Vec<_>, EvolveError>>()?;
        self.run_batch(&batch_name(&root, run_dir, "final"), tasks)
    }
}

impl OnCluster<'_> {
    /// Plans `tasks` as one batch and runs it on the cluster's engine.
    fn run_batch(&self, batch: &str, tasks: Vec<NewTask>) -> Result<(), EvolveError> {
        let cluster_err = |e: serl_cluster::ClusterError| EvolveError::Cluster(e.to_string());
        let indices = self.cluster.plan_batch(batch, tasks).map_err(cluster_err)?;
        let report = self
            .cluster
            .run_batch(batch, &indices)
            .map_err(cluster_err)?;
        tracing::info!(batch, ?report, "batch finished");
        Ok(())
    }
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

/// Runs `work` on every item and returns the results in the items' order:
/// `parallel` at a time for the items `fused` admits, one at a time for the
/// rest. Only fused trainings share the machine, because burn's learner
/// sums in parallel in an order that depends on what else runs, while the
/// fused one gives the same numbers in any company. Stops after the first
/// group with an error.
fn side_by_side<T: Sync, R: Send>(
    items: &[T],
    parallel: usize,
    fused: impl Fn(&T) -> bool,
    work: impl Fn(&T) -> Result<R, EvolveError> + Sync,
) -> Result<Vec<R>, EvolveError> {
    let (together, alone): (Vec<usize>, Vec<usize>) =
        (0..items.len()).partition(|&i| fused(&items[i]));
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for group in together.chunks(parallel.max(1)).chain(alone.chunks(1)) {
        let done: Vec<Result<R, EvolveError>> = if group.len() == 1 {
            vec![work(&items[group[0]])]
        } else {
            group.par_iter().map(|&i| work(&items[i])).collect()
        };
        for (&i, r) in group.iter().zip(done) {
            out[i] = Some(r?);
        }
    }
    Ok(out.into_iter().flatten().collect())
}
