//! The data a study reads: bar data with what its load left out, the
//! market views with their cached noise fits, a run's order splits, and
//! the provenance a report carries.

use std::path::{Path, PathBuf};

use serl_data::{DataConfig, Dataset, Split};
use serl_env::{generate_orders, MarketData, ParentOrder};
use serl_eval::Provenance;

use crate::config::EvolveFile;
use crate::error::{Context, Result};

/// The dataset at `path`, loaded under `cfg`, the path named in errors;
/// `warn` hears at once what the load left out, when anything.
pub fn load_data(path: &Path, cfg: &DataConfig, warn: &dyn Fn(&str)) -> Result<Dataset> {
    let ds = serl_data::load(path, cfg).with_context(|| format!("loading {}", path.display()))?;
    if let Some(w) = left_out_warning(path, &ds) {
        warn(&w);
    }
    Ok(ds)
}

/// A LOBSTER symbol-day read from its files as the fill reference
/// ([`serl_env::LobsterDay`]), its date from the file's name.
pub fn lobster_day(real: serl_lob::LobsterDayFiles) -> Result<serl_env::LobsterDay> {
    let file = &real.file;
    if real.messages.is_empty() {
        return Err(crate::StudyError::msg(format!(
            "{}: the LOBSTER day has no messages",
            file.display()
        )));
    }
    let (_, date, _) = serl_lob::lobster_name(file)
        .with_context(|| format!("{}: not named like a LOBSTER file", file.display()))?;
    let date = chrono::NaiveDate::parse_from_str(&date, "%Y-%m-%d").with_context(|| {
        format!(
            "{}: `{date}` in its name is not a YYYY-MM-DD date",
            file.display()
        )
    })?;
    Ok(serl_env::LobsterDay::new(
        &real.symbol,
        date,
        real.messages,
        real.rows,
    ))
}

/// What the load of `ds` from `path` left out (files skipped, rows
/// dropped), in one line for the terminal, when anything: no command uses
/// less data than it was given without a word.
fn left_out_warning(path: &Path, ds: &Dataset) -> Option<String> {
    let left = ds.left_out();
    if left.is_empty() {
        return None;
    }
    let rows: u64 = left
        .iter()
        .filter(|p| p.line.is_some())
        .map(|p| p.count)
        .sum();
    Some(format!(
        "loading {} left out {} file(s) and {} row(s) in {} problem(s) (the report's provenance lists them; `serl data validate {}` explains each)",
        path.display(),
        ds.files_skipped(),
        rows,
        left.len(),
        path.display()
    ))
}

/// What the load of `ds` left out, one line each, for a report's
/// provenance.
pub fn skipped_lines(ds: &Dataset) -> Vec<String> {
    ds.left_out().iter().map(|p| p.to_string()).collect()
}

/// The sessions of `ds`, with the dynamic market's noise fits kept in
/// [`fit_cache_dir`] when there is one.
pub fn market_data(ds: &Dataset, cfg: &DataConfig) -> MarketData {
    with_fit_cache(MarketData::new(ds, cfg))
}

/// [`market_data`] from a dataset no longer needed, freed a symbol at a
/// time as its views are built ([`MarketData::from_dataset`]).
pub fn market_data_from(ds: Dataset, cfg: &DataConfig) -> MarketData {
    with_fit_cache(MarketData::from_dataset(ds, cfg))
}

fn with_fit_cache(md: MarketData) -> MarketData {
    match fit_cache_dir() {
        Some(dir) => md.with_fit_cache(&dir),
        None => md,
    }
}

/// Where the dynamic market's fitted noise rates are kept between runs
/// (docs/performance.md): `$SERL_CACHE_DIR/noise-fits`, else
/// `$XDG_CACHE_HOME/serl/noise-fits`, else `~/.cache/serl/noise-fits`;
/// none when `SERL_CACHE_DIR` is `off` (or no home is known).
fn fit_cache_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let root = match var("SERL_CACHE_DIR") {
        Some(v) if v == "off" => return None,
        Some(v) => PathBuf::from(v),
        None => var("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache")))?
            .join("serl"),
    };
    Some(root.join("noise-fits"))
}

