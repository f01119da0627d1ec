//! `serl data scale`: a **scale fixture**, a year of sessions for an
//! index's worth of symbols, made by resampling whole real sessions of a
//! dataset. It measures how serl holds up at the size that gives a search
//! power (a year of minute bars for 500 stocks is about 49 M bars); it is
//! never evidence. Every session in it is a real session of the source,
//! under another name (`SCALE001`, …) and date, so its statistics are the
//! source's, repeated; the manifest beside the files (`SCALE.json`) says
//! so, and so do the symbols' names.
//!
//! Each symbol is a chain of sessions drawn with replacement (a seed per
//! symbol, so the fixture is the same whatever order its symbols are
//! written in), on consecutive weekdays from the first date; each drawn
//! session's prices are scaled so that it opens at the previous one's
//! close (its returns are the real ones, its price path continuous).
//! Gaps stay gaps, as in a copy. Memory is the source's sessions plus one
//! symbol's year per core.

use std::path::Path;
use std::sync::Arc;

use chrono::{Datelike, NaiveDate, Weekday};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::bars::Session;
use crate::config::{DataConfig, MissingMinutes};
use crate::parquet::write_sessions;
use crate::DataError;

/// The manifest a scale fixture carries beside its files.
pub const SCALE_MANIFEST: &str = "SCALE.json";

/// How big a fixture to make.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScaleConfig {
    /// Symbols (files) to write.
    pub symbols: usize,
    /// Sessions per symbol, on consecutive weekdays.
    pub sessions: usize,
    /// The first session's date (moved to the next weekday if it is not
    /// one).
    pub first_date: NaiveDate,
    /// Seed of the draws.
    pub seed: u64,
}

impl ScaleConfig {
    /// Checks the sizes, naming the flag that is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.symbols == 0 || self.symbols > 100_000 {
            return Err(format!("symbols = {}: between 1 and 100000", self.symbols));
        }
        if self.sessions == 0 || self.sessions > 10_000 {
            return Err(format!("sessions = {}: between 1 and 10000", self.sessions));
        }
        Ok(())
    }

    /// The fixture's trading dates: `sessions` weekdays from the first.
    pub fn dates(&self) -> Vec<NaiveDate> {
        let mut d = self.first_date;
        let mut out = Vec::with_capacity(self.sessions);
        while out.len() < self.sessions {
            if !matches!(d.weekday(), Weekday::Sat | Weekday::Sun) {
                out.push(d);
            }
            d = d.succ_opt().unwrap_or(d);
        }
        out
    }
}

/// What a scale fixture holds, written beside it as [`SCALE_MANIFEST`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScaleReport {
    /// What it says it is.
    pub note: String,
    /// How it was made.
    pub config: ScaleConfig,
    /// The dataset its sessions were drawn from.
    pub source: String,
    /// The source's sessions (the pool drawn from).
    pub source_sessions: usize,
    /// Parquet files written, one per symbol.
    pub written: usize,
    /// Symbol-sessions written.
    pub sessions: usize,
    /// Bars written.
    pub rows: u64,
}

const NOTE: &str = "scale test fixture: real sessions resampled under other names and \
dates, to measure memory and time at scale; never evidence of an edge";

/// The `k`th symbol's name (`SCALE001`, … wide enough for `of`).
fn symbol_name(k: usize, of: usize) -> String {
    let width = of.to_string().len().max(3);
    format!("SCALE{:0width$}", k + 1)
}

