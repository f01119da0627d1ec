//! Sessions written as one Databento DBN `ohlcv-1m` file, every symbol an
//! instrument named by the file's symbology mappings, the records in time
//! order across instruments as Databento writes them. It is what the DBN
//! reader's tests and its speed benchmark read (`benches/load.rs`): the
//! same bars in DBN and in serl's Parquet.

use std::path::Path;

use chrono::{Datelike, NaiveDate, TimeZone};
use chrono_tz::Tz;
use dbn::encode::{DbnEncoder, EncodeRecord};
use dbn::{OhlcvMsg, Schema};

use crate::Session;

/// DBN's fixed-point price units per dollar.
const PRICE_UNITS: f64 = 1e9;

fn invalid(why: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, why.to_string())
}

fn dbn_date(d: NaiveDate) -> std::io::Result<time::Date> {
    let month = time::Month::try_from(d.month() as u8).map_err(invalid)?;
    time::Date::from_calendar_date(d.year(), month, d.day() as u8).map_err(invalid)
}

/// A bar's start in UTC nanoseconds: its minute stamp read in `tz` (bars
/// stamped at their start, as DBN stamps them).
fn stamp(tz: Tz, date: NaiveDate, minute: u16) -> std::io::Result<u64> {
    let at = date
        .and_hms_opt(u32::from(minute / 60), u32::from(minute % 60), 0)
        .ok_or_else(|| invalid(format!("{date}: minute {minute} is not a time of day")))?;
    let local = tz
        .from_local_datetime(&at)
        .earliest()
        .ok_or_else(|| invalid(format!("{at} does not exist in {tz}")))?;
    Ok(local.timestamp_nanos_opt().unwrap_or(0).max(0) as u64)
}

fn metadata(symbols: &[&str], first: NaiveDate, last: NaiveDate) -> std::io::Result<dbn::Metadata> {
    let (start, end) = (dbn_date(first)?, dbn_date(last.succ_opt().unwrap_or(last))?);
    let mappings = symbols
        .iter()
        .enumerate()
        .map(|(k, s)| dbn::SymbolMapping {
            raw_symbol: s.to_string(),
            intervals: vec![dbn::MappingInterval {
                start_date: start,
                end_date: end,
                symbol: (k + 1).to_string(),
            }],
        })
        .collect();
    Ok(dbn::Metadata::builder()
        .dataset("SERL.BARS")
        .schema(Some(Schema::Ohlcv1M))
        .start(0)
        .stype_in(Some(dbn::SType::RawSymbol))
        .stype_out(dbn::SType::InstrumentId)
        .symbols(symbols.iter().map(|s| s.to_string()).collect())
        .mappings(mappings)
        .build())
}

/// Writes `sessions`' bars (filled bars left out, as the Parquet copy
/// leaves them) to `path` as DBN `ohlcv-1m`, their minutes read in `tz`;
/// the i-th symbol in name order is instrument i + 1. Returns the records
/// written.
pub fn write_dbn_bars(path: &Path, sessions: &[Session], tz: Tz) -> std::io::Result<u64> {
    let mut symbols: Vec<&str> = sessions.iter().map(|s| &*s.symbol).collect();
    symbols.sort_unstable();
    symbols.dedup();
    let mut records = Vec::new();
    for s in sessions {
        let id = symbols.binary_search(&&*s.symbol).unwrap_or(0) as u32 + 1;
        for i in (0..s.len()).filter(|&i| !s.filled.get(i).copied().unwrap_or(false)) {
            let px = |p: f64| (p * PRICE_UNITS).round() as i64;
            records.push(OhlcvMsg {
                hd: dbn::RecordHeader::new::<OhlcvMsg>(
                    dbn::rtype::OHLCV_1M,
                    0,
                    id,
                    stamp(tz, s.date, s.minute[i])?,
                ),
                open: px(s.open[i]),
                high: px(s.high[i]),
                low: px(s.low[i]),
                close: px(s.close[i]),
                volume: s.volume[i].max(0.0).round() as u64,
            });
        }
    }
    records.sort_by_key(|r| (r.hd.ts_event, r.hd.instrument_id));
    let first = sessions.iter().map(|s| s.date).min();
    let last = sessions.iter().map(|s| s.date).max();
    let (Some(first), Some(last)) = (first, last) else {
        return Err(invalid("no session to write"));
    };
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut enc = DbnEncoder::new(file, &metadata(&symbols, first, last)?).map_err(invalid)?;
    for r in &records {
        enc.encode_record(r).map_err(invalid)?;
    }
    enc.flush().map_err(invalid)?;
    Ok(records.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{load, DataConfig};

    /// Two symbols' bars, written interleaved in one file, read back from
    /// one decoding pass each as its own symbol, bar for bar.
    #[test]
    fn a_file_of_several_symbols_reads_back_as_each_symbols_bars() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/lean");
        let cfg = DataConfig::default();
        let ds = load(&root, &cfg).unwrap();
        let symbols: std::collections::BTreeSet<&str> =
            ds.sessions.iter().map(|s| &*s.symbol).collect();
        assert!(symbols.len() >= 2, "{symbols:?}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bars.ohlcv-1m.dbn");
        let written = write_dbn_bars(&file, &ds.sessions, chrono_tz::America::New_York).unwrap();
        assert_eq!(written, ds.rows());
        let back = load(&file, &cfg).unwrap();
        assert_eq!(back.sessions.len(), ds.sessions.len());
        for (a, b) in ds.sessions.iter().zip(&back.sessions) {
            assert_eq!((&a.symbol, a.date), (&b.symbol, b.date));
            assert_eq!(a.minute, b.minute, "{} {}", a.symbol, a.date);
            let near = a
                .close
                .iter()
                .zip(&b.close)
                .all(|(x, y)| (x - y).abs() < 1e-9);
            assert!(near, "{} {}", a.symbol, a.date);
            assert_eq!(a.volume, b.volume, "{} {}", a.symbol, a.date);
        }
    }
}
