//! A one-node Slurm cluster on loopback (`tests/slurm.sh`), up for one
//! test and down when dropped, and the note a test leaves when what it
//! needs (this cluster, root for a tmpfs) is not here (`.ci/run` prints
//! it).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::repo;

/// A Slurm cluster of one node; `conf` is its `SLURM_CONF`.
pub struct Slurm {
    dir: tempfile::TempDir,
    pub conf: PathBuf,
}

impl Slurm {
    fn script() -> PathBuf {
        repo().join("crates/serl/tests/slurm.sh")
    }

    /// Up, or why not.
    pub fn up() -> Result<Slurm, String> {
        cluster_suite()?;
        let dir = tempfile::tempdir().unwrap();
        let o = Command::new("bash")
            .arg(Self::script())
            .arg("up")
            .arg(dir.path().join("slurm"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&o.stdout).trim().to_string();
        if !o.status.success() {
            return Err(format!(
                "{said} {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Ok(Slurm {
            conf: PathBuf::from(said.lines().last().unwrap_or_default()),
            dir,
        })
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(Self::script())
            .arg("down")
            .arg(self.dir.path().join("slurm"))
            .status();
    }
}

/// The command that runs the cluster suite (README, "Run on a cluster").
pub const CLUSTER_SUITE: &str =
    "SERL_CLUSTER_SUITE=1 cargo test -p serl --test cluster --test slurm_faults --test rundir -- slurm full_disk";

/// Whether the cluster suite is asked for: the tests that install and
/// start system services (Slurm, with apt, as root) or mount filesystems
/// run only with `SERL_CLUSTER_SUITE=1`, which `.ci/run` sets for its
/// second step, so that the README's test command on a workstation
/// installs nothing.
pub fn cluster_suite() -> Result<(), String> {
    if std::env::var_os("SERL_CLUSTER_SUITE").is_some_and(|v| v == "1") {
        return Ok(());
    }
    Err(format!(
        "part of the cluster suite, which installs and starts Slurm (as root, with apt) and mounts a tmpfs; run it with `{CLUSTER_SUITE}` (.ci/run does)"
    ))
}

/// Where test `test` notes that it was skipped, for `.ci/run` to print.
pub fn skip_note(test: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cluster-tests-skipped-{test}.txt"))
}

/// Says the test was skipped, here and where `.ci/run` prints it.
pub fn skipped(test: &str, why: &str) {
    let line = format!("{test}: skipped: {why}");
    eprintln!("{line}");
    let _ = std::fs::write(skip_note(test), format!("{line}\n"));
}
