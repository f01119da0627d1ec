//! `serl data convert`: a cleaned Parquet copy of a dataset, one file per
//! symbol, written in bounded memory.
//!
//! The source files are grouped by the symbol they stand for and each
//! group is loaded, cleaned and written on its own, so the memory a
//! conversion needs is one symbol's bars, never the dataset's. The copy holds what a load keeps (the regular session,
//! valid and deduplicated bars, no filled minutes) under the config's
//! column names; loading it with the same config gives the same sessions.
//! LEAN quote bars are not carried over (the report counts the sessions
//! that had them).

use std::path::Path;

use serde::Serialize;

use crate::config::{DataConfig, MissingMinutes};
use crate::parquet::write_sessions;
use crate::stream::by_symbol;
use crate::{DataError, Problem};

/// What a conversion wrote.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConvertReport {
    /// Source files read.
    pub files: usize,
    /// Parquet files written, one per symbol.
    pub written: usize,
    /// Symbol-sessions written.
    pub sessions: usize,
    /// Bars written.
    pub rows: u64,
    /// Sessions whose LEAN quote bars were left out.
    pub sessions_with_quotes: usize,
    /// Every problem met while reading.
    #[serde(skip)]
    pub problems: Vec<Problem>,
}

/// Converts every bar file under `src` into `dst/SYMBOL.parquet`, calling
/// `progress` with the number of source files done after each symbol.
/// Under [`crate::ErrorPolicy::Fail`] a file with an error stops it before its
/// symbol is written (the symbols already written stay).
pub fn convert(
    src: &Path,
    dst: &Path,
    cfg: &DataConfig,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ConvertReport, DataError> {
    if !src.exists() {
        return Err(DataError::NotFound {
            path: src.to_path_buf(),
        });
    }
    std::fs::create_dir_all(dst).map_err(|source| DataError::Io {
        path: dst.to_path_buf(),
        source,
    })?;
    // A copy holds what the source had: gaps stay gaps.
    let mut cfg = cfg.clone();
    cfg.session.missing_minutes = MissingMinutes::Leave;
    let scanned = by_symbol(src, &cfg, progress, |symbol, sessions| {
        let quotes = sessions.iter().filter(|s| s.quotes.is_some()).count();
        if sessions.is_empty() {
            return Ok((0, 0, quotes));
        }
        let out = dst.join(format!("{symbol}.parquet"));
        let rows = write_sessions(&out, &sessions, &cfg.columns)
            .map_err(|source| DataError::Io { path: out, source })?;
        Ok((sessions.len(), rows, quotes))
    })?;
    let mut report = ConvertReport {
        files: scanned.files.len(),
        problems: scanned.problems,
        ..ConvertReport::default()
    };
    for (sessions, rows, quotes) in scanned.parts {
        report.written += usize::from(sessions > 0);
        report.sessions += sessions;
        report.rows += rows;
        report.sessions_with_quotes += quotes;
    }
    Ok(report)
}
