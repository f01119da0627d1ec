//! `serl data inspect`, `serl data validate`, `serl data convert`,
//! `serl data plant` and `serl data scale`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serl_data::{Catalog, DataConfig, ErrorPolicy};
use serl_study::rundir::RunKind;

use super::args::{check_exit, named, OutDir};

#[derive(Subcommand)]
pub enum DataCommand {
    /// Print a catalog of a dataset: symbols, sessions, rows, dates, splits
    /// and problems.
    Inspect(DataArgs),
    /// Print every problem found; exit 1 if any file fails under the policy.
    Validate(DataArgs),
    /// Write a cleaned Parquet copy, one file per symbol (OUT/SYMBOL.parquet),
    /// in bounded memory; load it with the same --config.
    Convert(ConvertArgs),
    /// Write a Parquet copy that carries a planted forecast of known
    /// strength (a `signal` column): a market with a known answer, to
    /// check that a search finds an edge where there is one and none where
    /// there is none (docs/data.md#a-market-with-a-known-answer).
    Plant(PlantArgs),
    /// Write a scale fixture: a year of sessions for an index's worth of
    /// symbols (SCALE001.parquet, …), each a chain of real sessions of the
    /// source drawn with replacement, to measure memory and time at scale.
    /// A scale test, never evidence (docs/data.md#scale).
    Scale(ScaleArgs),
}

