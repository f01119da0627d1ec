//! Running a batch of planned tasks on an external engine: submit it as
//! one array, wait, check every output is there, submit the failed ones
//! again up to `[cluster] retries`.
//!
//! An array's task number is its *position* in the batch (0 to n−1), not
//! its index in the plan: the runner gets the batch's indices as
//! `--indices 5-9,12` and picks its own by the position the engine hands
//! it (`SLURM_ARRAY_TASK_ID`, `HQ_TASK_ID`, `JOB_COMPLETION_INDEX`). So
//! arrays stay within a scheduler's array-size limit however long the
//! plan grows, and one command line serves every engine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::config::{ClusterConfig, EngineKind};
use crate::error::{io_err, ClusterError};
use crate::plan::{NewTask, Plan, Task};
use crate::{indices, manifest};

/// Seconds the coordinator looks again for outputs the scheduler says
/// were written, before it calls the filesystem unshared.
const SHARED_GRACE_SECS: u64 = 5;

/// What running a batch took.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchReport {
    /// Tasks whose output was already there (a resumed run).
    pub reused: usize,
    /// Tasks submitted at least once.
    pub submitted: usize,
    /// Submissions made (1 + the rounds of retries).
    pub submissions: usize,
    /// Wall seconds from the first submission to the last output.
    pub secs: f64,
}

/// `tasks/cluster.json`: how the coordinator runs the plan, for
/// `serl task manifest` and for a look afterwards.
pub const SETUP_FILE: &str = "cluster.json";

/// What `tasks/cluster.json` holds.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Setup {
    /// The `[cluster]` table.
    pub config: ClusterConfig,
    /// The runner's command line before `--indices`.
    pub runner: Vec<String>,
    /// The tasks' working directory.
    pub workdir: PathBuf,
}

impl Setup {
    /// The setup of the run in `root`, if a coordinator wrote one.
    pub fn read(root: &Path) -> Result<Setup, ClusterError> {
        let path = root.join("tasks").join(SETUP_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
        serde_json::from_str(&text).map_err(|e| io_err(&path, e))
    }
}

/// A run's plan and the engine that runs it.
pub struct Cluster {
    config: ClusterConfig,
    plan: Mutex<Plan>,
    runner: Vec<String>,
    workdir: PathBuf,
}

impl Cluster {
    /// The cluster of the run in `root`: its plan (opened or new), the
    /// engine of `config`, and `runner`, the program and arguments that
    /// run one task of that run before `--indices` (`serl task run ROOT`).
    /// Tasks run in `workdir`, where relative data paths resolve.
    pub fn new(
        config: ClusterConfig,
        root: &Path,
        runner: Vec<String>,
        workdir: &Path,
    ) -> Result<Cluster, ClusterError> {
        config.validate()?;
        std::fs::create_dir_all(root).map_err(|e| io_err(root, e))?;
        let setup = Setup {
            config: config.clone(),
            runner: runner.clone(),
            workdir: workdir.to_path_buf(),
        };
        let path = root.join("tasks").join(SETUP_FILE);
        std::fs::create_dir_all(root.join("tasks")).map_err(|e| io_err(root, e))?;
        let text = serde_json::to_string_pretty(&setup).map_err(|e| io_err(&path, e))?;
        serl_report::write_atomic(&path, text.as_bytes()).map_err(|e| io_err(&path, e))?;
        for line in crate::jobs::cancel_leftovers(root, config.engine) {
            tracing::warn!("{line}");
        }
        Ok(Cluster {
            plan: Mutex::new(Plan::open_to_append(root)?),
            config,
            runner,
            workdir: workdir.to_path_buf(),
        })
    }

    /// The `[cluster]` table.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The plan, locked.
    pub fn plan(&self) -> MutexGuard<'_, Plan> {
        self.plan.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `tasks` to the plan as batch `batch` (or finds them there) and
    /// returns their indices.
    pub fn plan_batch(&self, batch: &str, tasks: Vec<NewTask>) -> Result<Vec<usize>, ClusterError> {
        let mut plan = self.plan();
        tasks.into_iter().map(|t| plan.add(batch, t)).collect()
    }

