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

use crate::bars::Session;
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
    let copied = copy_by_symbol(src, dst, cfg, progress, |sessions| {
        sessions.iter().filter(|s| s.quotes.is_some()).count()
    })?;
    Ok(ConvertReport {
        files: copied.files,
        written: copied.written,
        sessions: copied.sessions,
        rows: copied.rows,
        sessions_with_quotes: copied.parts.iter().sum(),
        problems: copied.problems,
    })
}

/// What [`copy_by_symbol`] wrote, and what `each` said of each symbol.
pub(crate) struct Copied<T> {
    pub(crate) files: usize,
    pub(crate) written: usize,
    pub(crate) sessions: usize,
    pub(crate) rows: u64,
    pub(crate) parts: Vec<T>,
    pub(crate) problems: Vec<Problem>,
}

/// Copies every bar file under `src` into `dst/SYMBOL.parquet` a symbol
/// at a time, as a load keeps the bars (gaps stay gaps), after `each` has
/// seen (and may have changed) the symbol's sessions: what `convert` and
/// `plant` share.
pub(crate) fn copy_by_symbol<T>(
    src: &Path,
    dst: &Path,
    cfg: &DataConfig,
    progress: &(dyn Fn(u64) + Sync),
    mut each: impl FnMut(&mut [Session]) -> T,
) -> Result<Copied<T>, DataError> {
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
    let scanned = by_symbol(src, &cfg, progress, |symbol, mut sessions| {
        let part = each(&mut sessions);
        if sessions.is_empty() {
            return Ok((0, 0, part));
        }
        let out = dst.join(format!("{symbol}.parquet"));
        let rows = write_sessions(&out, &sessions, &cfg.columns)
            .map_err(|source| DataError::Io { path: out, source })?;
        Ok((sessions.len(), rows, part))
    })?;
    // A DBN file reports once per symbol it holds; it is one file read.
    let read: std::collections::HashSet<&Path> =
        scanned.files.iter().map(|f| f.path.as_path()).collect();
    let mut copied = Copied {
        files: read.len(),
        written: 0,
        sessions: 0,
        rows: 0,
        parts: Vec::new(),
        problems: scanned.problems,
    };
    for (sessions, rows, part) in scanned.parts {
        copied.written += usize::from(sessions > 0);
        copied.sessions += sessions;
        copied.rows += rows;
        copied.parts.push(part);
    }
    Ok(copied)
}

/// The summary of a copy written to `out` from `source` in `secs`: files
/// read and written, sessions and bars, then what a reader should know
/// (quote bars left out, problems met).
pub(crate) fn copy_lines(
    (files, written): (usize, usize),
    (sessions, rows): (usize, u64),
    problems: &[Problem],
    (source, out, secs): (&Path, &Path, f64),
) -> (String, Option<String>) {
    let first = format!(
        "{files} files → {written} Parquet files in {}: {sessions} sessions, {rows} bars, in {secs:.2}s",
        out.display()
    );
    let errors = problems
        .iter()
        .filter(|p| p.severity == crate::Severity::Error)
        .count();
    let problems = (!problems.is_empty()).then(|| {
        format!(
            "{} problems while reading ({errors} errors; their rows or files were left out): see `serl data validate {}`",
            problems.len(),
            source.display()
        )
    });
    (first, problems)
}

impl ConvertReport {
    /// What `serl data convert` says of the copy of `source` it wrote to
    /// `out` in `secs`.
    pub fn lines(&self, source: &Path, out: &Path, secs: f64) -> Vec<String> {
        let (first, problems) = copy_lines(
            (self.files, self.written),
            (self.sessions, self.rows),
            &self.problems,
            (source, out, secs),
        );
        let quotes = (self.sessions_with_quotes > 0).then(|| {
            format!(
                "note: {} sessions had LEAN quote bars; the copy holds the trade bars only",
                self.sessions_with_quotes
            )
        });
        std::iter::once(first)
            .chain(quotes)
            .chain(problems)
            .collect()
    }
}
