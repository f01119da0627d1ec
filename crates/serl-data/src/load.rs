//! Finding the files under a path and loading them in parallel.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::NaiveDate;

use crate::bars::{Dataset, FileReport, Session};
use crate::config::{DataConfig, ErrorPolicy};
use crate::raw::{align_quotes, clean, Hours, QuoteRow, RawBars};
use crate::time::parse_date;
use crate::{csv, lean, DataError, Problem, ProblemKind, Severity};

/// One unit of loading work.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    Csv {
        path: PathBuf,
        symbol: Arc<str>,
    },
    Parquet {
        path: PathBuf,
        symbol: Arc<str>,
    },
    Lean {
        trade: PathBuf,
        quote: Option<PathBuf>,
        symbol: Arc<str>,
        date: NaiveDate,
    },
    /// One instrument of a DBN file of bars (`dbn_bars.rs`).
    Dbn {
        path: PathBuf,
        symbol: Arc<str>,
    },
}

impl Source {
    pub(crate) fn path(&self) -> &Path {
        match self {
            Source::Csv { path, .. } | Source::Parquet { path, .. } | Source::Dbn { path, .. } => {
                path
            }
            Source::Lean { trade, .. } => trade,
        }
    }

    /// The symbol the file stands for (its name or folder).
    pub(crate) fn symbol(&self) -> &Arc<str> {
        match self {
            Source::Csv { symbol, .. }
            | Source::Parquet { symbol, .. }
            | Source::Dbn { symbol, .. }
            | Source::Lean { symbol, .. } => symbol,
        }
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The symbol a CSV or Parquet file stands for: its name (`AAPL.csv.gz`), or, for one
/// file per day (`AAPL/2018-02-16.csv`), its folder.
fn csv_symbol(p: &Path) -> Arc<str> {
    let name = file_name(p);
    let stem = name
        .strip_suffix(".csv.gz")
        .or_else(|| name.strip_suffix(".csv"))
        .or_else(|| name.strip_suffix(".parquet"))
        .unwrap_or(&name);
    if parse_date(stem.as_bytes()).is_some() {
        if let Some(parent) = p.parent().and_then(|d| d.file_name()) {
            return Arc::from(parent.to_string_lossy().to_uppercase());
        }
    }
    Arc::from(stem.to_uppercase())
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), DataError> {
    let entries = std::fs::read_dir(dir).map_err(|source| DataError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for e in entries {
        let e = e.map_err(|source| DataError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let p = e.path();
        if p.is_dir() {
            walk(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

pub(crate) fn discover(path: &Path, problems: &mut Vec<Problem>) -> Result<Vec<Source>, DataError> {
    if !path.exists() {
        return Err(DataError::NotFound {
            path: path.to_path_buf(),
        });
    }
    let mut files = Vec::new();
    if path.is_dir() {
        walk(path, &mut files)?;
    } else {
        files.push(path.to_path_buf());
    }
    files.sort();
    let mut sources = Vec::new();
    let mut quotes: Vec<(PathBuf, Arc<str>, NaiveDate)> = Vec::new();
    for p in files {
        let name = file_name(&p);
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".csv") || lower.ends_with(".csv.gz") {
            sources.push(Source::Csv {
                symbol: csv_symbol(&p),
                path: p,
            });
        } else if lower.ends_with(".parquet") {
            sources.push(Source::Parquet {
                symbol: csv_symbol(&p),
                path: p,
            });
        } else if crate::dbn_bars::is_dbn(&lower) {
            match crate::dbn_bars::dbn_symbols(&p) {
                Ok(symbols) => sources.extend(symbols.into_iter().map(|symbol| Source::Dbn {
                    path: p.clone(),
                    symbol,
                })),
                Err(problem) => problems.push(problem),
            }
        } else if let Some(kind) = lower
            .strip_suffix("_trade.zip")
            .map(|d| (d, true))
            .or_else(|| lower.strip_suffix("_quote.zip").map(|d| (d, false)))
        {
            let (date_part, is_trade) = kind;
            let date = parse_date(date_part.as_bytes());
            let symbol = p
                .parent()
                .and_then(|d| d.file_name())
                .map(|s| Arc::<str>::from(s.to_string_lossy().to_uppercase()));
            let (Some(date), Some(symbol)) = (date, symbol) else {
                problems.push(Problem {
                    file: p.clone(),
                    line: None,
                    field: None,
                    kind: ProblemKind::BadValue,
                    severity: Severity::Warning,
                    count: 1,
                    message: "a LEAN file is named SYMBOL/YYYYMMDD_trade.zip; left out".into(),
                });
                continue;
            };
            if is_trade {
                sources.push(Source::Lean {
                    trade: p,
                    quote: None,
                    symbol,
                    date,
                });
            } else {
                quotes.push((p, symbol, date));
            }
        }
    }
    pair_quotes(quotes, &mut sources, problems);
    if sources.is_empty() {
        return Err(DataError::NoData {
            path: path.to_path_buf(),
        });
    }
    Ok(sources)
}

/// Gives each LEAN quote file to the trade file of its symbol and day; a
/// quote file without one is left out, said as a problem.
fn pair_quotes(
    quotes: Vec<(PathBuf, Arc<str>, NaiveDate)>,
    sources: &mut [Source],
    problems: &mut Vec<Problem>,
) {
    for (qp, qs, qd) in quotes {
        let trade = sources.iter_mut().find_map(|s| match s {
            Source::Lean {
                quote,
                symbol,
                date,
                ..
            } if *symbol == qs && *date == qd => Some(quote),
            _ => None,
        });
        match trade {
            Some(slot) => *slot = Some(qp),
            None => problems.push(Problem {
                file: qp,
                line: None,
                field: None,
                kind: ProblemKind::Unpaired,
                severity: Severity::Warning,
                count: 1,
                message: "quote bars without trade bars for the same day; left out".into(),
            }),
        }
    }
}

/// Reads a file, gunzipping `.gz`.
fn read_bytes(path: &Path) -> Result<Vec<u8>, Problem> {
    let compressed = std::fs::read(path)
        .map_err(|e| Problem::file_error(path, ProblemKind::Io, format!("cannot read: {e}")))?;
    if !file_name(path).to_ascii_lowercase().ends_with(".gz") {
        return Ok(compressed);
    }
    if compressed.is_empty() {
        return Err(Problem::file_error(
            path,
            ProblemKind::Empty,
            "empty file".into(),
        ));
    }
    let mut out = Vec::with_capacity(compressed.len() * 5);
    flate2::read::MultiGzDecoder::new(&compressed[..])
        .read_to_end(&mut out)
        .map_err(|e| {
            Problem::file_error(
                path,
                ProblemKind::Compression,
                format!("truncated or corrupt gzip ({e}) after {} bytes", out.len()),
            )
        })?;
    Ok(out)
}

pub(crate) struct Outcome {
    pub(crate) report: FileReport,
    pub(crate) sessions: Vec<Session>,
    pub(crate) problems: Vec<Problem>,
}

/// Rows read from a file, the hours that clean them, and any quotes.
type ReadRows = (RawBars, Hours, Option<Vec<QuoteRow>>);

/// Loads `sources` on the cores: an outcome per source, in their order.
/// A DBN file's instruments are loaded together, so the file is decoded
/// once however many symbols it holds; every other source alone.
pub(crate) fn load_all(sources: &[&Source], cfg: &DataConfig) -> Vec<Outcome> {
    let mut units: Vec<Vec<usize>> = Vec::new();
    for (k, s) in sources.iter().enumerate() {
        let joins = |u: &Vec<usize>| match (sources[u[0]], s) {
            (Source::Dbn { path: a, .. }, Source::Dbn { path: b, .. }) => a == b,
            _ => false,
        };
        match units.iter_mut().find(|u| joins(u)) {
            Some(unit) => unit.push(k),
            None => units.push(vec![k]),
        }
    }
    let loaded = crate::threads::on_cores(&units, |unit| {
        let members: Vec<&Source> = unit.iter().map(|&k| sources[k]).collect();
        load_unit(&members, cfg)
    });
    let mut outcomes: Vec<Option<Outcome>> = sources.iter().map(|_| None).collect();
    for (unit, done) in units.iter().zip(loaded) {
        for (&k, o) in unit.iter().zip(done) {
            outcomes[k] = Some(o);
        }
    }
    outcomes.into_iter().flatten().collect()
}

/// Loads sources together (a DBN file's instruments, in one pass): an
/// outcome per source, in their order.
fn load_unit(unit: &[&Source], cfg: &DataConfig) -> Vec<Outcome> {
    let (Some(Source::Dbn { path, .. }), 2..) = (unit.first(), unit.len()) else {
        return unit.iter().map(|s| load_source(s, cfg)).collect();
    };
    let symbols: Vec<Arc<str>> = unit.iter().map(|s| s.symbol().clone()).collect();
    let tz = cfg.session.tz().unwrap_or(chrono_tz::America::New_York);
    let mut problems = Vec::new();
    // DBN stamps a bar at its start, as LEAN does: the bar at the close is
    // after-hours.
    let hours = Hours::new(&cfg.session, false);
    match crate::dbn_bars::read_dbn_symbols(path, &symbols, tz, &mut problems) {
        // The file's warnings go with its first symbol.
        Ok(raws) => raws
            .into_iter()
            .map(|raw| outcome(path, Ok((raw, hours, None)), std::mem::take(&mut problems)))
            .collect(),
        // Every symbol's report fails; the file's defect is said once, with
        // its first symbol.
        Err(p) => (0..unit.len())
            .map(|k| {
                let mut o = outcome(path, Err(p.clone()), std::mem::take(&mut problems));
                if k > 0 {
                    o.problems.clear();
                }
                o
            })
            .collect(),
    }
}

fn load_source(src: &Source, cfg: &DataConfig) -> Outcome {
    let mut problems = Vec::new();
    let read = read_source(src, cfg, &mut problems);
    outcome(src.path(), read, problems)
}

fn read_source(
    src: &Source,
    cfg: &DataConfig,
    problems: &mut Vec<Problem>,
) -> Result<ReadRows, Problem> {
    let bar_hours = Hours::new(&cfg.session, cfg.session.include_close_bar);
    match src {
        Source::Csv { path, symbol } => read_bytes(path)
            .and_then(|b| csv::read_csv(path, &b, &cfg.columns, symbol, problems))
            .map(|raw| (raw, bar_hours, None)),
        Source::Parquet { path, symbol } => {
            crate::parquet::read_parquet(path, &cfg.columns, symbol, problems)
                .map(|raw| (raw, bar_hours, None))
        }
        Source::Dbn { path, symbol } => {
            let tz = cfg.session.tz().unwrap_or(chrono_tz::America::New_York);
            let symbols = std::slice::from_ref(symbol);
            crate::dbn_bars::read_dbn_symbols(path, symbols, tz, problems)
                // DBN stamps a bar at its start, as LEAN does.
                .map(|mut raws| (raws.remove(0), Hours::new(&cfg.session, false), None))
        }
        Source::Lean {
            trade,
            quote,
            symbol,
            date,
        } => lean::read_trade(trade, symbol, *date, problems).map(|raw| {
            // LEAN bars are stamped at their start: the bar at the close is
            // after-hours.
            let hours = Hours::new(&cfg.session, false);
            let q = quote
                .as_ref()
                .and_then(|q| match lean::read_quote(q, problems) {
                    Ok(rows) => Some(rows),
                    Err(p) => {
                        problems.push(Problem {
                            severity: Severity::Warning,
                            message: format!("{}; trade bars are used without quotes", p.message),
                            ..p
                        });
                        None
                    }
                });
            (raw, hours, q)
        }),
    }
}

/// A file's read rows cleaned into sessions, with its report.
fn outcome(path: &Path, read: Result<ReadRows, Problem>, mut problems: Vec<Problem>) -> Outcome {
    let mut report = FileReport {
        path: path.to_path_buf(),
        rows: 0,
        sessions: 0,
        outside_session: 0,
        skipped: false,
        failed: false,
    };
    let sessions = match read {
        Ok((raw, hours, quotes)) => {
            let cleaned = clean(path, raw, hours, &mut problems);
            let mut sessions = cleaned.sessions;
            if let Some(q) = quotes {
                for s in &mut sessions {
                    s.quotes = Some(align_quotes(s, &q));
                }
            }
            report.rows = cleaned.rows;
            report.outside_session = cleaned.outside_session;
            report.sessions = sessions.len() as u32;
            sessions
        }
        Err(p) => {
            problems.push(p);
            report.skipped = true;
            Vec::new()
        }
    };
    report.failed = problems.iter().any(|p| p.severity == Severity::Error);
    Outcome {
        report,
        sessions,
        problems,
    }
}

/// Reads every bar file under `path` (a file or a folder, searched
/// recursively), in parallel, and collects every problem without applying
/// the error policy: files that cannot be read are left out and bad rows are
/// dropped. This is what `serl data validate` reports on.
pub fn scan(path: &Path, cfg: &DataConfig) -> Result<Dataset, DataError> {
    let mut problems = Vec::new();
    let sources = discover(path, &mut problems)?;
    // On plain threads, not rayon's pool: `threads.rs` says why.
    let outcomes = load_all(&sources.iter().collect::<Vec<_>>(), cfg);
    let mut ds = Dataset::default();
    for o in outcomes {
        ds.sessions.extend(o.sessions);
        ds.problems.extend(o.problems);
        ds.files.push(o.report);
    }
    ds.problems.extend(problems);
    ds.sessions
        .sort_by(|a, b| (&a.symbol, a.date).cmp(&(&b.symbol, b.date)));
    // The same symbol-day from two files (e.g. a daily file beside a full
    // history) keeps the first.
    let before = ds.sessions.len();
    ds.sessions
        .dedup_by(|b, a| a.symbol == b.symbol && a.date == b.date);
    if ds.sessions.len() < before {
        let n = (before - ds.sessions.len()) as u64;
        ds.problems.push(cross_file_duplicates(path, n));
    }
    Ok(ds)
}

/// Loads every bar file under `path` into one [`Dataset`], applying the
/// error policy.
///
/// Under [`ErrorPolicy::Fail`] the first file with an error-severity problem
/// fails the load; under [`ErrorPolicy::Skip`] a file that cannot be read is
/// left out and bad rows are dropped, each with a problem recorded. A load
/// that ends with no session at all is an error either way.
pub fn load(path: &Path, cfg: &DataConfig) -> Result<Dataset, DataError> {
    let ds = scan(path, cfg)?;
    check_policy(path, cfg, &ds.problems, ds.sessions.is_empty())?;
    Ok(ds)
}

/// The warning for `count` symbol-sessions found in more than one file
/// under `path`, of which the first was kept.
pub(crate) fn cross_file_duplicates(path: &Path, count: u64) -> Problem {
    Problem {
        file: path.to_path_buf(),
        line: None,
        field: None,
        kind: ProblemKind::DuplicateRows,
        severity: Severity::Warning,
        count,
        message: "symbol-sessions found in more than one file; the first was kept".into(),
    }
}

/// The error policy over a load's problems: under [`ErrorPolicy::Fail`]
/// the first error fails it; either way a load without a session does.
pub(crate) fn check_policy(
    path: &Path,
    cfg: &DataConfig,
    problems: &[Problem],
    no_session: bool,
) -> Result<(), DataError> {
    let first_error = || problems.iter().find(|p| p.severity == Severity::Error);
    if cfg.policy.on_error == ErrorPolicy::Fail {
        if let Some(p) = first_error() {
            return Err(DataError::FileFailed {
                problem: Box::new(p.clone()),
            });
        }
    }
    if no_session {
        return Err(match first_error() {
            Some(p) => DataError::FileFailed {
                problem: Box::new(p.clone()),
            },
            None => DataError::NoData {
                path: path.to_path_buf(),
            },
        });
    }
    Ok(())
}
