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
