//! A summary of a loaded dataset: what `serl data inspect` prints.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::Serialize;

use crate::bars::{Dataset, FileReport, Session};
use crate::config::DataConfig;
use crate::split::Splits;
use crate::{DataError, Problem, ProblemKind, Severity};

/// One symbol's coverage in a [`Catalog`].
#[derive(Debug, Clone, Serialize)]
pub struct SymbolSummary {
    /// The ticker.
    pub symbol: String,
    /// Sessions (trading days) loaded for it.
    pub sessions: usize,
    /// Bars over all its sessions, filled bars included.
    pub rows: u64,
    /// Date of its first session.
    pub first_date: NaiveDate,
    /// Date of its last session.
    pub last_date: NaiveDate,
    /// Its sessions with at least one regular-session minute absent from
    /// the source.
    pub sessions_with_missing_minutes: usize,
    /// Minutes absent from the source, summed over its sessions.
    pub missing_minutes: u64,
    /// Whether any of its sessions carries quote bars.
    pub has_quotes: bool,
}

/// One session that lacked bars for some regular-session minutes.
#[derive(Debug, Clone, Serialize)]
pub struct MissingMinutesSession {
    /// The ticker.
    pub symbol: String,
    /// The session's date.
    pub date: NaiveDate,
    /// Minutes absent from the source.
    pub missing: u32,
    /// Of those, how many [`crate::MissingMinutes::Fill`] filled.
    pub filled: u32,
}

/// How often one kind of problem occurred, at one severity.
#[derive(Debug, Clone, Serialize)]
pub struct ProblemCount {
    /// What kind of defect.
    pub kind: ProblemKind,
    /// At which severity.
    pub severity: Severity,
    /// Distinct reports (e.g. files or cells).
    pub reports: usize,
    /// Rows affected.
    pub rows: u64,
}

/// A summary of a [`Dataset`]: coverage, gaps, problems and splits, as
/// `serl data inspect` prints it (serialisable to JSON).
#[derive(Debug, Clone, Serialize)]
pub struct Catalog {
    /// The path the dataset was loaded from, as displayed.
    pub path: String,
    /// Source files found (LEAN: trade zips).
    pub files: usize,
    /// Files left out whole: unreadable, corrupt, empty or without the
    /// mapped columns.
    pub files_skipped: usize,
    /// Distinct symbols.
    pub symbols: usize,
    /// Sessions over all symbols, one per (symbol, date).
    pub symbol_sessions: usize,
    /// Distinct trading dates over all symbols.
    pub dates: usize,
    /// Earliest date, `None` for an empty dataset.
    pub first_date: Option<NaiveDate>,
    /// Latest date, `None` for an empty dataset.
    pub last_date: Option<NaiveDate>,
    /// Bars over all sessions, filled bars included.
    pub rows: u64,
    /// Bars dropped for lying outside the regular session.
    pub bars_outside_session: u64,
    /// Symbols with fewer sessions than the dataset has dates.
    pub short_histories: Vec<SymbolSummary>,
    /// Sessions with at least one minute absent from the source.
    pub sessions_with_missing_minutes: usize,
    /// Minutes absent from the source, over all sessions.
    pub missing_minutes: u64,
    /// Of those, how many were filled with flat zero-volume bars.
    pub filled_minutes: u64,
    /// Every session with missing minutes, in (symbol, date) order.
    pub missing_minute_sessions: Vec<MissingMinutesSession>,
    /// Problems counted by (kind, severity), in that order.
    pub problems: Vec<ProblemCount>,
    /// The train / validation / test dates under the config's split rules.
    pub splits: Splits,
    /// One summary per symbol, in symbol order.
    pub per_symbol: Vec<SymbolSummary>,
}

/// What a catalog needs of one session: no bars.
#[derive(Debug, Clone)]
pub(crate) struct SessionInfo {
    pub(crate) symbol: std::sync::Arc<str>,
    pub(crate) date: NaiveDate,
    pub(crate) rows: u64,
    pub(crate) missing: u32,
    pub(crate) filled: u32,
    pub(crate) quotes: bool,
}

impl SessionInfo {
    pub(crate) fn of(s: &Session) -> Self {
        SessionInfo {
            symbol: s.symbol.clone(),
            date: s.date,
            rows: s.len() as u64,
            missing: s.missing_minutes,
            filled: s.filled_minutes,
            quotes: s.quotes.is_some(),
        }
    }
}

