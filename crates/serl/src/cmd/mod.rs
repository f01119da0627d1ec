pub mod backtest;
pub mod bench;
pub mod data;
pub mod evolve;
pub mod lob;
pub mod prompts;
pub mod simulate;
pub mod train;

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
