//! What a run spent, stage by stage, kept in the run directory
//! (`costs.json`) so that a resumed run adds to its earlier processes'
//! costs instead of forgetting them: resuming a finished run to confirm
//! it over seeds must not rewrite its cost table with the seconds of
//! loading what was done.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::error::{read_json, write_json};
use crate::stage_clock::{self, STAGE_SPAN, STAGE_TARGET};

/// The stages whose trainings the cost table breaks down.
#[derive(Clone, Copy)]
pub(crate) enum ProfiledStage {
    Candidates,
    LowLevel,
}

/// What `costs.json` holds.
#[derive(Default, Serialize, Deserialize)]
struct Recorded {
    /// Seconds per stage, over every process.
    stages: BTreeMap<String, f64>,
    /// Wall seconds of every process, up to its last save.
    wall_secs: f64,
    /// CPU seconds (user and system, every thread) of every process, up to
    /// its last save, where the system tells them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpu_secs: Option<f64>,
}

/// The cores a run kept busy: its processes' CPU seconds over their wall
/// seconds, and the cores the machine offers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoreUse {
    /// CPU seconds, every thread of every process that worked on the run.
    pub cpu_secs: f64,
    /// Wall seconds of those processes.
    pub wall_secs: f64,
    /// Cores available to this process.
    pub cores: usize,
}

impl CoreUse {
    /// The share of the cores' time the run kept busy, in [0, 1].
    pub fn busy_share(&self) -> f64 {
        (self.cpu_secs / (self.wall_secs * self.cores.max(1) as f64).max(1e-9)).min(1.0)
    }
}

/// This process's CPU seconds so far (user and system, all threads): from
/// `/proc/self/stat`, whose clock ticks are 1/100 s on Linux (`USER_HZ`);
/// `None` elsewhere.
fn process_cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which may hold spaces), from the
    // third on: utime and stime are the 14th and 15th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i - 3)?.parse::<u64>().ok();
    Some((ticks(14)? + ticks(15)?) as f64 / 100.0)
}

/// Seconds spent per stage, saved after every change.
pub(crate) struct Stages {
    recorded: Recorded,
    /// The wall seconds of earlier processes.
    earlier_wall: f64,
    /// Their CPU seconds, and this process's when it started.
    earlier_cpu: Option<f64>,
    cpu_at_start: Option<f64>,
    started: Instant,
    path: Option<PathBuf>,
}

impl Default for Stages {
    fn default() -> Self {
        Stages {
            recorded: Recorded::default(),
            earlier_wall: 0.0,
            earlier_cpu: Some(0.0),
            cpu_at_start: process_cpu_secs(),
            started: Instant::now(),
            path: None,
        }
    }
}

impl Stages {
    /// The costs recorded in `dir` so far (none for a new run), saved
    /// there again at every change.
    pub(crate) fn resume(dir: &Path) -> Self {
        let path = dir.join("costs.json");
        let recorded: Recorded = read_json(&path).unwrap_or_default();
        // A record from before CPU time was kept has none to add to: then
        // the run's share is unknown, not this process's alone.
        let earlier_cpu = match recorded.cpu_secs {
            Some(c) => Some(c),
            None if recorded.wall_secs == 0.0 => Some(0.0),
            None => None,
        };
        Stages {
            earlier_wall: recorded.wall_secs,
            earlier_cpu,
            cpu_at_start: process_cpu_secs(),
            recorded,
            started: Instant::now(),
            path: Some(path),
        }
    }

    /// Wall seconds over every process that worked on the run.
    pub(crate) fn wall_secs(&self) -> f64 {
        self.earlier_wall + self.started.elapsed().as_secs_f64()
    }

    /// CPU seconds over every process that worked on the run, where every
    /// one of them could tell.
    fn cpu_secs(&self) -> Option<f64> {
        Some(self.earlier_cpu? + process_cpu_secs()? - self.cpu_at_start?)
    }

    /// The cores the run kept busy so far (`None` where the system does
    /// not tell a process its CPU time).
    pub(crate) fn core_use(&self) -> Option<CoreUse> {
        Some(CoreUse {
            cpu_secs: self.cpu_secs()?,
            wall_secs: self.wall_secs(),
            cores: std::thread::available_parallelism().map_or(1, usize::from),
        })
    }

    pub(crate) fn add(&mut self, name: &str, secs: f64) {
        *self.recorded.stages.entry(name.to_string()).or_default() += secs;
        self.save();
    }

    /// Saves the costs; a failed save costs only the record of the
    /// seconds (the run's results are written elsewhere), so it is not
    /// an error.
    fn save(&mut self) {
        self.recorded.wall_secs = self.wall_secs();
        self.recorded.cpu_secs = self.cpu_secs();
        if let Some(p) = &self.path {
            let _ = write_json(p, &self.recorded);
        }
    }

