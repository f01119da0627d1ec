//! A summary of a loaded dataset: what `serl data inspect` prints.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::Serialize;

use crate::bars::Dataset;
use crate::config::DataConfig;
use crate::split::Splits;
use crate::{ProblemKind, Severity};

#[derive(Debug, Clone, Serialize)]
pub struct SymbolSummary {
    pub symbol: String,
    pub sessions: usize,
    pub rows: u64,
    pub first_date: NaiveDate,
    pub last_date: NaiveDate,
    pub sessions_with_missing_minutes: usize,
    pub missing_minutes: u64,
    pub has_quotes: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct MissingMinutesSession {
    pub symbol: String,
    pub date: NaiveDate,
    pub missing: u32,
    pub filled: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProblemCount {
    pub kind: ProblemKind,
    pub severity: Severity,
    /// Distinct reports (e.g. files or cells).
    pub reports: usize,
    /// Rows affected.
    pub rows: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Catalog {
    pub path: String,
    pub files: usize,
    pub files_skipped: usize,
    pub symbols: usize,
    pub symbol_sessions: usize,
    pub dates: usize,
    pub first_date: Option<NaiveDate>,
    pub last_date: Option<NaiveDate>,
    pub rows: u64,
    pub bars_outside_session: u64,
    /// Symbols with fewer sessions than the dataset has dates.
    pub short_histories: Vec<SymbolSummary>,
    pub sessions_with_missing_minutes: usize,
    pub missing_minutes: u64,
    pub filled_minutes: u64,
    pub missing_minute_sessions: Vec<MissingMinutesSession>,
    pub problems: Vec<ProblemCount>,
    pub splits: Splits,
    pub per_symbol: Vec<SymbolSummary>,
}

impl Catalog {
    pub fn new(path: &std::path::Path, ds: &Dataset, cfg: &DataConfig) -> Self {
        let dates = ds.dates();
        let mut per_symbol = Vec::new();
        for sym in ds.symbols() {
            let ss = ds.symbol_sessions(&sym);
            per_symbol.push(SymbolSummary {
                symbol: sym.to_string(),
                sessions: ss.len(),
                rows: ss.iter().map(|s| s.len() as u64).sum(),
                first_date: ss[0].date,
                last_date: ss[ss.len() - 1].date,
                sessions_with_missing_minutes: ss.iter().filter(|s| s.missing_minutes > 0).count(),
                missing_minutes: ss.iter().map(|s| s.missing_minutes as u64).sum(),
                has_quotes: ss.iter().any(|s| s.quotes.is_some()),
            });
        }
        let short_histories = per_symbol
            .iter()
            .filter(|s| s.sessions < dates.len())
            .cloned()
            .collect();
        let missing_minute_sessions: Vec<_> = ds
            .sessions
            .iter()
            .filter(|s| s.missing_minutes > 0)
            .map(|s| MissingMinutesSession {
                symbol: s.symbol.to_string(),
                date: s.date,
                missing: s.missing_minutes,
                filled: s.filled_minutes,
            })
            .collect();
        let mut counts: BTreeMap<(ProblemKind, Severity), (usize, u64)> = BTreeMap::new();
        for p in &ds.problems {
            let e = counts.entry((p.kind, p.severity)).or_default();
            e.0 += 1;
            e.1 += p.count;
        }
        Catalog {
            path: path.display().to_string(),
            files: ds.files.len(),
            files_skipped: ds.files.iter().filter(|f| f.skipped).count(),
            symbols: per_symbol.len(),
            symbol_sessions: ds.sessions.len(),
            dates: dates.len(),
            first_date: dates.first().copied(),
            last_date: dates.last().copied(),
            rows: ds.rows(),
            bars_outside_session: ds.files.iter().map(|f| f.outside_session).sum(),
            short_histories,
            sessions_with_missing_minutes: missing_minute_sessions.len(),
            missing_minutes: ds.sessions.iter().map(|s| s.missing_minutes as u64).sum(),
            filled_minutes: ds.sessions.iter().map(|s| s.filled_minutes as u64).sum(),
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