    /// The JSON outputs of tasks `indices`, in order.
    pub fn read_outputs<T: serde::de::DeserializeOwned>(
        &self,
        indices: &[usize],
    ) -> Result<Vec<T>, ClusterError> {
        let plan = self.plan();
        indices
            .iter()
            .map(|&i| {
                let path = plan.output_path(plan.task(i)?);
                let text = std::fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
                serde_json::from_str(&text).map_err(|e| io_err(&path, e))
            })
            .collect()
    }

    /// Runs the tasks `indices` of batch `batch` on the external engine and
    /// returns once each has its output, or with the first that failed
    /// `retries` + 1 times. Tasks already done are not submitted.
    pub fn run_batch(&self, batch: &str, all: &[usize]) -> Result<BatchReport, ClusterError> {
        let tasks: Vec<Task> = {
            let plan = self.plan();
            all.iter()
                .map(|&i| plan.task(i).cloned())
                .collect::<Result<_, _>>()?
        };
        let root = self.plan().root().to_path_buf();
        let done = |t: &Task| self.plan().is_done(t);
        let pending: Vec<&Task> = tasks.iter().filter(|t| !done(t)).collect();
        let mut report = BatchReport {
            reused: tasks.len() - pending.len(),
            submitted: pending.len(),
            ..BatchReport::default()
        };
        if pending.is_empty() {
            return Ok(report);
        }
        let t0 = Instant::now();
        let submit = Submission {
            cluster: self,
            root: &root,
            batch,
            indices: pending.iter().map(|t| t.index).collect(),
        };
        let mut to_run: Vec<usize> = (0..pending.len()).collect();
        for attempt in 0..=self.config.retries {
            report.submissions += 1;
            let succeeded = submit.run(&to_run, attempt)?;
            to_run.retain(|&p| !done(pending[p]));
            if to_run.is_empty() {
                report.secs = t0.elapsed().as_secs_f64();
                return Ok(report);
            }
            if succeeded {
                // A network filesystem may show a file written on another
                // node a moment late.
                for _ in 0..SHARED_GRACE_SECS {
                    std::thread::sleep(Duration::from_secs(1));
                    to_run.retain(|&p| !done(pending[p]));
                    if to_run.is_empty() {
                        report.secs = t0.elapsed().as_secs_f64();
                        return Ok(report);
                    }
                }
                let t = pending[to_run[0]];
                return Err(ClusterError::NotShared {
                    index: t.index,
                    output: root.join(&t.output).display().to_string(),
                });
            }
        }
        let p = to_run[0];
        let t = pending[p];
        let log = submit.log_path(p, self.config.retries);
        let mut tail = tail(&log, 20);
        if !log.exists() {
            tail.push_str(
                "\n(a task without a log never started, or wrote it where this machine cannot see: \
                 the run directory must be on a filesystem every node shares)",
            );
        }
        Err(ClusterError::TaskFailed {
            reason: scheduler_reason(&tail, &self.config),
            index: t.index,
            output: root.join(&t.output).display().to_string(),
            attempts: self.config.retries + 1,
            tail,
            log: log.display().to_string(),
        })
    }
}

/// The most array positions one submission holds: Slurm's default
/// `MaxArraySize` is 1001. A longer batch goes as several arrays at once.
const MAX_ARRAY: usize = 1000;

/// One batch's submissions to the engine.
struct Submission<'a> {
    cluster: &'a Cluster,
    root: &'a Path,
    batch: &'a str,
    /// The plan indices of the batch's pending tasks, by position.
    indices: Vec<usize>,
}