/// Where a report's orders came from: the data, split, seed and configs,
/// and the serl version and commit that wrote it, now.
pub fn provenance(
    data_path: &Path,
    split: &str,
    seed: u64,
    orders: usize,
    (order_config, env_config): (&serl_env::OrderConfig, &serl_env::EnvConfig),
    reward: String,
) -> Result<Provenance> {
    Ok(Provenance {
        data_path: data_path.display().to_string(),
        split: split.into(),
        seed,
        orders,
        order_config: serde_json::to_string(order_config)?,
        env_config: serde_json::to_string(env_config)?,
        reward,
        serl_version: env!("CARGO_PKG_VERSION").into(),
        git_commit: git_commit(),
        created: now(),
        ..Provenance::default()
    })
}

/// Where a backtest's orders came from: [`provenance`] with the default
/// reward of `cfg`'s `[env]`.
pub fn backtest_provenance(
    data_path: &Path,
    split: Split,
    orders: usize,
    cfg: &crate::config::BacktestFile,
) -> Result<Provenance> {
    use serl_env::Reward as _;
    provenance(
        data_path,
        &split.to_string(),
        cfg.orders.seed,
        orders,
        (&cfg.orders, &cfg.env),
        cfg.env.default_reward().describe(),
    )
}

/// The commit of the source this serl was built from, when it is a git
/// checkout.
fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Now, in RFC 3339.
fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    chrono::DateTime::from_timestamp(secs, 0).map_or_else(|| secs.to_string(), |t| t.to_rfc3339())
}

/// The sessions and orders of a run: what the coordinator and each of
/// its tasks load alike from the run's config.
pub struct StudyData {
    /// How many symbols the data holds.
    pub symbols: usize,
    /// The market views the orders play on.
    pub market: MarketData,
    /// The train split's orders.
    pub train: Vec<ParentOrder>,
    /// The validation split's orders.
    pub val: Vec<ParentOrder>,
    /// The test split's orders.
    pub test: Vec<ParentOrder>,
    /// Every order of the data in one id space (walk-forward's windows),
    /// when asked for.
    pub all: Vec<ParentOrder>,
    /// What the load left out, one line each (for the report's
    /// provenance).
    pub skipped: Vec<String>,
}

impl StudyData {
    /// The run's sessions and orders; with `all`, every order of the data
    /// too (for `--walk-forward`), else none. `warn` hears at once what the
    /// load left out, when anything.
    pub fn load(cfg: &EvolveFile, all: bool, warn: &dyn Fn(&str)) -> Result<StudyData> {
        let data_path = cfg.data_path();
        if !data_path.exists() {
            let hint = crate::paths::as_written_hint("data_path", &cfg.paths_as_written);
            crate::bail!("the data {} is not there{hint}", data_path.display());
        }
        let ds = load_data(&data_path, &cfg.data, warn)?;
        let train = generate_orders(&ds, Split::Train, &cfg.data, &cfg.orders)?;
        let val = generate_orders(&ds, Split::Validation, &cfg.data, &cfg.orders)?;
        let test = generate_orders(&ds, Split::Test, &cfg.data, &cfg.orders)?;
        let all = if all {
            generate_orders(&ds, Split::All, &cfg.data, &cfg.orders)?
        } else {
            Vec::new()
        };
        if train.is_empty() || val.is_empty() || test.is_empty() {
            crate::bail!(
                "{}: the train, validation and test splits need orders ({} / {} / {})",
                data_path.display(),
                train.len(),
                val.len(),
                test.len()
            );
        }
        Ok(StudyData {
            skipped: skipped_lines(&ds),
            symbols: ds.symbols().len(),
            market: market_data_from(ds, &cfg.data),
            train,
            val,
            test,
            all,
        })
    }
}
