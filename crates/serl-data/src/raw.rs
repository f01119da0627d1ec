//! Raw rows as read from one file, and their cleaning into [`Session`]s.
//!
//! Every reader (CSV, LEAN) produces [`RawBars`]; this module owns the rules
//! that are the same for all of them: the regular-session filter, value
//! checks, ordering, duplicates and missing minutes.

use std::path::Path;
use std::sync::Arc;

use chrono::NaiveDate;

use crate::bars::{QuoteBars, Session};
use crate::config::{MissingMinutes, SessionConfig};
use crate::{Problem, ProblemKind, Severity};

/// Rows from one file, column-wise, in file order.
#[derive(Debug, Default, Clone)]
pub struct RawBars {
    pub symbol: Vec<Arc<str>>,
    pub date: Vec<NaiveDate>,
    pub minute: Vec<u16>,
    pub open: Vec<f64>,
    pub high: Vec<f64>,
    pub low: Vec<f64>,
    pub close: Vec<f64>,
    pub volume: Vec<f64>,
    pub vwap: Option<Vec<f64>>,
    /// 1-based source line of each row.
    pub line: Vec<u64>,
}

impl RawBars {
    pub fn len(&self) -> usize {
        self.minute.len()
    }

    fn same_values(&self, a: usize, b: usize) -> bool {
        self.open[a] == self.open[b]
            && self.high[a] == self.high[b]
            && self.low[a] == self.low[b]
            && self.close[a] == self.close[b]
            && self.volume[a] == self.volume[b]
            && self.vwap.as_ref().is_none_or(|v| v[a] == v[b])
    }
}

/// Session hours in minutes, resolved from the config.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hours {
    pub open: u16,
    /// Last minute stamp that belongs to the session (inclusive).
    pub last: u16,
    pub missing: MissingMinutes,
}

impl Hours {
    pub fn new(cfg: &SessionConfig, include_close_bar: bool) -> Self {
        // The config was validated on load, so these parse.
        let open = cfg.open_minute().unwrap_or(570);
        let close = cfg.close_minute().unwrap_or(960);
        Hours {
            open,
            last: if include_close_bar { close } else { close - 1 },
            missing: cfg.missing_minutes,
        }
    }
}

pub(crate) struct Cleaned {
    pub sessions: Vec<Session>,
    pub outside_session: u64,
    pub rows: u64,
}

fn row_problem(
    file: &Path,
    line: u64,
    field: &str,
    kind: ProblemKind,
    severity: Severity,
    message: String,
) -> Problem {
    Problem {
        file: file.to_path_buf(),
        line: Some(line),
        field: Some(field.to_string()),
        kind,
        severity,
        count: 1,
        message,
    }
}

/// Checks values, sorts, drops duplicates and builds sessions.
pub(crate) fn clean(
    file: &Path,
    raw: RawBars,
    hours: Hours,
    problems: &mut Vec<Problem>,
) -> Cleaned {
    let n = raw.len();
    let mut keep: Vec<u32> = Vec::with_capacity(n);
    let mut outside = 0u64;
    let mut zero_volume = (0u64, 0u64);
    let fields = ["open", "high", "low", "close"];
    for i in 0..n {
        let m = raw.minute[i];
        if m < hours.open || m > hours.last {
            outside += 1;
            continue;
        }
        let prices = [raw.open[i], raw.high[i], raw.low[i], raw.close[i]];
        if let Some(k) = prices.iter().position(|p| !(p.is_finite() && *p > 0.0)) {
            problems.push(row_problem(
                file,
                raw.line[i],
                fields[k],
                ProblemKind::NonPositivePrice,
                Severity::Error,
                format!("price {} is not positive; row dropped", prices[k]),
            ));
            continue;
        }
        if raw.high[i] < raw.low[i] {
            problems.push(row_problem(
                file,
                raw.line[i],
                "high",
                ProblemKind::HighBelowLow,
                Severity::Error,
                format!(
                    "high {} is below low {}; row dropped",
                    raw.high[i], raw.low[i]
                ),
            ));
            continue;
        }
        let v = raw.volume[i];
        if !(v.is_finite() && v >= 0.0) {
            problems.push(row_problem(
                file,
                raw.line[i],
                "volume",
                ProblemKind::BadVolume,
                Severity::Error,
                format!("volume {v} is negative or not finite; row dropped"),
            ));
            continue;
        }
        if v == 0.0 {
            if zero_volume.0 == 0 {
                zero_volume.1 = raw.line[i];
            }
            zero_volume.0 += 1;
        }
        keep.push(i as u32);
    }
    if zero_volume.0 > 0 {
        problems.push(Problem {
            file: file.to_path_buf(),
            line: Some(zero_volume.1),
            field: Some("volume".into()),
            kind: ProblemKind::ZeroVolume,
            severity: Severity::Warning,
            count: zero_volume.0,
            message: "bars with zero volume (kept); first one here".into(),
        });
    }

    let key = |i: u32| {
        let i = i as usize;
        (raw.symbol[i].clone(), raw.date[i], raw.minute[i])
    };
    if let Some(w) = keep.windows(2).position(|w| key(w[0]) > key(w[1])) {
        problems.push(Problem {
            file: file.to_path_buf(),
            line: Some(raw.line[keep[w + 1] as usize]),
            field: None,
            kind: ProblemKind::Unsorted,
            severity: Severity::Warning,
            count: 1,
            message: "timestamps go backwards here; rows were sorted".into(),
        });
        keep.sort_by_key(|&i| key(i)); // stable: the first occurrence stays first
    }

    // Duplicates: identical rows are dropped; rows that share a timestamp but
    // not their values keep the first and are reported as conflicts.
    let mut deduped: Vec<u32> = Vec::with_capacity(keep.len());
    let (mut dup, mut dup_line, mut conflict, mut conflict_line) = (0u64, 0u64, 0u64, 0u64);
    for &i in &keep {
        if let Some(&j) = deduped.last() {
            let (iu, ju) = (i as usize, j as usize);
            if raw.minute[iu] == raw.minute[ju]
                && raw.date[iu] == raw.date[ju]
                && raw.symbol[iu] == raw.symbol[ju]
            {
                if raw.same_values(iu, ju) {
                    if dup == 0 {
                        dup_line = raw.line[iu];
                    }
                    dup += 1;
                } else {
                    if conflict == 0 {
                        conflict_line = raw.line[iu];
                    }
                    conflict += 1;
                }
                continue;
            }
        }
        deduped.push(i);
    }
    if dup > 0 {
        problems.push(Problem {
            file: file.to_path_buf(),
            line: Some(dup_line),
            field: None,
            kind: ProblemKind::DuplicateRows,
            severity: Severity::Warning,
            count: dup,
            message: "exact duplicate rows dropped; first one here".into(),
        });
    }
    if conflict > 0 {
        problems.push(Problem {
            file: file.to_path_buf(),
            line: Some(conflict_line),
            field: None,
            kind: ProblemKind::ConflictingRows,
            severity: Severity::Warning,
            count: conflict,
            message: "rows repeat an earlier timestamp with other values; the first was kept"
                .into(),
        });
    }

    let rows = deduped.len() as u64;
    let mut sessions = Vec::new();
    let mut start = 0;
    while start < deduped.len() {
        let first = deduped[start] as usize;
        let mut end = start + 1;
        while end < deduped.len() {
            let j = deduped[end] as usize;
            if raw.date[j] != raw.date[first] || raw.symbol[j] != raw.symbol[first] {
                break;
            }
            end += 1;
        }
        sessions.push(build_session(&raw, &deduped[start..end], hours));
        start = end;
    }
    Cleaned {
        sessions,
        outside_session: outside,
        rows,
    }
}

