//! A policy's files: its meta as JSON beside its weights as burnpack. A
//! file of its own because loading asks the registry which network the
//! meta's learner builds.

use std::path::Path;

use burn::module::Module;
use burn::tensor::Device;

use crate::policy::{Policy, PolicyMeta};
use crate::registry::registered;
use crate::TrainError;

impl Policy {
    /// Writes the policy (meta as JSON, weights as burnpack) into `dir`.
    pub fn save(&self, dir: &Path, name: &str) -> Result<(), TrainError> {
        std::fs::create_dir_all(dir).map_err(|e| TrainError::io(dir, e))?;
        let meta = dir.join(format!("{name}.json"));
        let text = serde_json::to_string_pretty(&self.meta)
            .map_err(|e| TrainError::io(&meta, std::io::Error::other(e)))?;
        crate::files::write_atomic(&meta, text.as_bytes())?;
        let weights = dir.join(format!("{name}.bpk"));
        let tmp = dir.join(format!("{name}.bpk.tmp"));
        self.model
            .clone()
            .save_file(&tmp)
            .map_err(|e| TrainError::io(&weights, std::io::Error::other(format!("{e:?}"))))?;
        std::fs::rename(&tmp, &weights).map_err(|e| TrainError::io(&weights, e))
    }

    /// Loads a policy saved by [`Policy::save`].
    pub fn load(dir: &Path, name: &str, device: &Device) -> Result<Self, TrainError> {
        let meta_path = dir.join(format!("{name}.json"));
        let text =
            std::fs::read_to_string(&meta_path).map_err(|e| TrainError::io(&meta_path, e))?;
        let meta: PolicyMeta = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
            path: meta_path.display().to_string(),
            message: e.to_string(),
        })?;
        let weights = dir.join(format!("{name}.bpk"));
        let model = registered(meta.algo)
            .network(&meta, device)?
            .try_load_file(&weights)
            .map_err(|e| TrainError::Corrupt {
                path: weights.display().to_string(),
                message: format!("{e:?}"),
            })?;
        Ok(Policy {
            meta,
            model,
            device: device.clone(),
        })
    }
}
