//! Generic header CSV (plain or gzipped) read with polars.
//!
//! The fast path asks polars for typed columns. When that fails (a bad
//! number, an empty cell), the file is read again as text so that each bad
//! cell can be named by line and field, and only those rows are dropped.

use std::path::Path;
use std::sync::Arc;

use chrono::NaiveDate;
use polars::prelude::*;

use crate::config::ColumnMapping;
use crate::raw::RawBars;
use crate::time::{parse_date, parse_time_minute, parse_timestamp_after};
use crate::{Problem, ProblemKind, Severity};

enum TimeLayout {
    Timestamp(String),
    Split { date: String, time: String },
}

struct Layout {
    time: TimeLayout,
    vwap: bool,
    signal: bool,
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
        signal: has(&map.signal),
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
    let numeric = numeric_columns(map, &layout);
    let (df, typed_ok) = read_typed_or_text(file, bytes, &header, &numeric)?;
    bars_from_frame(
        file,
        &df,
        &layout,
        map,
        typed_ok,
        symbol_from_path,
        problems,
    )
}

/// The numeric columns of a layout: open, high, low, close, volume, then
/// the VWAP and the planted signal where the file has them.
fn numeric_columns<'m>(map: &'m ColumnMapping, layout: &Layout) -> Vec<&'m str> {
    let mut numeric: Vec<&str> = price_columns(map).to_vec();
    if layout.vwap {
        numeric.push(&map.vwap);
    }
    if layout.signal {
        numeric.push(&map.signal);
    }
    numeric
}

/// A frame's rows as raw bars, each bad cell a problem and its row left
/// out. Numeric columns are `f64` when `typed`, else text to parse; time
/// and symbol columns are text.
fn bars_from_frame(
    file: &Path,
    df: &DataFrame,
    layout: &Layout,
    map: &ColumnMapping,
    typed: bool,
    symbol_from_path: &Arc<str>,
    problems: &mut Vec<Problem>,
) -> Result<RawBars, Problem> {
    if df.height() == 0 {
        return Err(Problem::file_error(
            file,
            ProblemKind::Empty,
            "the file has a header but no rows".into(),
        ));
    }
    let n = df.height();
    let mut cells = Cells {
        file,
        df,
        ok: vec![true; n],
        problems,
    };
    let numeric = numeric_columns(map, layout);
    let mut values: Vec<Vec<f64>> = Vec::with_capacity(numeric.len());
    for name in &numeric {
        values.push(cells.numbers(name, typed)?);
    }
    let (dates, minutes) = match &layout.time {
        TimeLayout::Timestamp(name) => cells.timestamps(name)?,
        TimeLayout::Split { date, time } => cells.dates_and_times(date, time)?,
    };
    let symbols: Vec<Arc<str>> = if layout.symbol {
        cells.symbols(&map.symbol)?
    } else {
        vec![symbol_from_path.clone(); n]
    };
    let columns = Columns {
        symbols,
        dates,
        minutes,
        values,
    };
    Ok(columns.keep(&cells.ok, layout.vwap, layout.signal))
}

/// Reads a Parquet file's frame into raw bars with the same column mapping
/// as a CSV: numeric columns are cast to `f64` and time and symbol columns
/// to text (a `Date` column reads as `YYYY-MM-DD`), then go through the
/// same cell checks. Rows are numbered as in the CSV the file would be.
pub(crate) fn bars_from_parquet(
    file: &Path,
    df: DataFrame,
    map: &ColumnMapping,
    symbol_from_path: &Arc<str>,
    problems: &mut Vec<Problem>,
) -> Result<RawBars, Problem> {
    let header: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|c| c.to_string())
        .collect();
    let layout = resolve_layout(file, &header, map)?;
    let numeric = numeric_columns(map, &layout);
    let text: Vec<&str> = match &layout.time {
        TimeLayout::Timestamp(t) => vec![t.as_str()],
        TimeLayout::Split { date, time } => vec![date.as_str(), time.as_str()],
    };
    let symbol = layout.symbol.then_some(map.symbol.as_str());
    let mut columns = Vec::with_capacity(header.len());
    for c in df.columns() {
        let name = c.name().as_str();
        let to = if numeric.contains(&name) {
            DataType::Float64
        } else if text.contains(&name) || symbol == Some(name) {
            DataType::String
        } else {
            continue;
        };
        let cast = c.cast(&to).map_err(|e| {
            Problem::file_error(
                file,
                ProblemKind::BadValue,
                format!("column `{name}`: cannot read it as {to}: {e}"),
            )
        })?;
        columns.push(cast);
    }
    let df = DataFrame::new_infer_height(columns).map_err(|e| {
        Problem::file_error(
            file,
            ProblemKind::BadValue,
            format!("not a readable Parquet frame: {e}"),
        )
    })?;
    bars_from_frame(file, &df, &layout, map, true, symbol_from_path, problems)
}

/// Reads the file with typed numeric columns, or, when that fails (a bad
/// number, an empty cell), again as text so that each bad cell can be
/// named. The flag says whether the typed read worked.
fn read_typed_or_text(
    file: &Path,
    bytes: &[u8],
    header: &[String],
    numeric: &[&str],
) -> Result<(DataFrame, bool), Problem> {
    match read_frame(bytes, header, numeric) {
        Ok(df) => Ok((df, true)),
        Err(_) => {
            let text = read_frame(bytes, header, &[]).map_err(|e| {
                Problem::file_error(
                    file,
                    ProblemKind::BadValue,
                    format!("not a readable CSV: {e}"),
                )
            })?;
            Ok((text, false))
        }
    }
}