impl Submission<'_> {
    /// A name for this set of pending tasks: a resumed run submits another
    /// set, which must not share logs or a Kubernetes Job with the last.
    fn tag(&self) -> String {
        let list = indices::format(&self.indices);
        let hash = list.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
        format!("{:08x}", hash as u32)
    }

    /// The logs of `attempt`'s submission.
    fn logs(&self, attempt: usize) -> PathBuf {
        let dir = format!("{}-a{attempt}", self.tag());
        self.root
            .join("tasks")
            .join("logs")
            .join(self.batch)
            .join(dir)
    }

    /// The log of the task at `position` in `attempt`.
    fn log_path(&self, position: usize, attempt: usize) -> PathBuf {
        self.logs(attempt).join(format!("{position}.log"))
    }

    /// The runner's command line for this batch: it reads its position
    /// from `var` (and no other, so that an engine started inside another's
    /// job reads its own) and maps it through the batch's indices.
    fn runner(&self, var: &str) -> Vec<String> {
        let mut args = self.cluster.runner.clone();
        args.extend(["--indices".into(), indices::format(&self.indices)]);
        args.extend(["--position-var".into(), var.into()]);
        args
    }

    /// Submits the tasks at `positions` (in arrays of at most
    /// [`MAX_ARRAY`], at once) and waits for them; `true` when the engine
    /// says every one succeeded.
    fn run(&self, positions: &[usize], attempt: usize) -> Result<bool, ClusterError> {
        let logs = self.logs(attempt);
        std::fs::create_dir_all(&logs).map_err(|e| io_err(&logs, e))?;
        let c = &self.cluster.config;
        if c.engine == EngineKind::Kubernetes {
            return self.kubernetes(positions, attempt);
        }
        let arrays: Vec<String> = positions.chunks(MAX_ARRAY).map(indices::format).collect();
        let logs = logs.as_path();
        let results: Vec<Result<bool, ClusterError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = arrays
                .iter()
                .map(|array| {
                    let submitted = move |id: &str| {
                        let job = crate::jobs::Job {
                            engine: c.engine.name().into(),
                            id: id.into(),
                            batch: self.batch.into(),
                            attempt,
                        };
                        crate::jobs::record(self.root, &job);
                    };
                    scope.spawn(move || match c.engine {
                        EngineKind::Slurm => {
                            run_engine_with(c.engine, self.slurm(array, logs), &submitted)
                        }
                        EngineKind::Hyperqueue => {
                            run_engine(c.engine, self.hyperqueue(array, logs))
                        }
                        _ => Err(ClusterError::Config(
                            "engine = \"local\" runs tasks in-process, not through run_batch"
                                .into(),
                        )),
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Ok(false)))
                .collect()
        });
        let mut all = true;
        for r in results {
            all &= r?;
        }
        Ok(all)
    }

    fn slurm(&self, array: &str, logs: &Path) -> Command {
        let c = &self.cluster.config;
        let mut cmd = Command::new("sbatch");
        cmd.arg("--wait")
            .arg("--parsable")
            .arg(format!("--job-name=serl-{}", self.batch))
            .arg(format!("--array={array}"))
            .arg(format!("--chdir={}", self.cluster.workdir.display()))
            .arg(format!("--output={}/%a.log", logs.display()))
            .arg(format!("--cpus-per-task={}", c.cpus_per_task));
        let s = &c.slurm;
        for (flag, v) in [
            ("partition", &s.partition),
            ("time", &s.time),
            ("mem", &s.mem),
        ] {
            if let Some(v) = v {
                cmd.arg(format!("--{flag}={v}"));
            }
        }
        cmd.args(&s.extra_args);
        cmd.arg("--wrap")
            .arg(shell_words(&self.runner("SLURM_ARRAY_TASK_ID")));
        cmd
    }

    fn hyperqueue(&self, array: &str, logs: &Path) -> Command {
        let c = &self.cluster.config;
        let mut cmd = Command::new("hq");
        cmd.arg("submit")
            .arg("--wait")
            .arg(format!("--name=serl-{}", self.batch))
            .arg(format!("--array={array}"))
            .arg(format!("--cpus={}", c.cpus_per_task))
            .arg(format!("--cwd={}", self.cluster.workdir.display()))
            .arg(format!("--stdout={}/%{{TASK_ID}}.log", logs.display()))
            .arg(format!("--stderr={}/%{{TASK_ID}}.err", logs.display()))
            .args(&c.hyperqueue.extra_args)
            .arg("--")
            .args(self.runner("HQ_TASK_ID"));
        cmd
    }

    /// Writes the batch's Indexed Job, applies it unless told not to, and
    /// waits for the outputs (Kubernetes retries failed indices itself,
    /// `backoffLimitPerIndex`).
    fn kubernetes(&self, positions: &[usize], attempt: usize) -> Result<bool, ClusterError> {
        let c = &self.cluster.config;
        let k = &c.kubernetes;
        let name = manifest::job_name(self.root, self.batch, &format!("{}-{attempt}", self.tag()));
        let indices: Vec<usize> = positions.iter().map(|&p| self.indices[p]).collect();
        let mut runner = self.cluster.runner.clone();
        runner.extend(["--indices".into(), indices::format(&indices)]);
        runner.extend(["--position-var".into(), "JOB_COMPLETION_INDEX".into()]);
        let text = manifest::indexed_job(&manifest::JobSpec {
            name: &name,
            config: c,
            completions: indices.len(),
            workdir: &self.cluster.workdir,
            command: &runner,
        });
        let dir = self.root.join("tasks").join("manifests");
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let path = dir.join(format!("{name}.yaml"));
        serl_report::write_atomic(&path, text.as_bytes()).map_err(|e| io_err(&path, e))?;
        if k.apply {
            let mut cmd = Command::new("kubectl");
            cmd.arg("apply").arg("-f").arg(&path);
            if !run_engine(c.engine, cmd)? {
                return Err(ClusterError::Rejected {
                    program: "kubectl apply".into(),
                    message: format!("{} was not applied (see the warning above)", path.display()),
                });
            }
        } else {
            tracing::warn!(
                "waiting for the pods of {} (apply it with kubectl apply -f {})",
                name,
                path.display()
            );
        }
        let plan = self.cluster.plan();
        let outputs: Vec<PathBuf> = indices
            .iter()
            .map(|&i| plan.task(i).map(|t| plan.output_path(t)))
            .collect::<Result<_, _>>()?;
        drop(plan);
        let t0 = Instant::now();
        loop {
            let missing: Vec<usize> = (0..outputs.len())
                .filter(|&i| !outputs[i].exists())
                .collect();
            if missing.is_empty() {
                return Ok(true);
            }
            if k.timeout_secs > 0 && t0.elapsed().as_secs() >= k.timeout_secs {
                return Err(ClusterError::Timeout {
                    batch: self.batch.into(),
                    missing: missing.len(),
                    first: indices[missing[0]],
                    secs: k.timeout_secs,
                    hint: format!("kubectl logs -n {} job/{name}", k.namespace),
                });
            }
            std::thread::sleep(Duration::from_secs_f64(k.poll_secs));
        }
    }
}

