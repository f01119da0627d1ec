//! Generic header CSV (plain or gzipped) read with polars.
//!
//! The fast path asks polars for typed columns. When that fails (a bad
//! number, an empty cell), the file is read again as text so that each bad
//! cell can be named by line and field, and only those rows are dropped.

use std::path::Path;
use std::sync::Arc;

use polars::prelude::*;

use crate::config::ColumnMapping;
use crate::raw::RawBars;
use crate::time::{parse_date, parse_time_minute, parse_timestamp};
use crate::{Problem, ProblemKind, Severity};

enum TimeLayout {
    Timestamp(String),
    Split { date: String, time: String },
}

struct Layout {
    time: TimeLayout,
    vwap: bool,
    symbol: bool,
}

const PRICE_FIELDS: usize = 5;

fn header_of(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let end = memchr_newline(bytes);
    String::from_utf8_lossy(&bytes[..end])
        .trim_end_matches('\r')
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .collect()
}

fn memchr_newline(b: &[u8]) -> usize {
    b.iter().position(|&c| c == b'\n').unwrap_or(b.len())
}

fn resolve_layout(file: &Path, header: &[String], map: &ColumnMapping) -> Result<Layout, Problem> {
    let has = |c: &str| header.iter().any(|h| h == c);
    let time = if has(&map.timestamp) {
        TimeLayout::Timestamp(map.timestamp.clone())
    } else if has(&map.date) && has(&map.time) {
        TimeLayout::Split {
            date: map.date.clone(),
            time: map.time.clone(),
        }
    } else {
        let wanted = format!("`{}` or `{}`+`{}`", map.timestamp, map.date, map.time);
        return Err(header_problem(file, header, map, &wanted));
    };
    for c in [&map.open, &map.high, &map.low, &map.close, &map.volume] {
        if !has(c) {
            return Err(header_problem(file, header, map, &format!("`{c}`")));
        }
    }
    Ok(Layout {
        time,
        vwap: has(&map.vwap),
        symbol: has(&map.symbol),
    })
}

fn header_problem(file: &Path, header: &[String], map: &ColumnMapping, missing: &str) -> Problem {
    Problem {
        file: file.to_path_buf(),
        line: Some(1),
        field: None,
        kind: ProblemKind::Header,
        severity: Severity::Error,
        count: 1,
        message: format!(
            "wrong header: no column {missing}; found [{}]; expected {} (or {}+{}),{},{},{},{},{}[,{}] \
             — set the column names under [columns] in the data config",
            header.join(","),
            map.timestamp,
            map.date,
            map.time,
            map.open,
            map.high,
            map.low,
            map.close,
            map.volume,
            map.vwap
        ),
    }
}

fn price_columns(map: &ColumnMapping) -> [&str; PRICE_FIELDS] {
    [&map.open, &map.high, &map.low, &map.close, &map.volume]
}

fn read_frame(bytes: &[u8], header: &[String], numeric: &[&str]) -> PolarsResult<DataFrame> {
    let schema: Schema = header
        .iter()
        .map(|h| {
            let dtype = if numeric.contains(&h.as_str()) {
                DataType::Float64
            } else {
                DataType::String
            };
            Field::new(h.as_str().into(), dtype)
        })
        .collect();
    CsvReadOptions::default()
        .with_has_header(true)
        .with_schema(Some(Arc::new(schema)))
        .with_n_threads(Some(1))
        .with_rechunk(false)
        .into_reader_with_file_handle(std::io::Cursor::new(bytes))
        .finish()
}

