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
    pub signal: Option<Vec<f64>>,
    /// 1-based source line of each row.
    pub line: Vec<u64>,
}

impl RawBars {
    /// Room for `rows` rows without growing.
    pub(crate) fn with_capacity(rows: usize) -> Self {
        RawBars {
            symbol: Vec::with_capacity(rows),
            date: Vec::with_capacity(rows),
            minute: Vec::with_capacity(rows),
            open: Vec::with_capacity(rows),
            high: Vec::with_capacity(rows),
            low: Vec::with_capacity(rows),
            close: Vec::with_capacity(rows),
            volume: Vec::with_capacity(rows),
            vwap: None,
            signal: None,
            line: Vec::with_capacity(rows),
        }
    }

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
            && self.signal.as_ref().is_none_or(|v| v[a] == v[b])
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

/// Rows of one kind of warning: how many, and the line of the first.
#[derive(Default)]
struct Tally {
    count: u64,
    first_line: u64,
}

impl Tally {
    fn note(&mut self, line: u64) {
        if self.count == 0 {
            self.first_line = line;
        }
        self.count += 1;
    }

    /// One warning for all the rows, pointing at the first; none if none.
    fn warning(
        &self,
        file: &Path,
        field: Option<&str>,
        kind: ProblemKind,
        message: &str,
    ) -> Option<Problem> {
        (self.count > 0).then(|| Problem {
            file: file.to_path_buf(),
            line: Some(self.first_line),
            field: field.map(Into::into),
            kind,
            severity: Severity::Warning,
            count: self.count,
            message: message.into(),
        })
    }
}

/// Checks values, sorts, drops duplicates and builds sessions.
pub(crate) fn clean(
    file: &Path,
    raw: RawBars,
    hours: Hours,
    problems: &mut Vec<Problem>,
) -> Cleaned {
    let (mut keep, outside) = valid_rows(file, &raw, hours, problems);
    sort_rows(file, &raw, &mut keep, problems);
    let deduped = dedupe(file, &raw, &keep, problems);
    let rows = deduped.len() as u64;
    Cleaned {
        sessions: split_sessions(&raw, &deduped, hours),
        outside_session: outside,
        rows,
    }
}

/// The rows inside the session whose values pass the checks, and how many
/// fell outside the session. Each bad row is reported; rows with zero
/// volume are kept, with one warning for all of them.
fn valid_rows(
    file: &Path,
    raw: &RawBars,
    hours: Hours,
    problems: &mut Vec<Problem>,
) -> (Vec<u32>, u64) {
    let n = raw.len();
    let mut keep: Vec<u32> = Vec::with_capacity(n);
    let mut outside = 0u64;
    let mut zero_volume = Tally::default();
    for i in 0..n {
        let m = raw.minute[i];
        if m < hours.open || m > hours.last {
            outside += 1;
            continue;
        }
        if let Some(p) = bad_values(file, raw, i) {
            problems.push(p);
            continue;
        }
        if raw.volume[i] == 0.0 {
            zero_volume.note(raw.line[i]);
        }
        keep.push(i as u32);
    }
    problems.extend(zero_volume.warning(
        file,
        Some("volume"),
        ProblemKind::ZeroVolume,
        "bars with zero volume (kept); first one here",
    ));
    (keep, outside)
}

/// The first thing wrong with row `i`'s values, if any: a price that is
/// not positive, a high below the low, a negative or non-finite volume, a
/// planted signal that is not finite.
fn bad_values(file: &Path, raw: &RawBars, i: usize) -> Option<Problem> {
    let fields = ["open", "high", "low", "close"];
    let prices = [raw.open[i], raw.high[i], raw.low[i], raw.close[i]];
    let error = |field: &str, kind, message| {
        Some(row_problem(
            file,
            raw.line[i],
            field,
            kind,
            Severity::Error,
            message,
        ))
    };
    if let Some(k) = prices.iter().position(|p| !(p.is_finite() && *p > 0.0)) {
        return error(
            fields[k],
            ProblemKind::NonPositivePrice,
            format!("price {} is not positive; row dropped", prices[k]),
        );
    }
    if raw.high[i] < raw.low[i] {
        return error(
            "high",
            ProblemKind::HighBelowLow,
            format!(
                "high {} is below low {}; row dropped",
                raw.high[i], raw.low[i]
            ),
        );
    }
    let v = raw.volume[i];
    if !(v.is_finite() && v >= 0.0) {
        return error(
            "volume",
            ProblemKind::BadVolume,
            format!("volume {v} is negative or not finite; row dropped"),
        );
    }
    if let Some(g) = raw.signal.as_ref().map(|g| g[i]).filter(|g| !g.is_finite()) {
        return error(
            "signal",
            ProblemKind::BadValue,
            format!("signal {g} is not finite; row dropped"),
        );
    }
    None
}

/// Sorts the kept rows by (symbol, date, minute) if they are out of order,
/// with a warning at the first place time goes backwards.
fn sort_rows(file: &Path, raw: &RawBars, keep: &mut [u32], problems: &mut Vec<Problem>) {
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
}

/// Duplicates: identical rows are dropped; rows that share a timestamp but
/// not their values keep the first and are reported as conflicts.
fn dedupe(file: &Path, raw: &RawBars, keep: &[u32], problems: &mut Vec<Problem>) -> Vec<u32> {
    let mut deduped: Vec<u32> = Vec::with_capacity(keep.len());
    let (mut dup, mut conflict) = (Tally::default(), Tally::default());
    for &i in keep {
        if let Some(&j) = deduped.last() {
            let (iu, ju) = (i as usize, j as usize);
            if raw.minute[iu] == raw.minute[ju]
                && raw.date[iu] == raw.date[ju]
                && raw.symbol[iu] == raw.symbol[ju]
            {
                if raw.same_values(iu, ju) {
                    dup.note(raw.line[iu]);
                } else {
                    conflict.note(raw.line[iu]);
                }
                continue;
            }
        }
        deduped.push(i);
    }
    problems.extend(dup.warning(
        file,
        None,
        ProblemKind::DuplicateRows,
        "exact duplicate rows dropped; first one here",
    ));
    problems.extend(conflict.warning(
        file,
        None,
        ProblemKind::ConflictingRows,
        "rows repeat an earlier timestamp with other values; the first was kept",
    ));
    deduped
}

/// One session per run of rows with the same symbol and date.
fn split_sessions(raw: &RawBars, rows: &[u32], hours: Hours) -> Vec<Session> {
    let mut sessions = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        let first = rows[start] as usize;
        let mut end = start + 1;
        while end < rows.len() {
            let j = rows[end] as usize;
            if raw.date[j] != raw.date[first] || raw.symbol[j] != raw.symbol[first] {
                break;
            }
            end += 1;
        }
        sessions.push(build_session(raw, &rows[start..end], hours));
        start = end;
    }
    sessions
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
        signal: raw.signal.as_ref().map(|_| Vec::with_capacity(cap)),
        quotes: None,
        filled: Vec::with_capacity(cap),
        missing_minutes: missing,
        filled_minutes: 0,
    };
    let push = |s: &mut Session, m: u16, [o, h, l, c, v, w, g]: [f64; 7], f| {
        s.minute.push(m);
        s.open.push(o);
        s.high.push(h);
        s.low.push(l);
        s.close.push(c);
        s.volume.push(v);
        if let Some(vw) = &mut s.vwap {
            vw.push(w);
        }
        if let Some(sg) = &mut s.signal {
            sg.push(g);
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
                    push(&mut s, m, [c, c, c, c, 0.0, c, 0.0], true);
                    s.filled_minutes += 1;
                }
            }
        }
        let w = raw.vwap.as_ref().map_or(0.0, |v| v[i]);
        let g = raw.signal.as_ref().map_or(0.0, |v| v[i]);
        let bar = [
            raw.open[i],
            raw.high[i],
            raw.low[i],
            raw.close[i],
            raw.volume[i],
            w,
            g,
        ];
        push(&mut s, raw.minute[i], bar, false);
    }
    if hours.missing == MissingMinutes::Fill {
        if let Some(&last_m) = s.minute.last() {
            let c = *s.close.last().unwrap_or(&0.0);
            for m in last_m + 1..=hours.last {
                push(&mut s, m, [c, c, c, c, 0.0, c, 0.0], true);
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
