//! The task plan: `RUN_DIR/tasks.jsonl`, one task per line, appended as a
//! run reaches each batch of work that parallelises.
//!
//! A task names everything its result depends on (its kind, its seed and
//! its input) and the one file it writes (`output`, relative to the run
//! directory). Its index is its line: the coordinator appends tasks in
//! the order the run reaches them, which depends only on the run's config
//! and seed, so a resumed run finds each of its tasks at the index it had
//! and a scheduler's retry of index I runs the same task again.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{io_err, ClusterError};

/// The plan's file name inside the run directory.
pub const PLAN_FILE: &str = "tasks.jsonl";

/// One unit of work: what it runs and the file it writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Its line in `tasks.jsonl`, from 0.
    pub index: usize,
    /// The batch it belongs to (`i0` for iteration 0's candidates,
    /// `ll0_g0` for an ES generation, `final`): the tasks submitted together.
    pub batch: String,
    /// What the runner does with `input` (`evolve.score`, `evolve.final`).
    pub kind: String,
    /// The seed of its random parts.
    pub seed: u64,
    /// The file it writes, relative to the run directory; its presence
    /// means the task is done (it is written atomically, last).
    pub output: PathBuf,
    /// Everything else its result depends on.
    pub input: serde_json::Value,
}

/// What a new task is, before the plan gives it an index.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTask {
    /// See [`Task::kind`].
    pub kind: String,
    /// See [`Task::seed`].
    pub seed: u64,
    /// See [`Task::output`]; it also identifies the task in the plan.
    pub output: PathBuf,
    /// See [`Task::input`].
    pub input: serde_json::Value,
}

/// `tasks.jsonl` of a run directory, as read and as appended to.
#[derive(Debug)]
pub struct Plan {
    root: PathBuf,
    tasks: Vec<Task>,
}

impl Plan {
    /// The plan of the run in `root` (empty when the run has none yet),
    /// to read: a last line cut short (a coordinator appending right now,
    /// or one that died appending) is left out. A line that does not
    /// parse is an error naming the file and line.
    pub fn open(root: &Path) -> Result<Plan, ClusterError> {
        Self::read(root, false)
    }

    /// The plan, for the coordinator that appends to it: a last line cut
    /// short (it died appending) is removed from the file.
    pub fn open_to_append(root: &Path) -> Result<Plan, ClusterError> {
        Self::read(root, true)
    }

    fn read(root: &Path, repair: bool) -> Result<Plan, ClusterError> {
        let path = root.join(PLAN_FILE);
        let mut tasks = Vec::new();
        if path.exists() {
            let mut text = std::fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
            if !text.is_empty() && !text.ends_with('\n') {
                // The coordinator died while appending: the cut line was
                // never a task anyone ran.
                text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
                if repair {
                    std::fs::write(&path, &text).map_err(|e| io_err(&path, e))?;
                }
            }
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let task: Task = serde_json::from_str(line).map_err(|e| ClusterError::Plan {
                    path: path.display().to_string(),
                    line: i + 1,
                    message: e.to_string(),
                })?;
                if task.index != tasks.len() {
                    return Err(ClusterError::Plan {
                        path: path.display().to_string(),
                        line: i + 1,
                        message: format!(
                            "the task's index is {}; line {} must hold task {}",
                            task.index,
                            i + 1,
                            tasks.len()
                        ),
                    });
                }
                tasks.push(task);
            }
        }
        Ok(Plan {
            root: root.to_path_buf(),
            tasks,
        })
    }

    /// The run directory the plan belongs to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every task, by index.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// Task `index`, or an error saying how many the plan has.
    pub fn task(&self, index: usize) -> Result<&Task, ClusterError> {
        self.tasks
            .get(index)
            .ok_or_else(|| ClusterError::NoSuchTask {
                plan: self.root.join(PLAN_FILE).display().to_string(),
                index,
                count: self.tasks.len(),
            })
    }

    /// The indices of batch `batch`, in order.
    pub fn batch(&self, batch: &str) -> Vec<usize> {
        self.tasks
            .iter()
            .filter(|t| t.batch == batch)
            .map(|t| t.index)
            .collect()
    }

    /// Where task `t` writes.
    pub fn output_path(&self, t: &Task) -> PathBuf {
        self.root.join(&t.output)
    }

    /// Writes task `t`'s output: atomically (the output's presence means
    /// the task is done), creating the folders above it.
    pub fn write_output(&self, t: &Task, bytes: &[u8]) -> Result<(), ClusterError> {
        let path = self.output_path(t);
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| io_err(d, e))?;
        }
        serl_report::write_atomic(&path, bytes).map_err(|e| io_err(&path, e))
    }

    /// Whether task `t`'s output exists.
    pub fn is_done(&self, t: &Task) -> bool {
        self.output_path(t).exists()
    }

    /// Adds `new` to batch `batch` and returns its index. A task with the
    /// same output that the plan already holds (a resumed run) keeps its
    /// index, and must be the same task: a different one means the run's
    /// config or code changed under it, which is an error.
    pub fn add(&mut self, batch: &str, new: NewTask) -> Result<usize, ClusterError> {
        if let Some(old) = self.tasks.iter().find(|t| t.output == new.output) {
            let differs = if old.batch != batch {
                Some("batch".to_string())
            } else if old.kind != new.kind {
                Some("kind".into())
            } else if old.seed != new.seed {
                Some("seed".into())
            } else {
                first_difference(&old.input, &new.input, "input")
            };
            if let Some(field) = differs {
                return Err(ClusterError::Changed {
                    plan: self.root.join(PLAN_FILE).display().to_string(),
                    index: old.index,
                    output: new.output.display().to_string(),
                    field,
                });
            }
            return Ok(old.index);
        }
        let task = Task {
            index: self.tasks.len(),
            batch: batch.to_string(),
            kind: new.kind,
            seed: new.seed,
            output: new.output,
            input: new.input,
        };
        let path = self.root.join(PLAN_FILE);
        let mut line = serde_json::to_string(&task).map_err(|e| io_err(&path, e))?;
        line.push('\n');
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        f.write_all(line.as_bytes()).map_err(|e| io_err(&path, e))?;
        f.sync_data().map_err(|e| io_err(&path, e))?;
        self.tasks.push(task);
        Ok(self.tasks.len() - 1)
    }
}

