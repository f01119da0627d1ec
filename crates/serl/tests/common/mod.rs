//! Running the `serl` binary from the repository root, as a user does.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("../..")
}

pub fn serl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the serl binary runs")
}

/// stdout and stderr together, for assertions and failure messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A JSON file the run wrote.
#[allow(dead_code)] // not every test file reads one
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
