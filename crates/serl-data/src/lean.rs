//! QuantConnect LEAN minute bars: `minute/SYMBOL/YYYYMMDD_trade.zip` and
//! `_quote.zip`, each a zip holding one headerless CSV.
//!
//! Times are milliseconds after midnight (America/New_York) at the start of
//! the bar; prices are integers in 1/10000 dollars.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use chrono::NaiveDate;

use crate::raw::{QuoteRow, RawBars};
use crate::{Problem, ProblemKind, Severity};

const PRICE_SCALE: f64 = 10_000.0;

/// Reads the single CSV inside a LEAN zip.
pub(crate) fn unzip_single(file: &Path) -> Result<Vec<u8>, Problem> {
    let f = std::fs::File::open(file)
        .map_err(|e| Problem::file_error(file, ProblemKind::Io, format!("cannot open: {e}")))?;
    let mut zip = zip::ZipArchive::new(f).map_err(|e| {
        Problem::file_error(
            file,
            ProblemKind::Compression,
            format!("not a readable zip: {e}"),
        )
    })?;
    if zip.is_empty() {
        return Err(Problem::file_error(
            file,
            ProblemKind::Empty,
            "the zip holds no file".into(),
        ));
    }
    let mut entry = zip.by_index(0).map_err(|e| {
        Problem::file_error(
            file,
            ProblemKind::Compression,
            format!("corrupt zip entry: {e}"),
        )
    })?;
    let name = entry.name().map(|n| n.to_string()).unwrap_or_default();
    let mut out = Vec::with_capacity(entry.size() as usize);
    entry.read_to_end(&mut out).map_err(|e| {
        Problem::file_error(
            file,
            ProblemKind::Compression,
            format!("truncated or corrupt zip entry `{name}`: {e}"),
        )
    })?;
    Ok(out)
}

/// Parses headerless comma-separated integer rows with `width` fields.
/// Bad rows are reported by line and column and skipped.
fn parse_rows(
    file: &Path,
    bytes: &[u8],
    width: usize,
    names: &[&str],
    problems: &mut Vec<Problem>,
) -> Vec<(u64, Vec<f64>)> {
    let text = String::from_utf8_lossy(bytes);
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() < width {
            problems.push(Problem {
                file: file.to_path_buf(),
                line: Some(line_no),
                field: None,
                kind: ProblemKind::BadValue,
                severity: Severity::Error,
                count: 1,
                message: format!(
                    "expected {width} fields ({}), found {}; row dropped",
                    names.join(","),
                    fields.len()
                ),
            });
            continue;
        }
        let mut vals = Vec::with_capacity(width);
        let mut bad = None;
        for (k, f) in fields.iter().take(width).enumerate() {
            match f.trim().parse::<f64>() {
                Ok(v) => vals.push(v),
                Err(_) => {
                    bad = Some((k, *f));
                    break;
                }
            }
        }
        match bad {
            None => rows.push((line_no, vals)),
            Some((k, f)) => problems.push(Problem {
                file: file.to_path_buf(),
                line: Some(line_no),
                field: Some(names[k].to_string()),
                kind: ProblemKind::BadValue,
                severity: Severity::Error,
                count: 1,
                message: format!("`{f}` is not a number; row dropped"),
            }),
        }
    }
    rows
}

fn minute_of(file: &Path, line: u64, ms: f64, problems: &mut Vec<Problem>) -> Option<u16> {
    if !(0.0..86_400_000.0).contains(&ms) || ms % 60_000.0 != 0.0 {
        problems.push(Problem {
            file: file.to_path_buf(),
            line: Some(line),
            field: Some("time".into()),
            kind: ProblemKind::BadValue,
            severity: Severity::Error,
            count: 1,
            message: format!(
                "{ms} is not a whole minute after midnight in milliseconds; row dropped"
            ),
        });
        return None;
    }
    Some((ms / 60_000.0) as u16)
}

/// Reads a LEAN minute trade bar file.
pub(crate) fn read_trade(
    file: &Path,
    symbol: &Arc<str>,
    date: NaiveDate,
    problems: &mut Vec<Problem>,
) -> Result<RawBars, Problem> {
    let bytes = unzip_single(file)?;
    let names = ["time", "open", "high", "low", "close", "volume"];
    let rows = parse_rows(file, &bytes, 6, &names, problems);
    if rows.is_empty() && problems.iter().all(|p| p.file != file) {
        return Err(Problem::file_error(
            file,
            ProblemKind::Empty,
            "no bars in file".into(),
        ));
    }
    let mut raw = RawBars::default();
    for (line, v) in rows {
        let Some(m) = minute_of(file, line, v[0], problems) else {
            continue;
        };
        raw.symbol.push(symbol.clone());
        raw.date.push(date);
        raw.minute.push(m);
        raw.open.push(v[1] / PRICE_SCALE);
        raw.high.push(v[2] / PRICE_SCALE);
        raw.low.push(v[3] / PRICE_SCALE);
        raw.close.push(v[4] / PRICE_SCALE);
        raw.volume.push(v[5]);
        raw.line.push(line);
    }
    Ok(raw)
}

/// Reads a LEAN minute quote bar file into (minute, bid close, ask close,
/// last bid size, last ask size), sorted by minute.
pub(crate) fn read_quote(
    file: &Path,
    problems: &mut Vec<Problem>,
) -> Result<Vec<QuoteRow>, Problem> {
    let bytes = unzip_single(file)?;
    let names = [
        "time",
        "bid_open",
        "bid_high",
        "bid_low",
        "bid_close",
        "last_bid_size",
        "ask_open",
        "ask_high",
        "ask_low",
        "ask_close",
        "last_ask_size",
    ];
    let rows = parse_rows(file, &bytes, 11, &names, problems);
    let mut out = Vec::with_capacity(rows.len());
    for (line, v) in rows {
        let Some(m) = minute_of(file, line, v[0], problems) else {
            continue;
        };
        let (bid, ask) = (v[4] / PRICE_SCALE, v[9] / PRICE_SCALE);
        // A one-sided quote bar has a zero price on the missing side; it
        // carries no information about the spread.
        if bid > 0.0 && ask > 0.0 && ask >= bid {
            out.push(QuoteRow {
                minute: m,
                bid,
                ask,
                bid_size: v[5],
                ask_size: v[10],
            });
        }
    }
    out.sort_by_key(|r| r.minute);
    Ok(out)
}
