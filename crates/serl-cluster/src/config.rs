//! `[cluster]`: which engine runs a run's tasks, and its settings.

use serde::{Deserialize, Serialize};

use crate::error::ClusterError;

/// Who runs the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// This process, one task per core (rayon), as without a cluster.
    #[default]
    Local,
    /// A Slurm array job per batch (`sbatch --array --wait`).
    Slurm,
    /// A HyperQueue array per batch (`hq submit --array --wait`).
    Hyperqueue,
    /// A Kubernetes Indexed Job per batch: serl writes its manifest,
    /// applies it with `kubectl` (or leaves that to you) and waits for the
    /// outputs.
    Kubernetes,
}

impl EngineKind {
    /// Every engine's name, as `[cluster] engine` and `--engine` take it.
    pub const NAMES: [&'static str; 4] = ["local", "slurm", "hyperqueue", "kubernetes"];

    /// Its name in `[cluster] engine`.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Local => "local",
            EngineKind::Slurm => "slurm",
            EngineKind::Hyperqueue => "hyperqueue",
            EngineKind::Kubernetes => "kubernetes",
        }
    }
}

/// The `[cluster]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterConfig {
    /// Who runs the tasks.
    pub engine: EngineKind,
    /// Times a failed task is submitted again before the run stops.
    pub retries: usize,
    /// Cores each task asks for (`--cpus-per-task`, `hq --cpus`,
    /// the pod's CPU request).
    pub cpus_per_task: usize,
    /// Slurm's settings.
    pub slurm: SlurmConfig,
    /// HyperQueue's settings.
    pub hyperqueue: HyperQueueConfig,
    /// Kubernetes' settings.
    pub kubernetes: KubernetesConfig,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            engine: EngineKind::Local,
            retries: 2,
            cpus_per_task: 1,
            slurm: SlurmConfig::default(),
            hyperqueue: HyperQueueConfig::default(),
            kubernetes: KubernetesConfig::default(),
        }
    }
}

/// `[cluster.slurm]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SlurmConfig {
    /// `--partition` (default: the cluster's).
    pub partition: Option<String>,
    /// `--time`, e.g. `"02:00:00"` (default: the partition's).
    pub time: Option<String>,
    /// `--mem`, e.g. `"4G"`.
    pub mem: Option<String>,
    /// More `sbatch` arguments, as written (`["--account=rl", "--qos=low"]`).
    pub extra_args: Vec<String>,
}

/// `[cluster.hyperqueue]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HyperQueueConfig {
    /// More `hq submit` arguments, as written (`["--time-limit=2h"]`).
    pub extra_args: Vec<String>,
}

/// `[cluster.kubernetes]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KubernetesConfig {
    /// The container image with `serl` on its PATH.
    pub image: String,
    /// The namespace of the Jobs.
    pub namespace: String,
    /// The PersistentVolumeClaim that holds the run directory (and the
    /// data), mounted at the same path as on the coordinator.
    pub volume_claim: Option<String>,
    /// Where the claim is mounted (default: the working directory).
    pub mount_path: Option<String>,
    /// Pods of a Job that run at once.
    pub parallelism: usize,
    /// Run `kubectl apply -f` on each manifest; with false serl only
    /// writes it and waits (someone else applies it).
    pub apply: bool,
    /// Seconds between looks for the outputs.
    pub poll_secs: f64,
    /// Seconds to wait for a batch before giving up (0: forever).
    pub timeout_secs: u64,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            image: "serl:latest".into(),
            namespace: "default".into(),
            volume_claim: None,
            mount_path: None,
            parallelism: 8,
            apply: true,
            poll_secs: 2.0,
            timeout_secs: 0,
        }
    }
}

impl ClusterConfig {
    /// Checks the table, naming the field at fault.
    pub fn validate(&self) -> Result<(), ClusterError> {
        if self.cpus_per_task == 0 {
            return Err(ClusterError::Config(
                "cpus_per_task is 0; give at least 1".into(),
            ));
        }
        let k = &self.kubernetes;
        if !(k.poll_secs > 0.0 && k.poll_secs <= 3600.0) {
            return Err(ClusterError::Config(format!(
                "kubernetes.poll_secs is {}; give a number of seconds in (0, 3600]",
                k.poll_secs
            )));
        }
        if k.parallelism == 0 {
            return Err(ClusterError::Config(
                "kubernetes.parallelism is 0; give at least 1".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--engine` lists [`EngineKind::NAMES`]: each reads as the config
    /// reads it, back to the same name, and every engine is listed (a new
    /// one fails to compile here until it is).
    #[test]
    fn every_engine_is_named_as_the_config_names_it() {
        let listed = |e: EngineKind| match e {
            EngineKind::Local
            | EngineKind::Slurm
            | EngineKind::Hyperqueue
            | EngineKind::Kubernetes => EngineKind::NAMES.contains(&e.name()),
        };
        for name in EngineKind::NAMES {
            let e: EngineKind = serde_json::from_str(&format!("\"{name}\"")).unwrap();
            assert_eq!(e.name(), name);
            assert!(listed(e));
        }
    }
}
