//! A Kubernetes Indexed Job for a batch of tasks.
//!
//! Each pod runs `serl task run ROOT --indices LIST`; Kubernetes hands it
//! its position in `JOB_COMPLETION_INDEX`. The run directory must be on a
//! volume every pod mounts at the coordinator's path (`volume_claim`).

use std::path::Path;

use crate::config::ClusterConfig;

/// What an Indexed Job needs.
pub struct JobSpec<'a> {
    /// The Job's name (a DNS label).
    pub name: &'a str,
    /// `[cluster]`: image, namespace, claim, parallelism, retries, cores.
    pub config: &'a ClusterConfig,
    /// Pods to complete, one per task.
    pub completions: usize,
    /// The pods' working directory.
    pub workdir: &'a Path,
    /// The runner's command line.
    pub command: &'a [String],
}

/// A Job name for submission `tag` of batch `batch` of the run in `root`:
/// lowercase letters, digits and dashes, at most 63 characters, as
/// Kubernetes requires; a long run name is cut, the batch and tag kept.
pub fn job_name(root: &Path, batch: &str, tag: &str) -> String {
    let run: String = root
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default()
        .chars()
        .take(20)
        .collect();
    let raw = format!("serl-{run}-{batch}-{tag}").to_lowercase();
    let mut name: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    let name: String = name.chars().take(63).collect();
    name.trim_end_matches('-').to_string()
}

/// The Job's YAML.
pub fn indexed_job(spec: &JobSpec) -> String {
    let c = spec.config;
    let k = &c.kubernetes;
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let command = spec
        .command
        .iter()
        .map(|a| quote(a))
        .collect::<Vec<_>>()
        .join(", ");
    let mount = k
        .mount_path
        .clone()
        .unwrap_or_else(|| spec.workdir.display().to_string());
    let volume = match &k.volume_claim {
        Some(claim) => format!(
            "        volumeMounts:\n        - name: run\n          mountPath: {}\n      volumes:\n      - name: run\n        persistentVolumeClaim:\n          claimName: {}\n",
            quote(&mount),
            quote(claim)
        ),
        None => String::new(),
    };
    format!(
        "# serl task batch: apply with `kubectl apply -f` this file; serl waits for the outputs.\n\
apiVersion: batch/v1\n\
kind: Job\n\
metadata:\n  name: {name}\n  namespace: {ns}\n\
spec:\n  completionMode: Indexed\n  completions: {n}\n  parallelism: {par}\n  backoffLimitPerIndex: {retries}\n  maxFailedIndexes: {n}\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: task\n        image: {image}\n        workingDir: {wd}\n        command: [{command}]\n        resources:\n          requests:\n            cpu: \"{cpus}\"\n{volume}",
        name = spec.name,
        ns = quote(&k.namespace),
        n = spec.completions,
        par = k.parallelism.min(spec.completions.max(1)),
        retries = c.retries,
        image = quote(&k.image),
        wd = quote(&spec.workdir.display().to_string()),
        cpus = c.cpus_per_task,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_name_is_a_dns_label() {
        let n = job_name(Path::new("/runs/Evolve_Std"), "ll0_g1", "1a2b3c4d-2");
        assert_eq!(n, "serl-evolve-std-ll0-g1-1a2b3c4d-2");
        let long = job_name(Path::new(&"r".repeat(80)), "i0", "1a2b3c4d-0");
        assert!(
            long.len() <= 63 && long.ends_with("-i0-1a2b3c4d-0"),
            "{long}"
        );
    }

    #[test]
    fn the_manifest_is_an_indexed_job_running_the_batch() {
        let mut config = ClusterConfig::default();
        config.kubernetes.volume_claim = Some("runs".into());
        let yaml = indexed_job(&JobSpec {
            name: "serl-run-i0-0",
            config: &config,
            completions: 3,
            workdir: Path::new("/work"),
            command: &[
                "serl".into(),
                "task".into(),
                "run".into(),
                "/work/runs/r".into(),
                "--indices".into(),
                "4-6".into(),
            ],
        });
        for want in [
            "completionMode: Indexed",
            "completions: 3",
            "backoffLimitPerIndex: 2",
            "claimName: \"runs\"",
            "\"--indices\", \"4-6\"",
            "\nspec:\n  completionMode",
            "\n  template:\n    spec:\n      restartPolicy: Never",
        ] {
            assert!(yaml.contains(want), "{want} in\n{yaml}");
        }
    }
}
