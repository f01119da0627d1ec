//! Loading a dataset a symbol at a time, for the work that must not hold
//! all of it: the bounded-memory catalog ([`crate::Catalog::scan`]) and
//! the Parquet conversion (`serl data convert`, `convert.rs`).
//!
//! The files are grouped by the symbol they stand for; each group is
//! loaded and cleaned like [`crate::scan`] does, handed to the caller's
//! function, and dropped. Memory is then one symbol's bars, whatever the
//! dataset's size.
//!
//! The groups are loaded a few per core at a time, on plain threads
//! (`threads.rs` says why not rayon's pool), and handed to the caller in
//! symbol order.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use std::sync::Arc;

use chrono::NaiveDate;

use crate::bars::{FileReport, Session};
use crate::config::{DataConfig, ErrorPolicy};
use crate::load::{cross_file_duplicates, discover, load_all, Source};
use crate::{DataError, Problem, Severity};

/// Symbols loaded at a time per core. A DBN file of many instruments is
/// decoded once per such batch of its symbols, not once per symbol, while
/// memory stays a few symbols' bars per core.
const SYMBOLS_PER_CORE: usize = 8;

/// The bars a pass may hold to read a DBN file's symbols in one decoding
/// (a year of minute bars of a 500-symbol index is some 3 GB as rows).
const DBN_PASS_BYTES: u64 = 512 << 20;

/// `groups` in runs of `base` symbols; a run that reaches a DBN file of
/// many symbols grows over the file's next symbols while their bars fit
/// [`DBN_PASS_BYTES`], so the file is decoded once per run rather than
/// once per `base` symbols.
fn chunks<'a, 'g>(
    groups: &'g [(&'a Arc<str>, &'a Vec<&'a Source>)],
    sources: &[Source],
    base: usize,
) -> Vec<&'g [(&'a Arc<str>, &'a Vec<&'a Source>)]> {
    let dbn_of = |g: &(&Arc<str>, &Vec<&Source>)| match g.1.as_slice() {
        [Source::Dbn { path, .. }] => Some(path.clone()),
        _ => None,
    };
    // Symbols per run each DBN file's bars allow.
    let allowed = |path: &Path| {
        let symbols = sources.iter().filter(|s| s.path() == path).count().max(1) as u64;
        let per_symbol = (crate::dbn_bars::bar_bytes_estimate(path) / symbols).max(1);
        (DBN_PASS_BYTES / per_symbol).max(base as u64) as usize
    };
    let mut out = Vec::new();
    let mut start = 0;
    while start < groups.len() {
        let mut end = (start + base).min(groups.len());
        if let Some(file) = groups[start..end].iter().rev().find_map(dbn_of) {
            let cap = start + allowed(&file);
            while end < groups.len().min(cap) && dbn_of(&groups[end]).as_ref() == Some(&file) {
                end += 1;
            }
        }
        out.push(&groups[start..end]);
        start = end;
    }
    out
}

/// What a pass by symbol leaves: the caller's result per symbol (in
/// symbol order), every file's report and every problem.
pub(crate) struct Scanned<T> {
    pub(crate) parts: Vec<T>,
    pub(crate) files: Vec<FileReport>,
    pub(crate) problems: Vec<Problem>,
}

/// Loads the files under `path` a symbol at a time and calls `f` with each
/// group's sessions (sorted by symbol and date; a symbol-day found in two
/// files, of one group or of two, kept once, as [`crate::scan`] keeps it);
/// `progress` gets the files done. Under [`ErrorPolicy::Fail`] the first
/// group with an error stops the pass before `f` sees it, as the error
/// fails a load; so does the first error `f` returns.
pub(crate) fn by_symbol<T>(
    path: &Path,
    cfg: &DataConfig,
    progress: &dyn Fn(u64),
    mut f: impl FnMut(&Arc<str>, Vec<Session>) -> Result<T, DataError>,
) -> Result<Scanned<T>, DataError> {
    let mut out = Scanned {
        parts: Vec::new(),
        files: Vec::new(),
        problems: Vec::new(),
    };
    let sources = discover(path, &mut out.problems)?;
    let mut groups: BTreeMap<Arc<str>, Vec<&Source>> = BTreeMap::new();
    for s in &sources {
        groups.entry(s.symbol().clone()).or_default().push(s);
    }
    // A file with a symbol column may hold any symbol: the days already
    // seen are remembered across groups (a few bytes a session).
    let mut seen: HashSet<(Arc<str>, NaiveDate)> = HashSet::new();
    let mut duplicates = 0u64;
    let groups: Vec<(&Arc<str>, &Vec<&Source>)> = groups.iter().collect();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    for chunk in chunks(&groups, &sources, threads.max(1) * SYMBOLS_PER_CORE) {
        let members: Vec<&Source> = chunk.iter().flat_map(|(_, g)| g.iter().copied()).collect();
        let mut loaded = load_all(&members, cfg).into_iter();
        for (symbol, group) in chunk {
            let mut sessions = Vec::new();
            for o in loaded.by_ref().take(group.len()) {
                sessions.extend(o.sessions);
                out.files.push(o.report);
                out.problems.extend(o.problems);
            }
            if cfg.policy.on_error == ErrorPolicy::Fail {
                if let Some(p) = out.problems.iter().find(|p| p.severity == Severity::Error) {
                    return Err(DataError::FileFailed {
                        problem: Box::new(p.clone()),
                    });
                }
            }
            sessions.sort_by(|a, b| (&a.symbol, a.date).cmp(&(&b.symbol, b.date)));
            let before = sessions.len();
            sessions.retain(|s| seen.insert((s.symbol.clone(), s.date)));
            duplicates += (before - sessions.len()) as u64;
            progress(group.len() as u64);
            out.parts.push(f(symbol, sessions)?);
        }
    }
    if duplicates > 0 {
        out.problems.push(cross_file_duplicates(path, duplicates));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DBN file of 40 symbols beside a CSV: runs of 4 symbols, but the
    /// file's symbols in one run (its bars fit the budget), and the CSV's
    /// symbol after them in a run of its own.
    #[test]
    fn a_dbn_files_symbols_are_read_in_one_run() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("all.ohlcv-1m.dbn");
        std::fs::write(&file, vec![0u8; 56 * 1_000]).unwrap();
        let mut sources: Vec<Source> = (0..40)
            .map(|k| Source::Dbn {
                path: file.clone(),
                symbol: Arc::from(format!("S{k:02}")),
            })
            .collect();
        sources.push(Source::Csv {
            path: dir.path().join("ZZZ.csv"),
            symbol: Arc::from("ZZZ"),
        });
        let mut groups: BTreeMap<Arc<str>, Vec<&Source>> = BTreeMap::new();
        for s in &sources {
            groups.entry(s.symbol().clone()).or_default().push(s);
        }
        let groups: Vec<(&Arc<str>, &Vec<&Source>)> = groups.iter().collect();
        let runs: Vec<usize> = chunks(&groups, &sources, 4)
            .iter()
            .map(|c| c.len())
            .collect();
        assert_eq!(runs, [40, 1]);
    }
}