#[derive(Args)]
#[command(mut_arg("out", |a| a.help("The folder to write (Parquet, one file per symbol, and SCALE.json)")))]
pub struct ScaleArgs {
    #[command(flatten)]
    pub source: DataSource,
    #[command(flatten)]
    pub output: OutDir,
    /// Symbols to write.
    #[arg(long, default_value_t = 500)]
    pub symbols: usize,
    /// Sessions per symbol, on consecutive weekdays.
    #[arg(long, default_value_t = 252)]
    pub sessions: usize,
    /// The first session's date.
    #[arg(long, default_value = "2019-01-02")]
    pub first_date: chrono::NaiveDate,
    /// Seed of the draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

#[derive(Args)]
#[command(mut_arg("out", |a| a.help("The folder to write (Parquet, one file per symbol, and PLANT.json)")))]
pub struct PlantArgs {
    #[command(flatten)]
    pub source: DataSource,
    #[command(flatten)]
    pub output: OutDir,
    /// The forecast's information coefficient, in [0, 1): 0 plants pure
    /// noise, nothing to find.
    #[arg(long)]
    pub strength: f64,
    /// How far ahead the signal forecasts, minutes (the task's decision
    /// interval is the natural choice).
    #[arg(long, default_value_t = 30)]
    pub horizon: u16,
    /// Seed of the forecast's noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// The data a `serl data` command reads, and how.
#[derive(Args)]
pub struct DataSource {
    /// A bar file or a folder of them (CSV, CSV.gz, LEAN zips, Parquet).
    pub path: PathBuf,
    /// Data config (column mapping, session, policy, splits).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Override the config's error policy.
    #[arg(long, value_parser = named::<ErrorPolicy>(&ErrorPolicy::NAMES))]
    pub on_error: Option<ErrorPolicy>,
}

impl DataSource {
    /// The config, with `--on-error` applied over `default` (the config's
    /// policy when `None`).
    fn config(&self, default: Option<ErrorPolicy>) -> Result<DataConfig> {
        let mut cfg = load_config(self.config.as_deref())?;
        if let Some(p) = self.on_error.or(default) {
            cfg.policy.on_error = p;
        }
        Ok(cfg)
    }
}

#[derive(Args)]
#[command(mut_arg("out", |a| a.help("The folder to write; the copy uses the config's column names")))]
pub struct ConvertArgs {
    #[command(flatten)]
    pub source: DataSource,
    #[command(flatten)]
    pub output: OutDir,
}

#[derive(Args)]
pub struct DataArgs {
    #[command(flatten)]
    pub source: DataSource,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// Show every symbol (inspect) or every problem (validate).
    #[arg(long)]
    pub all: bool,
}

/// Reads `--config`, or the defaults.
pub fn load_config(path: Option<&Path>) -> Result<DataConfig> {
    match path {
        Some(p) => Ok(DataConfig::from_file(p)?),
        None => Ok(DataConfig::default()),
    }
}

pub fn run(cmd: DataCommand) -> Result<ExitCode> {
    match cmd {
        DataCommand::Inspect(a) => inspect(a),
        DataCommand::Validate(a) => validate(a),
        DataCommand::Convert(a) => convert(a),
        DataCommand::Plant(a) => plant(a),
        DataCommand::Scale(a) => scale(a),
    }
}

fn scale(a: ScaleArgs) -> Result<ExitCode> {
    let scale = serl_data::ScaleConfig {
        symbols: a.symbols,
        sessions: a.sessions,
        first_date: a.first_date,
        seed: a.seed,
    };
    if let Err(e) = scale.validate() {
        anyhow::bail!("--symbols/--sessions: {e}");
    }
    let (path, out) = (&a.source.path, &a.output.out);
    let (report, secs) = write_copy(&a.source, &a.output, "scale", |cfg, inc| {
        serl_data::scale_fixture(path, out, cfg, &scale, inc)
            .with_context(|| format!("making a scale fixture from {}", path.display()))
    })?;
    crate::show::lines(report.lines(path, out, secs));
    Ok(ExitCode::SUCCESS)
}

fn plant(a: PlantArgs) -> Result<ExitCode> {
    let planted = serl_data::PlantConfig {
        strength: a.strength,
        horizon_minutes: a.horizon,
        seed: a.seed,
    };
    if let Err(e) = planted.validate() {
        anyhow::bail!("--strength/--horizon: {e}");
    }
    let (path, out) = (&a.source.path, &a.output.out);
    let (report, secs) = write_copy(&a.source, &a.output, "plant", |cfg, inc| {
        serl_data::plant(path, out, cfg, &planted, inc)
            .with_context(|| format!("planting a signal in a copy of {}", path.display()))
    })?;
    crate::show::lines(report.lines(&planted, path, out, secs));
    Ok(ExitCode::SUCCESS)
}

fn convert(a: ConvertArgs) -> Result<ExitCode> {
    let (path, out) = (&a.source.path, &a.output.out);
    let (report, secs) = write_copy(&a.source, &a.output, "convert", |cfg, inc| {
        serl_data::convert(path, out, cfg, inc)
            .with_context(|| format!("converting {}", path.display()))
    })?;
    crate::show::lines(report.lines(path, out, secs));
    Ok(ExitCode::SUCCESS)
}

/// What every command that writes a copy of the source does around
/// `write`: refuses an `--out` that is the source itself, claims the
/// folder, counts the files written; `write`'s report and its seconds.
fn write_copy<R>(
    source: &DataSource,
    out: &OutDir,
    what: &'static str,
    write: impl FnOnce(&DataConfig, &(dyn Fn(u64) + Sync)) -> Result<R>,
) -> Result<(R, f64)> {
    let cfg = source.config(None)?;
    let same = |o: PathBuf| source.path.canonicalize().is_ok_and(|p| o == p);
    if out.out.canonicalize().ok().is_some_and(same) {
        anyhow::bail!(
            "--out {} is the source itself; write the copy elsewhere",
            out.out.display()
        );
    }
    out.claim(RunKind::Dataset, false)?;
    let meter = crate::progress::Meter::counter(what, "files");
    let t0 = std::time::Instant::now();
    let report = write(&cfg, &|n| meter.inc(n))?;
    meter.finish();
    Ok((report, t0.elapsed().as_secs_f64()))
}

fn inspect(a: DataArgs) -> Result<ExitCode> {
    let cfg = a.source.config(None)?;
    let path = &a.source.path;
    // A symbol at a time: a dataset larger than memory can be cataloged.
    let cat = Catalog::scan(path, &cfg).with_context(|| format!("loading {}", path.display()))?;
    crate::show::json_or(&cat, a.json, || {
        crate::show::sections(&serl_study::catalog::catalog_sections(&cat, a.all))
    })?;
    Ok(ExitCode::SUCCESS)
}

fn validate(a: DataArgs) -> Result<ExitCode> {
    // Validation reports under `fail` unless told otherwise: its job is to
    // say whether the data is clean.
    let cfg = a.source.config(Some(ErrorPolicy::Fail))?;
    let path = &a.source.path;
    let ds = serl_data::scan(path, &cfg).with_context(|| format!("scanning {}", path.display()))?;
    let found = serl_study::catalog::Validation::of(&ds, cfg.policy.on_error);
    crate::show::json_or(&found, a.json, || crate::show::lines(found.lines(a.all)))?;
    Ok(check_exit(found.ok))
}