fn build_session(raw: &RawBars, idx: &[u32], hours: Hours) -> Session {
    let first = idx[0] as usize;
    let expected = (hours.last - hours.open + 1) as usize;
    let missing = expected.saturating_sub(idx.len()) as u32;
    let cap = if hours.missing == MissingMinutes::Fill {
        expected
    } else {
        idx.len()
    };
    let mut s = Session {
        symbol: raw.symbol[first].clone(),
        date: raw.date[first],
        minute: Vec::with_capacity(cap),
        open: Vec::with_capacity(cap),
        high: Vec::with_capacity(cap),
        low: Vec::with_capacity(cap),
        close: Vec::with_capacity(cap),
        volume: Vec::with_capacity(cap),
        vwap: raw.vwap.as_ref().map(|_| Vec::with_capacity(cap)),
        quotes: None,
        filled: Vec::with_capacity(cap),
        missing_minutes: missing,
        filled_minutes: 0,
    };
    let push = |s: &mut Session, m: u16, o: f64, h: f64, l: f64, c: f64, v: f64, w: f64, f| {
        s.minute.push(m);
        s.open.push(o);
        s.high.push(h);
        s.low.push(l);
        s.close.push(c);
        s.volume.push(v);
        if let Some(vw) = &mut s.vwap {
            vw.push(w);
        }
        s.filled.push(f);
    };
    for &i in idx {
        let i = i as usize;
        if hours.missing == MissingMinutes::Fill {
            // Gaps before this bar are filled at the previous close; gaps at
            // the open stay missing because there is no earlier price to carry.
            if let Some(&prev_m) = s.minute.last() {
                let c = *s.close.last().unwrap_or(&raw.open[i]);
                for m in prev_m + 1..raw.minute[i] {
                    push(&mut s, m, c, c, c, c, 0.0, c, true);
                    s.filled_minutes += 1;
                }
            }
        }
        let w = raw.vwap.as_ref().map_or(0.0, |v| v[i]);
        push(
            &mut s,
            raw.minute[i],
            raw.open[i],
            raw.high[i],
            raw.low[i],
            raw.close[i],
            raw.volume[i],
            w,
            false,
        );
    }
    if hours.missing == MissingMinutes::Fill {
        if let Some(&last_m) = s.minute.last() {
            let c = *s.close.last().unwrap_or(&0.0);
            for m in last_m + 1..=hours.last {
                push(&mut s, m, c, c, c, c, 0.0, c, true);
                s.filled_minutes += 1;
            }
        }
    }
    s
}

/// One minute's closing quote.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuoteRow {
    pub minute: u16,
    pub bid: f64,
    pub ask: f64,
    pub bid_size: f64,
    pub ask_size: f64,
}

/// Aligns quote rows (sorted by minute) with a session's minutes, carrying
/// the last quote forward over minutes without one; minutes before the
/// first quote use the first.
pub(crate) fn align_quotes(session: &Session, quotes: &[QuoteRow]) -> QuoteBars {
    let mut q = QuoteBars::default();
    let mut j = 0;
    let mut cur = quotes.first().copied();
    for &m in &session.minute {
        while j < quotes.len() && quotes[j].minute <= m {
            cur = Some(quotes[j]);
            j += 1;
        }
        let (b, a, bs, asz) = cur.map_or((f64::NAN, f64::NAN, 0.0, 0.0), |r| {
            (r.bid, r.ask, r.bid_size, r.ask_size)
        });
        q.bid.push(b);
        q.ask.push(a);
        q.bid_size.push(bs);
        q.ask_size.push(asz);
    }
    q
}
