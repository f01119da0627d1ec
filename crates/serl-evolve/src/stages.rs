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
}

/// Seconds spent per stage, saved after every change.
pub(crate) struct Stages {
    recorded: Recorded,
    /// The wall seconds of earlier processes.
    earlier_wall: f64,
    started: Instant,
    path: Option<PathBuf>,
}

impl Default for Stages {
    fn default() -> Self {
        Stages {
            recorded: Recorded::default(),
            earlier_wall: 0.0,
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
        Stages {
            earlier_wall: recorded.wall_secs,
            recorded,
            started: Instant::now(),
            path: Some(path),
        }
    }

    /// Wall seconds over every process that worked on the run.
    pub(crate) fn wall_secs(&self) -> f64 {
        self.earlier_wall + self.started.elapsed().as_secs_f64()
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
        if let Some(p) = &self.path {
            let _ = write_json(p, &self.recorded);
        }
    }

    /// Runs `f` and counts its time towards `name`.
    pub(crate) fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.add(name, t.elapsed().as_secs_f64());
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