/// Runs the engine's command and returns whether it reported success
/// (an array job whose tasks all exited 0). A submission the scheduler
/// refused outright (a bad partition, an array too long) is an error
/// with its message, not a failed task.
fn run_engine(engine: EngineKind, cmd: Command) -> Result<bool, ClusterError> {
    run_engine_with(engine, cmd, &|_| {})
}

/// [`run_engine`], calling `submitted` with the job id as soon as the
/// scheduler prints it (`sbatch --parsable` prints it on acceptance, then
/// waits), so the id is on record while the job runs.
fn run_engine_with(
    engine: EngineKind,
    mut cmd: Command,
    submitted: &dyn Fn(&str),
) -> Result<bool, ClusterError> {
    use std::io::{BufRead, Read};
    let program = cmd.get_program().to_string_lossy().to_string();
    tracing::debug!(?cmd, "submitting");
    let submit_err = |e: std::io::Error| ClusterError::Submit {
        engine: engine.name(),
        program: program.clone(),
        message: e.to_string(),
    };
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(submit_err)?;
    let mut err_pipe = child.stderr.take();
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_string(&mut text);
        }
        text
    });
    let mut stdout = String::new();
    if let Some(out) = child.stdout.take() {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if stdout.is_empty() {
                if let Some(id) = job_id(&line) {
                    submitted(id);
                }
            }
            stdout.push_str(&line);
            stdout.push('\n');
        }
    }
    let status = child.wait().map_err(submit_err)?;
    let stderr = stderr_reader.join().unwrap_or_default().trim().to_string();
    if status.success() {
        return Ok(true);
    }
    // sbatch --parsable prints the job id, hq "Job submitted ...", once
    // the job is accepted: without it nothing ran.
    let accepted = match engine {
        EngineKind::Slurm => stdout.lines().any(|l| job_id(l).is_some()),
        EngineKind::Hyperqueue => stdout.contains("submitted") || stderr.contains("submitted"),
        _ => true,
    };
    if !accepted {
        return Err(ClusterError::Rejected {
            program,
            message: if stderr.is_empty() {
                stdout.trim().to_string()
            } else {
                stderr
            },
        });
    }
    tracing::warn!("{program} exited with {status}: {stderr}");
    Ok(false)
}

