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
            |(_, j): &(usize, &ScoreJob)| trains_fused(&scoring.cfg.train, &j.design, Algo::PPO);
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
/// up to `parallel` at a time for the items `fused` admits, then one at a
/// time for the rest. Only fused trainings share the machine, because
/// burn's learner sums in parallel in an order that depends on what else
/// runs, while the fused one gives the same numbers in any company. The
/// shared items go through a queue ([`in_queue`]), so a long training
/// never holds a free core back. Stops taking items after the first
/// error, and returns the error of the first item that failed.
fn side_by_side<T: Sync, R: Send>(
    items: &[T],
    parallel: usize,
    fused: impl Fn(&T) -> bool,
    work: impl Fn(&T) -> Result<R, EvolveError> + Sync,
) -> Result<Vec<R>, EvolveError> {
    let (together, alone): (Vec<usize>, Vec<usize>) =
        (0..items.len()).partition(|&i| fused(&items[i]));
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for (i, r) in in_queue(&together, parallel, |i| work(&items[i])) {
        out[i] = Some(r?);
    }
    for i in alone {
        out[i] = Some(work(&items[i])?);
    }
    Ok(out.into_iter().flatten().collect())
}

/// Runs `work` on the indices of `order` with `parallel` workers on the
/// current rayon pool: each worker takes the next index as soon as it is
/// done with one (batches of `parallel` would wait for their slowest).
/// Once an index fails, or a worker panics, no worker takes another.
/// Returns what ran, sorted by index.
///
/// No more workers than the pool has threads: a training waiting inside
/// its own parallel work could otherwise pick up a worker nobody had
/// started and run the rest of the queue on top of itself.
fn in_queue<R: Send>(
    order: &[usize],
    parallel: usize,
    work: impl Fn(usize) -> Result<R, EvolveError> + Sync,
) -> Vec<(usize, Result<R, EvolveError>)> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Mutex;
    let workers = parallel
        .min(rayon::current_num_threads())
        .clamp(1, order.len().max(1));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let out = Mutex::new(Vec::with_capacity(order.len()));
    let worker = || {
        while !failed.load(Ordering::SeqCst) {
            let Some(&i) = order.get(next.fetch_add(1, Ordering::SeqCst)) else {
                break;
            };
            // A panic stops the queue as an error does (rayon passes it
            // on once every worker has finished).
            let stop = StopOnPanic(&failed);
            let r = work(i);
            std::mem::forget(stop);
            if r.is_err() {
                failed.store(true, Ordering::SeqCst);
            }
            out.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
        }
    };
    if workers == 1 {
        // One worker works on the calling thread, as a lone job always has.
        worker();
    } else {
        rayon::scope(|s| {
            for _ in 0..workers {
                s.spawn(|_| worker());
            }
        });
    }
    let mut out = out.into_inner().unwrap_or_else(|e| e.into_inner());
    out.sort_by_key(|(i, _)| *i);
    out
}

/// Raises its flag when dropped, which only a panic does: the caller
/// forgets it once the work returns.
struct StopOnPanic<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// A pool of two threads, whatever the machine's cores.
    fn two_threads() -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a pool of two threads")
    }

    #[test]
    fn a_free_worker_takes_the_next_item_while_a_long_one_runs() {
        // Item 0 waits until items 2 and 3 have run. In batches of two,
        // items 2 and 3 would wait for item 0, so it would time out.
        let ran = AtomicUsize::new(0);
        let got = two_threads().install(|| {
            side_by_side(
                &[0, 1, 2, 3],
                2,
                |_| true,
                |&i| {
                    if i == 0 {
                        let t = Instant::now();
                        while ran.load(Ordering::SeqCst) < 3 {
                            if t.elapsed() > Duration::from_secs(10) {
                                return Err(EvolveError::Config("item 0 waited in vain".into()));
                            }
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    } else {
                        ran.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(i * 10)
                },
            )
        });
        assert_eq!(got.expect("no item fails"), vec![0, 10, 20, 30]);
    }

    #[test]
    fn items_not_admitted_run_alone_after_the_others() {
        use std::sync::Mutex;
        let running = AtomicUsize::new(0);
        let log = Mutex::new(Vec::new());
        let got = two_threads().install(|| {
            side_by_side(
                &[0, 1, 2, 3, 4],
                2,
                |&i| i % 2 == 0,
                |&i| {
                    let company = running.fetch_add(1, Ordering::SeqCst);
                    log.lock().unwrap().push((i, company));
                    std::thread::sleep(Duration::from_millis(5));
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok(i)
                },
            )
        });
        assert_eq!(got.expect("no item fails"), vec![0, 1, 2, 3, 4]);
        let log = log.into_inner().unwrap();
        let order: Vec<usize> = log.iter().map(|&(i, _)| i).collect();
        let first_alone = order.iter().position(|&i| i % 2 == 1).unwrap();
        assert!(
            order[first_alone..].iter().all(|&i| i % 2 == 1),
            "an unfused item ran before a fused one: {order:?}"
        );
        for &(i, company) in &log[first_alone..] {
            assert_eq!(company, 0, "item {i} ran in company");
        }
    }

    #[test]
    fn after_an_error_no_item_is_taken_and_the_first_failure_is_returned() {
        for parallel in [1, 2] {
            let taken = AtomicUsize::new(0);
            let got = two_threads().install(|| {
                side_by_side(
                    &[0, 1, 2, 3, 4, 5, 6, 7],
                    parallel,
                    |_| true,
                    |&i| {
                        taken.fetch_add(1, Ordering::SeqCst);
                        if i >= 2 {
                            Err(EvolveError::Config(format!("item {i} failed")))
                        } else {
                            Ok(i)
                        }
                    },
                )
            });
            let err = got.expect_err("item 2 fails").to_string();
            assert!(err.contains("item 2 failed"), "{parallel}: {err}");
            // Items 0-2, and at most one more per other worker.
            assert!(taken.load(Ordering::SeqCst) <= 2 + parallel, "{parallel}");
        }
    }

    #[test]
    fn a_panicking_item_stops_the_queue() {
        let taken = AtomicUsize::new(0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            two_threads().install(|| {
                side_by_side(
                    &[0, 1, 2, 3, 4, 5, 6, 7],
                    2,
                    |_| true,
                    |&i| {
                        taken.fetch_add(1, Ordering::SeqCst);
                        if i == 1 {
                            // Unwinds at once: no panic hook (and no
                            // backtrace) between the panic and the queue.
                            std::panic::resume_unwind(Box::new("item 1 panics"));
                        }
                        std::thread::sleep(Duration::from_millis(20));
                        Ok(i)
                    },
                )
            })
        }));
        assert!(caught.is_err(), "the panic reaches the caller");
        assert!(
            taken.load(Ordering::SeqCst) <= 3,
            "{}",
            taken.load(Ordering::SeqCst)
        );
    }
}
