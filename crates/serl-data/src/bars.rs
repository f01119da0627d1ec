//! The typed, validated in-memory form of intraday bars.

use std::sync::Arc;

use chrono::NaiveDate;
use serde::Serialize;

use crate::Problem;

/// Top-of-book quotes aligned with a session's bars (LEAN quote bars).
/// A minute without a quote bar carries the previous quote forward; the
/// first minutes before any quote use the first quote seen.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuoteBars {
    /// Closing bid of each minute, in dollars (NaN if the file had no
    /// usable two-sided quote at all).
    pub bid: Vec<f64>,
    /// Closing ask of each minute, in dollars (NaN as for `bid`).
    pub ask: Vec<f64>,
    /// Last bid size of each minute, in shares.
    pub bid_size: Vec<f64>,
    /// Last ask size of each minute, in shares.
    pub ask_size: Vec<f64>,
}

/// One symbol's regular session on one date, stored column-wise.
///
/// Bars are sorted by minute and unique. `minute` is minutes after midnight
/// in exchange local time, so 09:30 is 570.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Ticker: a symbol column's value as written, else the file or folder
    /// name in upper case.
    pub symbol: Arc<str>,
    /// Trading date, exchange local.
    pub date: NaiveDate,
    /// Each bar's stamp, in minutes after midnight as the source stamps it
    /// (LEAN: the bar's start).
    pub minute: Vec<u16>,
    /// Opening price of each bar, in the source's currency (dollars for
    /// LEAN, whose integer prices are divided by 10 000).
    pub open: Vec<f64>,
    /// Highest price of each bar, same unit as `open`.
    pub high: Vec<f64>,
    /// Lowest price of each bar, same unit as `open`.
    pub low: Vec<f64>,
    /// Closing price of each bar, same unit as `open`.
    pub close: Vec<f64>,
    /// Shares traded in each bar (zero for filled bars).
    pub volume: Vec<f64>,
    /// Per-bar VWAP, when the source has it.
    pub vwap: Option<Vec<f64>>,
    /// A planted forecast of the return from each bar's close over the
    /// next minutes, in standard units, when the source carries one
    /// (`serl data plant`; 0 on filled bars).
    pub signal: Option<Vec<f64>>,
    /// Top-of-book quotes aligned with the bars, when a LEAN quote file was
    /// paired with the trade file.
    pub quotes: Option<QuoteBars>,
    /// True for bars inserted by [`crate::MissingMinutes::Fill`].
    pub filled: Vec<bool>,
    /// Minutes of the regular session that had no bar in the source.
    pub missing_minutes: u32,
    /// Of those, how many were filled with flat zero-volume bars.
    pub filled_minutes: u32,
}

impl Session {
    /// Number of bars, filled ones included.
    pub fn len(&self) -> usize {
        self.minute.len()
    }

    /// Whether the session has no bar.
    pub fn is_empty(&self) -> bool {
        self.minute.is_empty()
    }

    /// The price a bar's volume traded at: the VWAP when the source has one,
    /// else the typical price (H+L+C)/3.
    #[inline]
    pub fn minute_price(&self, i: usize) -> f64 {
        match &self.vwap {
            Some(v) => v[i],
            None => (self.high[i] + self.low[i] + self.close[i]) / 3.0,
        }
    }

    /// All minute prices, see [`Session::minute_price`].
    pub fn minute_prices(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.minute_price(i)).collect()
    }

    /// Shares traded over the whole session.
    pub fn total_volume(&self) -> f64 {
        self.volume.iter().sum()
    }

    /// Index of the first bar at or after `minute`.
    pub fn index_at_or_after(&self, minute: u16) -> usize {
        self.minute.partition_point(|&m| m < minute)
    }
}

/// How one source file fared.
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    /// The file (for LEAN, the trade zip).
    pub path: std::path::PathBuf,
    /// Bars kept after cleaning (inside the session, valid, deduplicated;
    /// before any fill).
    pub rows: u64,
    /// Symbol-sessions the file yielded.
    pub sessions: u32,
    /// Bars outside the regular session (pre- and post-market), dropped.
    pub outside_session: u64,
    /// The file was left out under the skip policy.
    pub skipped: bool,
    /// The file had an error-severity problem.
    pub failed: bool,
}

/// Everything loaded from a path: sessions sorted by (symbol, date), and
/// every problem met on the way.
#[derive(Debug, Clone, Default)]
pub struct Dataset {
    /// One entry per (symbol, date), sorted by symbol then date.
    pub sessions: Vec<Session>,
    /// Every defect found, warnings included, in no particular order.
    pub problems: Vec<Problem>,
    /// One report per source file (LEAN: per trade zip).
    pub files: Vec<FileReport>,
}

impl Dataset {
    /// Symbols in sorted order.
    pub fn symbols(&self) -> Vec<Arc<str>> {
        let mut out: Vec<Arc<str>> = Vec::new();
        for s in &self.sessions {
            if out.last() != Some(&s.symbol) {
                out.push(s.symbol.clone());
            }
        }
        out
    }

    /// Distinct session dates in order.
    pub fn dates(&self) -> Vec<NaiveDate> {
        let mut d: Vec<NaiveDate> = self.sessions.iter().map(|s| s.date).collect();
        d.sort_unstable();
        d.dedup();
        d
    }

    /// The sessions of one symbol, in date order.
    pub fn symbol_sessions(&self, symbol: &str) -> &[Session] {
        let start = self.sessions.partition_point(|s| &*s.symbol < symbol);
        let end = self.sessions.partition_point(|s| &*s.symbol <= symbol);
        &self.sessions[start..end]
    }

    /// One symbol's session on `date`, if the dataset has it.
    pub fn session(&self, symbol: &str, date: NaiveDate) -> Option<&Session> {
        self.symbol_sessions(symbol).iter().find(|s| s.date == date)
    }

    /// Bars in all sessions together, filled bars included.
    pub fn rows(&self) -> u64 {
        self.sessions.iter().map(|s| s.len() as u64).sum()
    }

    /// Whether any file failed (had an error-severity problem).
    pub fn any_file_failed(&self) -> bool {
        self.files.iter().any(|f| f.failed)
    }

    /// The problems that left data out (a file skipped, a row dropped or
    /// set aside), in file and line order: what a command that used the
    /// dataset must say it did not use. Bars that traded nothing and rows
    /// put back in time order lose nothing and are not listed.
    pub fn left_out(&self) -> Vec<&crate::Problem> {
        use crate::ProblemKind::{Unsorted, ZeroVolume};
        let mut v: Vec<&crate::Problem> = self
            .problems
            .iter()
            .filter(|p| !matches!(p.kind, ZeroVolume | Unsorted))
            .collect();
        v.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
        v
    }

    /// Files left out whole under the skip policy.
    pub fn files_skipped(&self) -> usize {
        self.files.iter().filter(|f| f.skipped).count()
    }
}