/// Why the scheduler stopped a task, from the line its daemon writes
/// into the task's log (Slurm's `*** JOB 12 ON node CANCELLED AT ... DUE
/// TO TIME LIMIT ***`), with the setting that decides it.
fn scheduler_reason(tail: &str, config: &ClusterConfig) -> String {
    let setting = |name: &str, v: &Option<String>| {
        v.as_ref()
            .map_or(format!("[cluster.slurm] {name} unset"), |v| {
                format!("[cluster.slurm] {name} = \"{v}\"")
            })
    };
    if tail.contains("DUE TO TIME LIMIT") {
        format!(
            ": the scheduler stopped it at its time limit ({})",
            setting("time", &config.slurm.time)
        )
    } else if tail.contains("DUE TO PREEMPTION") {
        ": the scheduler preempted it".into()
    } else if tail.contains("oom-kill") || tail.contains("OUT_OF_MEMORY") {
        format!(
            ": the scheduler killed it for its memory ({})",
            setting("mem", &config.slurm.mem)
        )
    } else if tail.contains("CANCELLED AT") {
        ": the scheduler cancelled it (scancel, or an administrator)".into()
    } else {
        String::new()
    }
}

/// The job id of `sbatch --parsable`'s line (`12` or `12;cluster`).
fn job_id(line: &str) -> Option<&str> {
    let id = line.trim().split(';').next()?;
    id.parse::<u64>().is_ok().then_some(id)
}

/// `args` as one `sh` command line, each quoted.
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The last `n` lines of a log and of its `.err` beside it, where an
/// engine keeps stderr apart (or why there is no log).
fn tail(path: &Path, n: usize) -> String {
    let err = std::fs::read_to_string(path.with_extension("err")).unwrap_or_default();
    let err: Vec<&str> = err.lines().collect();
    let err = err[err.len().saturating_sub(n)..].join("\n");
    let log = match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        Err(e) => format!("(no log: {e})"),
    };
    if err.is_empty() {
        log
    } else {
        format!("{log}\n{err}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_survives_the_shell_whatever_its_paths_hold() {
        let args = vec!["/opt/my serl/serl".to_string(), "it's".into(), "--x".into()];
        let line = shell_words(&args);
        assert_eq!(line, r"'/opt/my serl/serl' 'it'\''s' '--x'");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s|' {line}"))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "/opt/my serl/serl|it's|--x|"
        );
    }

    #[test]
    fn a_missing_scheduler_is_named() {
        let err =
            run_engine(EngineKind::Slurm, Command::new("sbatch-that-is-not-here")).unwrap_err();
        assert!(err.to_string().contains("is slurm installed"), "{err}");
    }
}