/// Reads one header CSV's bytes (already decompressed) into raw rows.
///
/// Returns `Err` for a file-level problem (header, unreadable CSV); row-level
/// problems are pushed to `problems` and their rows left out.
pub(crate) fn read_csv(
    file: &Path,
    bytes: &[u8],
    map: &ColumnMapping,
    symbol_from_path: &Arc<str>,
    problems: &mut Vec<Problem>,
) -> Result<RawBars, Problem> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(Problem::file_error(
            file,
            ProblemKind::Empty,
            "empty file".into(),
        ));
    }
    let header = header_of(bytes);
    let layout = resolve_layout(file, &header, map)?;
    let mut numeric: Vec<&str> = price_columns(map).to_vec();
    if layout.vwap {
        numeric.push(&map.vwap);
    }
    let typed = read_frame(bytes, &header, &numeric);
    let (df, typed_ok) = match typed {
        Ok(df) => (df, true),
        Err(_) => {
            let text = read_frame(bytes, &header, &[]).map_err(|e| {
                Problem::file_error(
                    file,
                    ProblemKind::BadValue,
                    format!("not a readable CSV: {e}"),
                )
            })?;
            (text, false)
        }
    };
    if df.height() == 0 {
        return Err(Problem::file_error(
            file,
            ProblemKind::Empty,
            "the file has a header but no rows".into(),
        ));
    }
    let n = df.height();
    let col = |name: &str| -> Result<&Column, Problem> {
        df.column(name).map_err(|e| {
            Problem::file_error(file, ProblemKind::Header, format!("column `{name}`: {e}"))
        })
    };
    // Each row's validity; a row with any bad cell is dropped.
    let mut ok = vec![true; n];
    let mut values: Vec<Vec<f64>> = Vec::with_capacity(numeric.len());
    for name in &numeric {
        let c = col(name)?;
        let mut out = vec![f64::NAN; n];
        if typed_ok {
            let ca = c.f64().map_err(|e| {
                Problem::file_error(file, ProblemKind::BadValue, format!("column `{name}`: {e}"))
            })?;
            for (i, v) in ca.iter().enumerate() {
                match v {
                    Some(v) => out[i] = v,
                    None => {
                        ok[i] = false;
                        problems.push(bad_cell(file, i, name, "empty value"));
                    }
                }
            }
        } else {
            let ca = c.str().map_err(|e| {
                Problem::file_error(file, ProblemKind::BadValue, format!("column `{name}`: {e}"))
            })?;
            for (i, v) in ca.iter().enumerate() {
                match v.map(|s| (s, s.trim().parse::<f64>())) {
                    Some((_, Ok(v))) => out[i] = v,
                    Some((s, Err(_))) => {
                        ok[i] = false;
                        problems.push(bad_cell(file, i, name, &format!("`{s}` is not a number")));
                    }
                    None => {
                        ok[i] = false;
                        problems.push(bad_cell(file, i, name, "empty value"));
                    }
                }
            }
        }
        values.push(out);
    }

    let mut dates = Vec::with_capacity(n);
    let mut minutes = Vec::with_capacity(n);
    match &layout.time {
        TimeLayout::Timestamp(name) => {
            let ca = col(name)?.str().map_err(|e| {
                Problem::file_error(file, ProblemKind::BadValue, format!("column `{name}`: {e}"))
            })?;
            for (i, v) in ca.iter().enumerate() {
                match v.and_then(|s| parse_timestamp(s.trim().as_bytes())) {
                    Some((d, m)) => {
                        dates.push(d);
                        minutes.push(m);
                    }
                    None => {
                        ok[i] = false;
                        dates.push(chrono::NaiveDate::MIN);
                        minutes.push(0);
                        let s = v.unwrap_or("");
                        problems.push(bad_cell(
                            file,
                            i,
                            name,
                            &format!("`{s}` is not a timestamp YYYY-MM-DD HH:MM[:SS]"),
                        ));
                    }
                }
            }
        }
        TimeLayout::Split { date, time } => {
            let dc = col(date)?.str().map_err(|e| {
                Problem::file_error(file, ProblemKind::BadValue, format!("column `{date}`: {e}"))
            })?;
            let tc = col(time)?.str().map_err(|e| {
                Problem::file_error(file, ProblemKind::BadValue, format!("column `{time}`: {e}"))
            })?;
            let mut last: Option<(&str, chrono::NaiveDate)> = None;
            for (i, (d, t)) in dc.iter().zip(tc.iter()).enumerate() {
                let d = d.unwrap_or("");
                let parsed = match last {
                    Some((s, v)) if s == d => Some(v),
                    _ => parse_date(d.trim().as_bytes()),
                };
                if let Some(v) = parsed {
                    last = Some((d, v));
                }
                let m = t.and_then(|t| parse_time_minute(t.trim().as_bytes()));
                match (parsed, m) {
                    (Some(d), Some(m)) => {
                        dates.push(d);
                        minutes.push(m);
                    }
                    (p, _) => {
                        ok[i] = false;
                        dates.push(chrono::NaiveDate::MIN);
                        minutes.push(0);
                        if p.is_none() {
                            problems.push(bad_cell(
                                file,
                                i,
                                date,
                                &format!("`{d}` is not a date YYYY-MM-DD"),
                            ));
                        } else {
                            let t = t.unwrap_or("");
                            problems.push(bad_cell(
                                file,
                                i,
                                time,
                                &format!("`{t}` is not a minute HH:MM[:SS]"),
                            ));
                        }
                    }
                }
            }
        }
    }

    let symbols: Vec<Arc<str>> = if layout.symbol {
        let ca = col(&map.symbol)?.str().map_err(|e| {
            Problem::file_error(
                file,
                ProblemKind::BadValue,
                format!("column `{}`: {e}", map.symbol),
            )
        })?;
        let mut last: Option<Arc<str>> = None;
        ca.iter()
            .map(|s| {
                let s = s.unwrap_or("").trim();
                match &last {
                    Some(l) if &**l == s => l.clone(),
                    _ => {
                        let a: Arc<str> = Arc::from(s);
                        last = Some(a.clone());
                        a
                    }
                }
            })
            .collect()
    } else {
        vec![symbol_from_path.clone(); n]
    };

    let mut raw = RawBars {
        vwap: layout.vwap.then(Vec::new),
        ..Default::default()
    };
    for i in (0..n).filter(|&i| ok[i]) {
        raw.symbol.push(symbols[i].clone());
        raw.date.push(dates[i]);
        raw.minute.push(minutes[i]);
        raw.open.push(values[0][i]);
        raw.high.push(values[1][i]);
        raw.low.push(values[2][i]);
        raw.close.push(values[3][i]);
        raw.volume.push(values[4][i]);
        if let Some(v) = &mut raw.vwap {
            v.push(values[5][i]);
        }
        raw.line.push(i as u64 + 2);
    }
    Ok(raw)
}

fn bad_cell(file: &Path, row: usize, field: &str, message: &str) -> Problem {
    Problem {
        file: file.to_path_buf(),
        line: Some(row as u64 + 2),
        field: Some(field.to_string()),
        kind: ProblemKind::BadValue,
        severity: Severity::Error,
        count: 1,
        message: format!("{message}; row dropped"),
    }
}