/// The path of the first value where `a` and `b` differ (`input.job.seed`).
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(u), Some(v)) => first_difference(u, v, &format!("{at}.{k}")),
                _ => Some(format!("{at}.{k}")),
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (u, v))| first_difference(u, v, &format!("{at}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{at} ({a} then, {b} now)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(output: &str, seed: u64) -> NewTask {
        NewTask {
            kind: "evolve.score".into(),
            seed,
            output: output.into(),
            input: serde_json::json!({ "key": output }),
        }
    }

    #[test]
    fn a_reopened_plan_gives_each_task_the_index_it_had() {
        let dir = tempfile::tempdir().unwrap();
        let mut plan = Plan::open(dir.path()).unwrap();
        assert_eq!(plan.add("i0", new("scores/a.json", 1)).unwrap(), 0);
        assert_eq!(plan.add("i0", new("scores/b.json", 2)).unwrap(), 1);
        assert_eq!(plan.add("i1", new("scores/c.json", 3)).unwrap(), 2);

        let mut again = Plan::open(dir.path()).unwrap();
        assert_eq!(again.tasks(), plan.tasks());
        assert_eq!(
            again.add("i0", new("scores/b.json", 2)).unwrap(),
            1,
            "the same task, the same index"
        );
        assert_eq!(again.batch("i0"), [0, 1]);
        assert_eq!(again.task(2).unwrap().seed, 3);
        assert!(matches!(
            again.task(3),
            Err(ClusterError::NoSuchTask { count: 3, .. })
        ));
    }

    #[test]
    fn a_task_that_changed_under_a_resumed_run_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut plan = Plan::open(dir.path()).unwrap();
        plan.add("i0", new("scores/a.json", 1)).unwrap();
        let err = plan.add("i0", new("scores/a.json", 9)).unwrap_err();
        assert!(
            err.to_string().contains("scores/a.json") && err.to_string().contains("seed differs"),
            "{err}"
        );
    }

    #[test]
    fn a_broken_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut plan = Plan::open(dir.path()).unwrap();
        plan.add("i0", new("scores/a.json", 1)).unwrap();
        let path = dir.path().join(PLAN_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{text}{{\"index\": 1, \"batch\"")).unwrap();
        assert_eq!(
            Plan::open(dir.path()).unwrap().tasks().len(),
            1,
            "a line cut short is left out"
        );
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .ends_with("\"batch\""),
            "a reader leaves it"
        );
        Plan::open_to_append(dir.path()).unwrap();
        assert!(
            std::fs::read_to_string(&path).unwrap().ends_with('\n'),
            "the coordinator removes it"
        );
        std::fs::write(&path, format!("{text}{{\"index\": 1, \"batch\"\n")).unwrap();
        let err = Plan::open(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("tasks.jsonl") && err.contains("line 2"),
            "{err}"
        );
    }
}