/// The columns of a frame read cell by cell, with each row's validity: a
/// row with any bad cell is dropped, and each bad cell is reported.
struct Cells<'a> {
    file: &'a Path,
    df: &'a DataFrame,
    ok: Vec<bool>,
    problems: &'a mut Vec<Problem>,
}

impl<'a> Cells<'a> {
    fn column(&self, name: &str) -> Result<&'a Column, Problem> {
        self.df.column(name).map_err(|e| {
            Problem::file_error(
                self.file,
                ProblemKind::Header,
                format!("column `{name}`: {e}"),
            )
        })
    }

    fn type_error(&self, name: &str, e: PolarsError) -> Problem {
        Problem::file_error(
            self.file,
            ProblemKind::BadValue,
            format!("column `{name}`: {e}"),
        )
    }

    fn strings(&self, name: &str) -> Result<&'a StringChunked, Problem> {
        self.column(name)?
            .str()
            .map_err(|e| self.type_error(name, e))
    }

    /// Marks row `i` bad because of its cell in `field`.
    fn bad(&mut self, i: usize, field: &str, message: &str) {
        self.ok[i] = false;
        self.problems.push(bad_cell(self.file, i, field, message));
    }

    /// A numeric column's values (NaN where a cell is bad), from the typed
    /// frame or parsed from the text one.
    fn numbers(&mut self, name: &str, typed: bool) -> Result<Vec<f64>, Problem> {
        let c = self.column(name)?;
        let mut out = vec![f64::NAN; self.ok.len()];
        if typed {
            let ca = c.f64().map_err(|e| self.type_error(name, e))?;
            for (i, v) in ca.iter().enumerate() {
                match v {
                    Some(v) => out[i] = v,
                    None => self.bad(i, name, "empty value"),
                }
            }
        } else {
            let ca = c.str().map_err(|e| self.type_error(name, e))?;
            for (i, v) in ca.iter().enumerate() {
                match v.map(|s| (s, s.trim().parse::<f64>())) {
                    Some((_, Ok(v))) => out[i] = v,
                    Some((s, Err(_))) => self.bad(i, name, &format!("`{s}` is not a number")),
                    None => self.bad(i, name, "empty value"),
                }
            }
        }
        Ok(out)
    }

    /// Dates and minutes from one timestamp column.
    fn timestamps(&mut self, name: &str) -> Result<(Vec<NaiveDate>, Vec<u16>), Problem> {
        let ca = self.strings(name)?;
        let n = self.ok.len();
        let (mut dates, mut minutes) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut last = None;
        for (i, v) in ca.iter().enumerate() {
            match v.and_then(|s| parse_timestamp_after(s.trim().as_bytes(), &mut last)) {
                Some((d, m)) => {
                    dates.push(d);
                    minutes.push(m);
                }
                None => {
                    dates.push(NaiveDate::MIN);
                    minutes.push(0);
                    let s = v.unwrap_or("");
                    let message = format!("`{s}` is not a timestamp YYYY-MM-DD HH:MM[:SS]");
                    self.bad(i, name, &message);
                }
            }
        }
        Ok((dates, minutes))
    }

    /// Dates and minutes from a date column and a time column.
    fn dates_and_times(
        &mut self,
        date: &str,
        time: &str,
    ) -> Result<(Vec<NaiveDate>, Vec<u16>), Problem> {
        let dc = self.strings(date)?;
        let tc = self.strings(time)?;
        let n = self.ok.len();
        let (mut dates, mut minutes) = (Vec::with_capacity(n), Vec::with_capacity(n));
        // Rows of one day repeat its date: parse each distinct run once.
        let mut last: Option<(&str, NaiveDate)> = None;
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
                    dates.push(NaiveDate::MIN);
                    minutes.push(0);
                    if p.is_none() {
                        self.bad(i, date, &format!("`{d}` is not a date YYYY-MM-DD"));
                    } else {
                        let t = t.unwrap_or("");
                        self.bad(i, time, &format!("`{t}` is not a minute HH:MM[:SS]"));
                    }
                }
            }
        }
        Ok((dates, minutes))
    }

    /// The symbol column, one shared string per run of equal symbols.
    fn symbols(&self, name: &str) -> Result<Vec<Arc<str>>, Problem> {
        let ca = self.strings(name)?;
        let mut last: Option<Arc<str>> = None;
        Ok(ca
            .iter()
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
            .collect())
    }
}

/// Every row's parsed cells, good and bad.
struct Columns {
    symbols: Vec<Arc<str>>,
    dates: Vec<NaiveDate>,
    minutes: Vec<u16>,
    /// open, high, low, close, volume, then vwap and signal when the file
    /// has them.
    values: Vec<Vec<f64>>,
}

impl Columns {
    /// The rows marked `ok`, with their source lines.
    fn keep(self, ok: &[bool], vwap: bool, signal: bool) -> RawBars {
        let values = &self.values;
        let mut raw = RawBars {
            vwap: vwap.then(Vec::new),
            signal: signal.then(Vec::new),
            ..Default::default()
        };
        let signal_at = PRICE_FIELDS + usize::from(vwap);
        for i in (0..ok.len()).filter(|&i| ok[i]) {
            raw.symbol.push(self.symbols[i].clone());
            raw.date.push(self.dates[i]);
            raw.minute.push(self.minutes[i]);
            raw.open.push(values[0][i]);
            raw.high.push(values[1][i]);
            raw.low.push(values[2][i]);
            raw.close.push(values[3][i]);
            raw.volume.push(values[4][i]);
            if let Some(v) = &mut raw.vwap {
                v.push(values[PRICE_FIELDS][i]);
            }
            if let Some(v) = &mut raw.signal {
                v.push(values[signal_at][i]);
            }
            raw.line.push(i as u64 + 2);
        }
        raw
    }
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
