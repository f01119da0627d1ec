pub mod backtest;
pub mod bench;
pub mod bench_team;
pub mod data;
pub mod evolve;
pub mod lob;
#[cfg(feature = "local")]
pub mod probe;
pub mod prompts;
pub mod realism;
pub mod shards;
pub mod sim_tasks;
pub mod simulate;
pub mod task;
pub mod team_backtest;
pub mod train;
pub mod walk_forward;

use std::path::Path;

use anyhow::{Context, Result};
use serde::Deserialize;

/// A TOML config file, with errors that name the file (and, from toml,
/// the line and field).
pub fn read_toml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// `(file name, path)` of every shipped config whose name starts with
/// `prefix`. Read at run time: a clone sharing the target directory must
/// check its own files.
#[cfg(test)]
pub(crate) fn shipped_configs(prefix: &str) -> Vec<(String, std::path::PathBuf)> {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let root = Path::new(&manifest).join("../../configs");
    let mut out: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(&root)
        .expect("configs/ is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().to_string();
            (name.starts_with(prefix) && name.ends_with(".toml")).then_some((name, p))
        })
        .collect();
    out.sort();
    out
}