    /// Runs `f` in a `stage` span labelled `name` and counts the span's
    /// seconds towards `name`, as the [`StageClock`](crate::StageClock) layer measured them
    /// (the slice a trace draws); where no such layer is installed, a
    /// clock around the same call.
    pub(crate) fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let span = tracing::info_span!(target: STAGE_TARGET, STAGE_SPAN, label = %name);
        let id = span.id();
        let t = Instant::now();
        let out = span.in_scope(f);
        let clock = t.elapsed().as_secs_f64();
        drop(span);
        let secs = id.as_ref().and_then(stage_clock::take).unwrap_or(clock);
        self.add(name, secs);
        out
    }

    /// A training's profile under `stage`: `STAGE · dynamic envs` and
    /// the rest (each training's own seconds, added up).
    pub(crate) fn add_profile(&mut self, stage: ProfiledStage, p: &serl_train::TrainProfile) {
        let names = match stage {
            ProfiledStage::Candidates => [
                "train · env stepping (wall)",
                "train · static envs (their threads)",
                "train · dynamic envs (their threads)",
                "train · learning",
            ],
            ProfiledStage::LowLevel => [
                "low-level DEK · env stepping (wall)",
                "low-level DEK · static envs (their threads)",
                "low-level DEK · dynamic envs (their threads)",
                "low-level DEK · learning",
            ],
        };
        let secs = [
            p.env_secs,
            p.static_env_secs,
            p.dynamic_env_secs,
            p.learn_secs,
        ];
        for (name, s) in names.into_iter().zip(secs) {
            *self.recorded.stages.entry(name.to_string()).or_default() += s;
        }
        self.save();
    }

    /// The stages and their seconds, by name.
    pub(crate) fn sorted(&self) -> Vec<(String, f64)> {
        self.recorded
            .stages
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_add_up_their_time_and_list_by_name() {
        let mut s = Stages::default();
        s.add("train", 1.0);
        s.add("design", 0.5);
        s.add("train", 2.0);
        assert_eq!(s.time("test", || 7), 7);
        let names: Vec<String> = s.sorted().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["design", "test", "train"]);
    }

    /// `costs.json` and a `--trace` timeline are one measurement: each
    /// stage's seconds in the table are its slices' in the trace.
    #[test]
    fn the_cost_table_holds_the_seconds_the_trace_draws() {
        use tracing_subscriber::layer::SubscriberExt;
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("trace.json");
        let (chrome, guard) = tracing_chrome::ChromeLayerBuilder::new()
            .file(&trace)
            .include_args(true)
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(crate::StageClock)
            .with(chrome);
        let nap = |ms| std::thread::sleep(std::time::Duration::from_millis(ms));
        let mut stages = Stages::resume(dir.path());
        let taken = || stage_clock::TAKEN.with(|n| n.get());
        let before = taken();
        tracing::subscriber::with_default(subscriber, || {
            stages.time("design", || nap(40));
            stages.time("test", || nap(10));
            stages.time("design", || nap(20));
        });
        drop(guard);
        assert_eq!(
            taken() - before,
            3,
            "each stage's seconds read from its span"
        );

        let events: Vec<serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
        let mut drawn: BTreeMap<String, f64> = BTreeMap::new();
        let mut began = None;
        for e in events.iter().filter(|e| e["name"] == STAGE_SPAN) {
            let ts = e["ts"].as_f64().unwrap() / 1e6;
            match e["ph"].as_str().unwrap() {
                "B" => began = Some((e["args"]["label"].as_str().unwrap().to_string(), ts)),
                "E" => {
                    let (label, at) = began.take().unwrap();
                    *drawn.entry(label).or_default() += ts - at;
                }
                other => panic!("unexpected phase {other}: {e}"),
            }
        }
        let recorded: Recorded = read_json(&dir.path().join("costs.json")).unwrap();
        assert_eq!(drawn.len(), 2, "{drawn:?}");
        for (label, secs) in &drawn {
            let table = recorded.stages[label];
            assert!(
                (table - secs).abs() < 0.002,
                "{label}: {table} against {secs}"
            );
        }
        assert!(drawn["design"] >= 0.06, "{drawn:?}");
    }

    #[test]
    fn a_run_counts_the_cpu_seconds_of_all_its_threads() {
        let s = Stages::default();
        // Two threads busy until the process has used 0.3 CPU seconds
        // since the start (or 20 s have passed): on a loaded machine the
        // wall time they need is longer, the CPU time they count the same.
        let used = || s.core_use().map_or(f64::INFINITY, |u| u.cpu_secs);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    let t = Instant::now();
                    let mut x = 0u64;
                    while used() < 0.3 && t.elapsed().as_secs_f64() < 20.0 {
                        for _ in 0..100_000 {
                            x = std::hint::black_box(x.wrapping_add(1));
                        }
                    }
                });
            }
        });
        let Some(u) = s.core_use() else {
            eprintln!("skipped: this system does not tell a process its CPU time");
            return;
        };
        assert!(u.cpu_secs >= 0.3, "{u:?}");
        assert!(u.busy_share() > 0.0 && u.busy_share() <= 1.0, "{u:?}");
    }

    #[test]
    fn a_resumed_run_keeps_the_costs_its_earlier_processes_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = Stages::resume(dir.path());
        first.add("final training", 12.5);
        first.add("train", 30.0);
        drop(first);
        let mut again = Stages::resume(dir.path());
        again.add("test", 1.0);
        let got: BTreeMap<String, f64> = again.sorted().into_iter().collect();
        assert_eq!(got["final training"], 12.5);
        assert_eq!(got["train"], 30.0);
        assert_eq!(got["test"], 1.0);
    }
}
