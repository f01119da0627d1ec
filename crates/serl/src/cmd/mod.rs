pub mod backtest;
pub mod bench;
pub mod bench_team;
pub mod confirm;
pub mod data;
pub mod evolve;
pub mod llm;
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

/// The dataset at `path`, loaded under `cfg`; what the load left out
/// (files skipped, rows dropped) is counted on stderr at once, so that no
/// command uses less data than it was given without a word.
pub fn load_data(path: &Path, cfg: &serl_data::DataConfig) -> Result<serl_data::Dataset> {
    let ds = serl_data::load(path, cfg).with_context(|| format!("loading {}", path.display()))?;
    let left = ds.left_out();
    if !left.is_empty() {
        let rows: u64 = left
            .iter()
            .filter(|p| p.line.is_some())
            .map(|p| p.count)
            .sum();
        eprintln!(
            "warning: loading {} left out {} file(s) and {} row(s) in {} problem(s) (the report's provenance lists them; `serl data validate {}` explains each)",
            path.display(),
            ds.files_skipped(),
            rows,
            left.len(),
            path.display()
        );
    }
    Ok(ds)
}

/// The value of a flag that must be a positive number. Such a flag also
/// has `allow_negative_numbers`, so that `--qty-adv -1` reaches this check
/// and is told what is wrong, rather than being read as an unknown flag.
pub fn positive(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(_) => Err(format!("must be positive, got {s}")),
        Err(_) => Err(format!("`{s}` is not a number")),
    }
}

/// The sessions of `ds`, with the dynamic market's noise fits kept in
/// [`fit_cache_dir`] when there is one.
pub(crate) fn market_data(
    ds: &serl_data::Dataset,
    cfg: &serl_data::DataConfig,
) -> serl_env::MarketData {
    let md = serl_env::MarketData::new(ds, cfg);
    match fit_cache_dir() {
        Some(dir) => md.with_fit_cache(&dir),
        None => md,
    }
}

/// Where the dynamic market's fitted noise rates are kept between runs
/// (docs/performance.md): `$SERL_CACHE_DIR/noise-fits`, else
/// `$XDG_CACHE_HOME/serl/noise-fits`, else `~/.cache/serl/noise-fits`;
/// none when `SERL_CACHE_DIR` is `off` (or no home is known).
pub(crate) fn fit_cache_dir() -> Option<std::path::PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let root = match var("SERL_CACHE_DIR") {
        Some(v) if v == "off" => return None,
        Some(v) => std::path::PathBuf::from(v),
        None => var("XDG_CACHE_HOME")
            .map(std::path::PathBuf::from)
            .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache")))?
            .join("serl"),
    };
    Some(root.join("noise-fits"))
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