impl Catalog {
    /// Summarises `ds`, loaded from `path`; `cfg` supplies the split rules.
    pub fn new(path: &std::path::Path, ds: &Dataset, cfg: &DataConfig) -> Self {
        let infos: Vec<SessionInfo> = ds.sessions.iter().map(SessionInfo::of).collect();
        Self::from_parts(path, &infos, &ds.files, &ds.problems, cfg)
    }

    /// The catalog of the dataset under `path` in bounded memory: the
    /// files are loaded a symbol at a time and only each session's counts
    /// are kept, so a dataset larger than memory can be
    /// cataloged. The same catalog as [`Catalog::new`] after
    /// [`crate::load`], and the same errors under the config's policy.
    pub fn scan(path: &std::path::Path, cfg: &DataConfig) -> Result<Self, DataError> {
        let scanned = crate::stream::by_symbol(path, cfg, &|_| {}, |_, sessions| {
            Ok(sessions.iter().map(SessionInfo::of).collect::<Vec<_>>())
        })?;
        let mut infos: Vec<SessionInfo> = scanned.parts.into_iter().flatten().collect();
        infos.sort_by(|a, b| (&a.symbol, a.date).cmp(&(&b.symbol, b.date)));
        crate::load::check_policy(path, cfg, &scanned.problems, infos.is_empty())?;
        Ok(Self::from_parts(
            path,
            &infos,
            &scanned.files,
            &scanned.problems,
            cfg,
        ))
    }

    fn from_parts(
        path: &std::path::Path,
        sessions: &[SessionInfo],
        files: &[FileReport],
        problems: &[Problem],
        cfg: &DataConfig,
    ) -> Self {
        let mut dates: Vec<NaiveDate> = sessions.iter().map(|s| s.date).collect();
        dates.sort_unstable();
        dates.dedup();
        let mut per_symbol = Vec::new();
        for ss in sessions.chunk_by(|a, b| a.symbol == b.symbol) {
            per_symbol.push(SymbolSummary {
                symbol: ss[0].symbol.to_string(),
                sessions: ss.len(),
                rows: ss.iter().map(|s| s.rows).sum(),
                first_date: ss[0].date,
                last_date: ss[ss.len() - 1].date,
                sessions_with_missing_minutes: ss.iter().filter(|s| s.missing > 0).count(),
                missing_minutes: ss.iter().map(|s| s.missing as u64).sum(),
                has_quotes: ss.iter().any(|s| s.quotes),
            });
        }
        let short_histories = per_symbol
            .iter()
            .filter(|s| s.sessions < dates.len())
            .cloned()
            .collect();
        let missing_minute_sessions: Vec<_> = sessions
            .iter()
            .filter(|s| s.missing > 0)
            .map(|s| MissingMinutesSession {
                symbol: s.symbol.to_string(),
                date: s.date,
                missing: s.missing,
                filled: s.filled,
            })
            .collect();
        let mut counts: BTreeMap<(ProblemKind, Severity), (usize, u64)> = BTreeMap::new();
        for p in problems {
            let e = counts.entry((p.kind, p.severity)).or_default();
            e.0 += 1;
            e.1 += p.count;
        }
        Catalog {
            path: path.display().to_string(),
            files: files.len(),
            files_skipped: files.iter().filter(|f| f.skipped).count(),
            symbols: per_symbol.len(),
            symbol_sessions: sessions.len(),
            dates: dates.len(),
            first_date: dates.first().copied(),
            last_date: dates.last().copied(),
            rows: sessions.iter().map(|s| s.rows).sum(),
            bars_outside_session: files.iter().map(|f| f.outside_session).sum(),
            short_histories,
            sessions_with_missing_minutes: missing_minute_sessions.len(),
            missing_minutes: sessions.iter().map(|s| s.missing as u64).sum(),
            filled_minutes: sessions.iter().map(|s| s.filled as u64).sum(),
            missing_minute_sessions,
            problems: counts
                .into_iter()
                .map(|((kind, severity), (reports, rows))| ProblemCount {
                    kind,
                    severity,
                    reports,
                    rows,
                })
                .collect(),
            splits: Splits::new(&dates, &cfg.splits),
            per_symbol,
        }
    }
}
