//! Loading a dataset a symbol at a time, for the work that must not hold
//! all of it: the bounded-memory catalog ([`crate::Catalog::scan`]) and
//! the Parquet conversion ([`crate::convert`]).
//!
//! The files are grouped by the symbol they stand for; each group is
//! loaded and cleaned like [`crate::scan`] does, handed to the caller's
//! function, and dropped. Memory is then one symbol's bars, whatever the
//! dataset's size.
//!
//! The groups go one after another, on purpose: run as a rayon parallel
//! iterator, the freed bars of each group stayed with the allocator and the
//! peak grew with the dataset (292 MiB for the 3.2 M bars of the shared
//! minute data, against 25 MiB one group at a time, for a third more
//! time); polars still reads each file with its own threads.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::bars::{FileReport, Session};
use crate::config::DataConfig;
use crate::load::{discover, load_source, Source};
use crate::{DataError, Problem, ProblemKind, Severity};

/// What a pass by symbol leaves: the caller's result per symbol (in
/// symbol order), every file's report and every problem.
pub(crate) struct Scanned<T> {
    pub(crate) parts: Vec<T>,
    pub(crate) files: Vec<FileReport>,
    pub(crate) problems: Vec<Problem>,
}

type Part<T> = Result<(T, Vec<FileReport>, Vec<Problem>, usize), DataError>;

/// Loads the files under `path` a symbol at a time and calls `f` with each
/// symbol's sessions (sorted by date, a symbol-day found in two files kept
/// once, as [`crate::scan`] keeps it); `progress` gets the files done.
pub(crate) fn by_symbol<T>(
    path: &Path,
    cfg: &DataConfig,
    progress: &dyn Fn(u64),
    mut f: impl FnMut(&Arc<str>, Vec<Session>) -> Result<T, DataError>,
) -> Result<Scanned<T>, DataError> {
    let mut problems = Vec::new();
    let sources = discover(path, &mut problems)?;
    let mut groups: BTreeMap<Arc<str>, Vec<&Source>> = BTreeMap::new();
    for s in &sources {
        groups.entry(s.symbol().clone()).or_default().push(s);
    }
    let parts: Vec<Part<T>> = groups
        .iter()
        .map(|(symbol, group)| {
            let (mut sessions, mut files, mut problems) = (Vec::new(), Vec::new(), Vec::new());
            for s in group {
                let o = load_source(s, cfg);
                sessions.extend(o.sessions);
                files.push(o.report);
                problems.extend(o.problems);
            }
            sessions.sort_by(|a, b| (&a.symbol, a.date).cmp(&(&b.symbol, b.date)));
            let before = sessions.len();
            sessions.dedup_by(|b, a| a.symbol == b.symbol && a.date == b.date);
            let duplicates = before - sessions.len();
            progress(group.len() as u64);
            Ok((f(symbol, sessions)?, files, problems, duplicates))
        })
        .collect();
    let mut out = Scanned {
        parts: Vec::with_capacity(parts.len()),
        files: Vec::with_capacity(sources.len()),
        problems,
    };
    let mut duplicates = 0;
    for part in parts {
        let (t, files, problems, dups) = part?;
        out.parts.push(t);
        out.files.extend(files);
        out.problems.extend(problems);
        duplicates += dups;
    }
    if duplicates > 0 {
        out.problems.push(Problem {
            file: path.to_path_buf(),
            line: None,
            field: None,
            kind: ProblemKind::DuplicateRows,
            severity: Severity::Warning,
            count: duplicates as u64,
            message: "symbol-sessions found in more than one file; the first was kept".into(),
        });
    }
    Ok(out)
}
