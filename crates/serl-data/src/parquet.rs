//! Parquet bars: read with the same column mapping as CSV, and written by
//! `serl data convert` as one file per symbol.
//!
//! A Parquet file's columns go through the CSV reader's cell checks
//! (`csv::bars_from_parquet`), so a bad value is named the same way and
//! the same cleaning follows. The writer stores what a load kept: the
//! regular-session bars of each session, under the config's column names
//! (a timestamp column and a symbol column), so that reading the copy back
//! with the same config gives the same sessions.

use std::path::Path;
use std::sync::Arc;

use polars::prelude::*;

use crate::bars::Session;
use crate::config::ColumnMapping;
use crate::raw::RawBars;
use crate::time::format_minute;
use crate::{Problem, ProblemKind};

/// Reads one Parquet file of bars.
pub(crate) fn read_parquet(
    path: &Path,
    map: &ColumnMapping,
    symbol_from_path: &Arc<str>,
    problems: &mut Vec<Problem>,
) -> Result<RawBars, Problem> {
    let file = std::fs::File::open(path)
        .map_err(|e| Problem::file_error(path, ProblemKind::Io, format!("cannot read: {e}")))?;
    let df = ParquetReader::new(file).finish().map_err(|e| {
        Problem::file_error(
            path,
            ProblemKind::BadValue,
            format!("not a readable Parquet file: {e}"),
        )
    })?;
    crate::csv::bars_from_parquet(path, df, map, symbol_from_path, problems)
}

/// Writes `sessions` (bars as loaded; filled bars left out, since a copy
/// holds what the source had; a planted signal where every session has
/// one) to `path` as Parquet under `map`'s column
/// names. Returns the bars written.
pub fn write_sessions(
    path: &Path,
    sessions: &[Session],
    map: &ColumnMapping,
) -> std::io::Result<u64> {
    let with_vwap = sessions.iter().all(|s| s.vwap.is_some()) && !sessions.is_empty();
    let with_signal = sessions.iter().all(|s| s.signal.is_some()) && !sessions.is_empty();
    let mut symbol = Vec::new();
    let mut stamp = Vec::new();
    let mut cols: [Vec<f64>; 6] = Default::default();
    let mut signal = Vec::new();
    for s in sessions {
        let date = s.date.format("%Y-%m-%d").to_string();
        for i in (0..s.len()).filter(|&i| !s.filled.get(i).copied().unwrap_or(false)) {
            symbol.push(s.symbol.to_string());
            stamp.push(format!("{date} {}:00", format_minute(s.minute[i])));
            for (c, v) in
                cols.iter_mut()
                    .zip([s.open[i], s.high[i], s.low[i], s.close[i], s.volume[i]])
            {
                c.push(v);
            }
            if let (true, Some(v)) = (with_vwap, &s.vwap) {
                cols[5].push(v[i]);
            }
            if let (true, Some(g)) = (with_signal, &s.signal) {
                signal.push(g[i]);
            }
        }
    }
    let rows = stamp.len() as u64;
    let names = [
        &map.open,
        &map.high,
        &map.low,
        &map.close,
        &map.volume,
        &map.vwap,
    ];
    let mut columns = vec![
        Column::new(map.symbol.as_str().into(), symbol),
        Column::new(map.timestamp.as_str().into(), stamp),
    ];
    for (name, values) in names.iter().zip(cols).take(if with_vwap { 6 } else { 5 }) {
        columns.push(Column::new(name.as_str().into(), values));
    }
    if with_signal {
        columns.push(Column::new(map.signal.as_str().into(), signal));
    }
    let mut df = DataFrame::new_infer_height(columns).map_err(std::io::Error::other)?;
    let tmp = path.with_extension("parquet.tmp");
    let file = std::fs::File::create(&tmp)?;
    ParquetWriter::new(file)
        .finish(&mut df)
        .map_err(std::io::Error::other)?;
    std::fs::rename(&tmp, path)?;
    Ok(rows)
}
