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

/// The shipped evolve config `shipped` with tiny budgets (2 iterations of
/// 2 candidates, 512-step trainings) and `extra` appended, in `dir`.
#[allow(dead_code)] // for the evolve tests
pub fn tiny_config_from(dir: &Path, shipped: &str, extra: &str) -> PathBuf {
    let base = std::fs::read_to_string(repo().join(shipped)).unwrap();
    let cfg = base
        .replace("iterations = 3", "iterations = 2")
        .replace("candidates = 3", "candidates = 2")
        .replace("final_steps = 8192", "final_steps = 512")
        .replace("total_steps = 2048", "total_steps = 512")
        .replace("validation_orders = 200", "validation_orders = 16")
        .replace(
            "dynamic_validation_orders = 8",
            "dynamic_validation_orders = 2",
        )
        .replace("lambda = 2", "lambda = 1")
        + extra;
    let p = dir.join("evolve.toml");
    std::fs::write(&p, cfg).unwrap();
    p
}
