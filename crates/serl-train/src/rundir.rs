//! Run directories: the files a training run writes and resumes from.
//!
//! | file | what |
//! |---|---|
//! | `config.json` | the [`TrainConfig`] the run was started with |
//! | `metrics.jsonl` | one [`UpdateRecord`] per update |
//! | `checkpoint/` | the latest model, optimiser and loop state, for resume |
//! | `best.json`, `best.bpk` | the policy with the best validation PA |
//! | `final.json`, `final.bpk` | the policy after the last update |
//! | `checkpoint.json` | which policy `serl backtest --strategy policy:DIR` plays |
//! | `report.md`, `report.html` | training curves |

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::config::TrainConfig;
use crate::files::{write_atomic, write_json};
use crate::hybrid::LossWeights;
use crate::learner::AnyLearner;
use crate::policy::{Policy, PolicyMeta};
use crate::record::{append_metrics, read_metrics, write_metrics, UpdateRecord};
use crate::TrainError;

/// The loop's position, saved with each checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LoopState {
    pub update: usize,
    pub env_steps: usize,
    pub secs: f64,
    pub weights: LossWeights,
    pub best_val: Option<f64>,
}

/// A run directory being written.
pub(crate) struct RunDir {
    dir: PathBuf,
}

impl RunDir {
    pub fn new(dir: PathBuf) -> Result<Self, TrainError> {
        std::fs::create_dir_all(&dir).map_err(|e| TrainError::io(&dir, e))?;
        Ok(RunDir { dir })
    }

    fn checkpoint(&self) -> PathBuf {
        self.dir.join("checkpoint")
    }

    fn metrics(&self) -> PathBuf {
        self.dir.join("metrics.jsonl")
    }

    /// A fresh run: the config, and no metrics yet.
    pub fn start(&self, cfg: &TrainConfig) -> Result<(), TrainError> {
        self.write_json("config.json", cfg)?;
        write_metrics(&self.metrics(), &[])
    }

    /// Resumes from the checkpoint: the loop state, the learner's weights
    /// and optimiser, the observation normaliser (into `meta`), and the
    /// metrics of the updates it holds.
    pub fn resume(
        &self,
        learner: &mut dyn AnyLearner,
        meta: &mut PolicyMeta,
        ad: &Device,
    ) -> Result<(LoopState, Vec<UpdateRecord>), TrainError> {
        let ck = self.checkpoint();
        let st_path = ck.join("state.json");
        let text = std::fs::read_to_string(&st_path).map_err(|e| TrainError::io(&st_path, e))?;
        let state: LoopState = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
            path: st_path.display().to_string(),
            message: e.to_string(),
        })?;
        let saved = Policy::load(&ck, "model", ad)?;
        meta.norm = saved.meta.norm.clone();
        learner.restore(&ck, saved.model, meta)?;
        let records: Vec<UpdateRecord> = read_metrics(&self.metrics())?
            .into_iter()
            .filter(|r| r.update < state.update)
            .collect();
        write_metrics(&self.metrics(), &records)?;
        Ok((state, records))
    }

    /// Writes `value` as `name` in the run directory.
    pub fn write_json(&self, name: &str, value: &impl serde::Serialize) -> Result<(), TrainError> {
        write_json(&self.dir.join(name), value)
    }

    pub fn append(&self, r: &UpdateRecord) -> Result<(), TrainError> {
        append_metrics(&self.metrics(), r)
    }

    /// Saves the current policy, the learner's state and then the loop
    /// state: `state.json` names an update only once everything of that
    /// update is on disk.
    pub fn save_checkpoint(
        &self,
        current: &Policy,
        learner: &dyn AnyLearner,
        state: &LoopState,
    ) -> Result<(), TrainError> {
        let ck = self.checkpoint();
        std::fs::create_dir_all(&ck).map_err(|e| TrainError::io(&ck, e))?;
        current.save(&ck, "model")?;
        learner.save(&ck, current)?;
        write_json(&ck.join("state.json"), state)
    }

    /// A new best policy by validation PA; backtests play it.
    pub fn save_best(&self, policy: &Policy) -> Result<(), TrainError> {
        policy.save(&self.dir, "best")?;
        write_marker(&self.dir, "best")
    }

    /// The final policy and the report. Without validation, backtests play
    /// the final policy; with it, the best one (loaded when this process
    /// did not see it, after a resume).
    pub fn finish(
        &self,
        final_policy: &Policy,
        state: &LoopState,
        best: &mut Option<Policy>,
        records: &[UpdateRecord],
        device: &Device,
    ) -> Result<(), TrainError> {
        final_policy.save(&self.dir, "final")?;
        if best.is_none() && state.best_val.is_some() && self.dir.join("best.bpk").exists() {
            *best = Some(Policy::load(&self.dir, "best", device)?);
        }
        if state.best_val.is_none() {
            write_marker(&self.dir, "final")?;
        }
        crate::report::write(&self.dir, records)
    }
}

/// `checkpoint.json`: which saved policy a backtest should play.
fn write_marker(dir: &Path, name: &str) -> Result<(), TrainError> {
    let text = serde_json::json!({ "policy": name }).to_string();
    write_atomic(&dir.join("checkpoint.json"), text.as_bytes())
}

/// Loads the policy a run directory's `checkpoint.json` names.
pub fn load_run_policy(dir: &Path, device: &Device) -> Result<Policy, TrainError> {
    let marker = dir.join("checkpoint.json");
    let text = std::fs::read_to_string(&marker).map_err(|e| TrainError::io(&marker, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
        path: marker.display().to_string(),
        message: e.to_string(),
    })?;
    let name = v["policy"].as_str().ok_or_else(|| TrainError::Corrupt {
        path: marker.display().to_string(),
        message: "no `policy` field".into(),
    })?;
    if name.contains(['/', '\\', '.']) {
        return Err(TrainError::Corrupt {
            path: marker.display().to_string(),
            message: format!("`{name}` is not a policy name"),
        });
    }
    Policy::load(dir, name, device)
}