/// The `k`th symbol's year: sessions drawn from `pool` with its own seed,
/// renamed, redated and chained at the previous close.
fn symbol_year(
    pool: &[Session],
    scale: &ScaleConfig,
    dates: &[NaiveDate],
    k: usize,
) -> Vec<Session> {
    let name: Arc<str> = Arc::from(symbol_name(k, scale.symbols));
    let mut rng =
        SmallRng::seed_from_u64(scale.seed ^ (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut previous_close: Option<f64> = None;
    let mut year = Vec::with_capacity(dates.len());
    for &date in dates {
        let mut s = pool[rng.random_range(0..pool.len())].clone();
        let factor = match (previous_close, s.open.first()) {
            (Some(c), Some(&o)) if o > 0.0 && c > 0.0 => c / o,
            _ => 1.0,
        };
        for column in [&mut s.open, &mut s.high, &mut s.low, &mut s.close] {
            column.iter_mut().for_each(|p| *p *= factor);
        }
        if let Some(v) = &mut s.vwap {
            v.iter_mut().for_each(|p| *p *= factor);
        }
        s.symbol = name.clone();
        s.date = date;
        s.quotes = None;
        s.signal = None;
        previous_close = s.close.last().copied().or(previous_close);
        year.push(s);
    }
    year
}

/// Writes a scale fixture drawn from the bar data under `src` into
/// `dst/SCALE….parquet`, symbols in parallel, with [`SCALE_MANIFEST`]
/// beside them; `progress` is told of each file written.
pub fn scale_fixture(
    src: &Path,
    dst: &Path,
    cfg: &DataConfig,
    scale: &ScaleConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ScaleReport, DataError> {
    scale.validate().map_err(|message| DataError::Config {
        path: dst.to_path_buf(),
        message,
    })?;
    // The pool holds what the source had: gaps stay gaps.
    let mut cfg = cfg.clone();
    cfg.session.missing_minutes = MissingMinutes::Leave;
    let pool = crate::load(src, &cfg)?.sessions;
    if pool.is_empty() {
        return Err(DataError::NoData {
            path: src.to_path_buf(),
        });
    }
    std::fs::create_dir_all(dst).map_err(|source| DataError::Io {
        path: dst.to_path_buf(),
        source,
    })?;
    let dates = scale.dates();
    // On plain threads, not rayon's pool: `threads.rs` says why.
    let symbols: Vec<usize> = (0..scale.symbols).collect();
    let written = crate::threads::on_cores(&symbols, |&k| {
        let year = symbol_year(&pool, scale, &dates, k);
        let out = dst.join(format!("{}.parquet", symbol_name(k, scale.symbols)));
        let rows = write_sessions(&out, &year, &cfg.columns)
            .map_err(|source| DataError::Io { path: out, source })?;
        progress(1);
        Ok(rows)
    });
    let rows = written.into_iter().sum::<Result<u64, DataError>>()?;
    let report = ScaleReport {
        note: NOTE.to_string(),
        config: *scale,
        source: src.display().to_string(),
        source_sessions: pool.len(),
        written: scale.symbols,
        sessions: scale.symbols * dates.len(),
        rows,
    };
    let manifest = dst.join(SCALE_MANIFEST);
    let text = serde_json::to_string_pretty(&report).unwrap_or_default();
    std::fs::write(&manifest, text).map_err(|source| DataError::Io {
        path: manifest,
        source,
    })?;
    Ok(report)
}

impl ScaleReport {
    /// What `serl data scale` says of the fixture it wrote to `out` from
    /// `source` in `secs`.
    pub fn lines(&self, source: &Path, out: &Path, secs: f64) -> [String; 2] {
        [
            format!(
                "{} Parquet files in {}: {} sessions, {} bars, in {secs:.2}s",
                self.written,
                out.display(),
                self.sessions,
                self.rows
            ),
            format!(
                "a scale test, never evidence: {} real sessions of {}, each drawn {:.1} times on average",
                self.source_sessions,
                source.display(),
                self.sessions as f64 / self.source_sessions.max(1) as f64
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_source() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/lean")
    }

    /// A small fixture from the bundled data: the sizes asked, weekdays
    /// only, prices chained at the close, real returns, the same files
    /// for the same seed, and loadable as any dataset.
    #[test]
    fn a_scale_fixture_chains_real_sessions_and_loads_as_a_dataset() {
        let cfg = DataConfig::default();
        let dir = tempfile::tempdir().unwrap();
        let scale = ScaleConfig {
            symbols: 3,
            sessions: 7,
            first_date: NaiveDate::from_ymd_opt(2019, 1, 4).unwrap(), // a Friday
            seed: 5,
        };
        let report = scale_fixture(&fixture_source(), dir.path(), &cfg, &scale, &|_| {}).unwrap();
        assert_eq!((report.written, report.sessions), (3, 21));
        assert!(report.note.contains("never evidence"));

        let ds = crate::load(dir.path(), &cfg).unwrap();
        assert_eq!(ds.sessions.len(), 21);
        let first = &ds.sessions[..7];
        assert!(first.iter().all(|s| &*s.symbol == "SCALE001"));
        assert_eq!(first[0].date, scale.first_date);
        assert_eq!(first[1].date, NaiveDate::from_ymd_opt(2019, 1, 7).unwrap());
        for pair in first.windows(2) {
            let (close, open) = (*pair[0].close.last().unwrap(), pair[1].open[0]);
            assert!((close - open).abs() < 1e-6 * close, "{close} then {open}");
        }
        let pool = crate::load(&fixture_source(), &cfg).unwrap().sessions;
        let returns = |s: &Session| (s.close.last().unwrap() / s.open[0] * 1e6).round();
        assert!(first
            .iter()
            .all(|s| pool.iter().any(|p| returns(p) == returns(s))));

        let again = tempfile::tempdir().unwrap();
        scale_fixture(&fixture_source(), again.path(), &cfg, &scale, &|_| {}).unwrap();
        let bytes = |d: &Path| std::fs::read(d.join("SCALE002.parquet")).unwrap();
        assert_eq!(bytes(dir.path()), bytes(again.path()));
    }

    #[test]
    fn sizes_out_of_range_are_refused_by_name() {
        let mut scale = ScaleConfig {
            symbols: 0,
            sessions: 252,
            first_date: NaiveDate::from_ymd_opt(2019, 1, 2).unwrap(),
            seed: 0,
        };
        assert!(scale.validate().unwrap_err().contains("symbols"));
        scale.symbols = 500;
        scale.sessions = 0;
        assert!(scale.validate().unwrap_err().contains("sessions"));
    }
}
