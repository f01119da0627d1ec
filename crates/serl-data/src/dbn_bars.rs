//! Databento's DBN bars, `ohlcv-1m` and `ohlcv-1s`, plain or zstd, read
//! through Databento's own `dbn` crate (any DBN version it reads, upgraded
//! as it upgrades them).
//!
//! A file holds many instruments; each becomes a source of its own, named
//! by the file's symbology mappings (the symbol asked for, `ESH1`, not the
//! venue's instrument id). Prices are DBN's fixed point (1e-9); a bar's
//! UTC nanoseconds are read in the session's time zone
//! (`[data.session] timezone`, New York by default) and stamped at their
//! start, as DBN stamps them. Second bars are gathered into the minute
//! they start in (first open, highest high, lowest low, last close,
//! summed volume). A record's place in the file is its `line`, so a
//! defect names the file and the record.

use std::path::Path;
use std::sync::Arc;

#[cfg(test)]
use chrono::Timelike;
use chrono::{DateTime, NaiveDate, Offset, TimeZone};
use chrono_tz::Tz;
use dbn::{Metadata, OhlcvMsg, Schema};

use crate::dbn_records::BarRecord;
use crate::error::{Problem, ProblemKind};
use crate::raw::RawBars;

/// DBN's fixed-point price scale.
const PRICE_SCALE: f64 = 1e-9;

/// Whether `lower` (a lower-cased file name) is a DBN file.
pub(crate) fn is_dbn(lower: &str) -> bool {
    lower.ends_with(".dbn") || lower.ends_with(".dbn.zst")
}

/// The bar width of a file's schema in seconds and its records' type, or
/// why it is not bars.
fn bar_schema(path: &Path, meta: &Metadata) -> Result<(u64, u8), Problem> {
    match meta.schema {
        Some(Schema::Ohlcv1M) => Ok((60, dbn::rtype::OHLCV_1M)),
        Some(Schema::Ohlcv1S) => Ok((1, dbn::rtype::OHLCV_1S)),
        other => Err(Problem::file_error(
            path,
            ProblemKind::Header,
            format!(
                "DBN schema {} is not minute or second bars (ohlcv-1m, ohlcv-1s)",
                other.map_or("mixed".to_string(), |s| s.to_string())
            ),
        )),
    }
}

/// The file's instrument ids to symbols, through its symbology mappings.
fn symbol_map(path: &Path, meta: &Metadata) -> Result<dbn::TsSymbolMap, Problem> {
    meta.symbol_map().map_err(|e| {
        Problem::file_error(
            path,
            ProblemKind::Header,
            format!("its symbology mappings: {e}"),
        )
    })
}

/// The symbols a DBN file of bars holds, from its symbology mappings.
pub(crate) fn dbn_symbols(path: &Path) -> Result<Vec<Arc<str>>, Problem> {
    let (meta, _) = crate::dbn_records::open(path)?;
    bar_schema(path, &meta)?;
    let map = symbol_map(path, &meta)?;
    let mut symbols: Vec<Arc<str>> = map
        .inner()
        .values()
        .flat_map(|m| {
            m.intervals()
                .iter()
                .map(|i| Arc::<str>::from(i.symbol.as_str()))
        })
        .collect();
    symbols.sort();
    symbols.dedup();
    if symbols.is_empty() {
        return Err(Problem::file_error(
            path,
            ProblemKind::Header,
            "no symbology mappings: its instruments have no symbol to name them".into(),
        ));
    }
    Ok(symbols)
}

/// Every symbol's bars in the DBN file `path`, read in `tz` and not yet
/// cleaned: how many there are. The reading pass alone, for the
/// benchmark that sets it beside the `dbn` crate's decoder
/// (`benches/load.rs`).
#[doc(hidden)]
pub fn dbn_bars_read(path: &Path, tz: Tz) -> Result<u64, crate::DataError> {
    let failed = |problem| crate::DataError::FileFailed {
        problem: Box::new(problem),
    };
    let symbols = dbn_symbols(path).map_err(failed)?;
    let raws = read_dbn_symbols(path, &symbols, tz, &mut Vec::new()).map_err(failed)?;
    Ok(raws.iter().map(|r| r.len() as u64).sum())
}

/// Every bar record of the DBN file `path` decoded and nothing kept: the
/// summed volume. The same work as the `dbn` crate's decoder in the
/// reading benchmark (`benches/load.rs`).
#[doc(hidden)]
pub fn dbn_records_decoded(path: &Path) -> Result<u64, crate::DataError> {
    let failed = |problem| crate::DataError::FileFailed {
        problem: Box::new(problem),
    };
    let (meta, reader) = crate::dbn_records::open(path).map_err(failed)?;
    let (_, rtype) = bar_schema(path, &meta).map_err(failed)?;
    let mut volume = 0u64;
    crate::dbn_records::each_bar(path, reader, rtype, |_, r| {
        volume = volume.wrapping_add(r.volume)
    })
    .map_err(failed)?;
    Ok(volume)
}

/// `symbol`'s bars in the DBN file `path`, in the session's time zone.
#[cfg(test)]
pub(crate) fn read_dbn(
    path: &Path,
    symbol: &Arc<str>,
    tz: Tz,
    problems: &mut Vec<Problem>,
) -> Result<RawBars, Problem> {
    let mut all = read_dbn_symbols(path, std::slice::from_ref(symbol), tz, problems)?;
    Ok(all.remove(0))
}

/// The bars of each of `symbols` in the DBN file `path`, in the session's
/// time zone, from one decoding pass over the file: a file of N
/// instruments is read once, not N times.
pub(crate) fn read_dbn_symbols(
    path: &Path,
    symbols: &[Arc<str>],
    tz: Tz,
    problems: &mut Vec<Problem>,
) -> Result<Vec<RawBars>, Problem> {
    let (meta, records) = crate::dbn_records::open(path)?;
    let (seconds, rtype) = bar_schema(path, &meta)?;
    let map = symbol_map(path, &meta)?;
    // A row per bar per symbol, columns only at the end: pushing to eight
    // columns of hundreds of symbols in turn touches thousands of pages
    // round-robin, and the TLB misses cost three times the decoding.
    let each = records_in(path).unwrap_or(0) / symbols.len().max(1) as u64;
    let mut bars: Vec<Vec<Bar>> = (0..symbols.len())
        .map(|_| Vec::with_capacity((each + each / 4) as usize))
        .collect();
    let mut which = Instruments::new(&map, symbols);
    let mut clock = LocalClock::new(tz);
    crate::dbn_records::each_bar(path, records, rtype, |record, rec| {
        if let Some(k) = which.of(rec) {
            let at = clock.local(rec.ts_event);
            push_bar(&mut bars[k], rec, (seconds, record), at);
        }
    })?;
    if which.unmapped > 0 {
        let unmapped = which.unmapped;
        problems.push(Problem {
            severity: crate::error::Severity::Warning,
            count: unmapped,
            ..Problem::file_error(
                path,
                ProblemKind::BadValue,
                format!("{unmapped} record(s) of an instrument without a symbol mapping, left out"),
            )
        });
    }
    Ok(bars
        .into_iter()
        .zip(symbols)
        .map(|(bars, symbol)| columns(&bars, symbol))
        .collect())
}

/// Which of the wanted symbols a record is, through the file's symbology
/// mappings; a mapping holds for a whole UTC day, so an instrument's
/// answer is kept for the day it was asked on rather than looked up in
/// the map's table for every record.
struct Instruments<'a> {
    map: &'a dbn::TsSymbolMap,
    wanted: std::collections::HashMap<&'a str, usize>,
    /// Instrument id to (UTC day, whether a mapping names it that day, the
    /// wanted symbol it is).
    known: rustc_hash::FxHashMap<u32, (u64, bool, Option<usize>)>,
    /// Records of an instrument that no mapping names.
    unmapped: u64,
}

impl<'a> Instruments<'a> {
    fn new(map: &'a dbn::TsSymbolMap, symbols: &'a [Arc<str>]) -> Self {
        Instruments {
            map,
            wanted: symbols.iter().enumerate().map(|(k, s)| (&**s, k)).collect(),
            known: Default::default(),
            unmapped: 0,
        }
    }

    fn of(&mut self, rec: &BarRecord) -> Option<usize> {
        // The day the mappings index a bar by: its start's, in UTC.
        let day = rec.ts_event / NANOS_PER_DAY;
        let (mapped, k) = match self.known.get(&rec.instrument_id) {
            Some(&(d, mapped, k)) if d == day => (mapped, k),
            _ => {
                let symbol = self.map.get_for_ts(rec.ts_event, rec.instrument_id);
                let k = symbol.and_then(|s| self.wanted.get(s.as_str()).copied());
                self.known
                    .insert(rec.instrument_id, (day, symbol.is_some(), k));
                (symbol.is_some(), k)
            }
        };
        self.unmapped += u64::from(!mapped);
        k
    }
}

const NANOS_PER_DAY: u64 = 86_400 * 1_000_000_000;
/// Every time zone's offsets change on a quarter hour (Newfoundland's on
/// the half hour of UTC), so an offset holds for a quarter hour's bars.
const NANOS_PER_QUARTER: u64 = 900 * 1_000_000_000;

/// UTC nanoseconds to the session's local date and minute, the time zone's
/// offset looked up once a quarter hour rather than for every bar.
struct LocalClock {
    tz: Tz,
    quarter: u64,
    offset_seconds: i64,
}

impl LocalClock {
    fn new(tz: Tz) -> Self {
        LocalClock {
            tz,
            quarter: u64::MAX,
            offset_seconds: 0,
        }
    }

    fn local(&mut self, ts: u64) -> (NaiveDate, u16) {
        let quarter = ts / NANOS_PER_QUARTER;
        if quarter != self.quarter {
            let utc = DateTime::from_timestamp_nanos(ts as i64).naive_utc();
            let offset = self.tz.offset_from_utc_datetime(&utc).fix();
            self.offset_seconds = i64::from(offset.local_minus_utc());
            self.quarter = quarter;
        }
        let seconds = (ts / 1_000_000_000) as i64 + self.offset_seconds;
        let days = seconds.div_euclid(86_400);
        let minute = (seconds.rem_euclid(86_400) / 60) as u16;
        let date = NaiveDate::from_num_days_from_ce_opt((days + UNIX_EPOCH_DAYS_FROM_CE) as i32)
            .unwrap_or_default();
        (date, minute)
    }
}

/// Days from 0001-01-01 (day 1) to 1970-01-01.
const UNIX_EPOCH_DAYS_FROM_CE: i64 = 719_163;

/// How many bar records a plain DBN file holds, from its size (none said
/// for a zstd file).
fn records_in(path: &Path) -> Option<u64> {
    Some(body_bytes(path)? / std::mem::size_of::<OhlcvMsg>() as u64)
}

/// About the memory the bars of the DBN file `path` take as rows while a
/// pass reads them: its records, counted from a plain file's size or, for
/// a zstd file, taken as some 8 bytes of records to a byte of file.
pub(crate) fn bar_bytes_estimate(path: &Path) -> u64 {
    let records = records_in(path).unwrap_or_else(|| {
        let compressed = std::fs::metadata(path).map_or(0, |m| m.len());
        compressed * 8 / std::mem::size_of::<OhlcvMsg>() as u64
    });
    records * std::mem::size_of::<Bar>() as u64
}

/// The bytes after a plain DBN file's metadata, from its prelude (`DBN`,
/// the version, the metadata's length) and its size: `None` for a zstd
/// file, or one that cannot be read (the decoder says why).
fn body_bytes(path: &Path) -> Option<u64> {
    if path.extension().is_some_and(|x| x == "zst") {
        return None;
    }
    let mut prelude = [0u8; 8];
    let file = std::fs::File::open(path)
        .and_then(|mut f| {
            std::io::Read::read_exact(&mut f, &mut prelude)?;
            f.metadata()
        })
        .ok()?;
    let meta = u32::from_le_bytes([prelude[4], prelude[5], prelude[6], prelude[7]]) as u64;
    Some(file.len().saturating_sub(8 + meta))
}

/// One bar as read, before the columns are made.
#[derive(Debug, Clone, Copy)]
struct Bar {
    date: NaiveDate,
    minute: u16,
    open: f64,
    high: f64,
    low: f64,
    close: f64,
    volume: f64,
    /// The record's place in the file.
    record: u64,
}

/// Adds `rec`, at local `(date, minute)`, to `bars`: a new minute, or
/// (second bars) into the minute it starts in.
fn push_bar(
    bars: &mut Vec<Bar>,
    rec: &BarRecord,
    (seconds, record): (u64, u64),
    (date, minute): (NaiveDate, u16),
) {
    let px = |p: i64| p as f64 * PRICE_SCALE;
    let bar = Bar {
        date,
        minute,
        open: px(rec.open),
        high: px(rec.high),
        low: px(rec.low),
        close: px(rec.close),
        volume: rec.volume as f64,
        record,
    };
    match bars.last_mut() {
        Some(last) if seconds < 60 && last.date == date && last.minute == minute => {
            last.high = last.high.max(bar.high);
            last.low = last.low.min(bar.low);
            last.close = bar.close;
            last.volume += bar.volume;
        }
        _ => bars.push(bar),
    }
}

/// One symbol's bars as the columns the cleaning reads.
fn columns(bars: &[Bar], symbol: &Arc<str>) -> RawBars {
    let mut raw = RawBars::with_capacity(bars.len());
    for b in bars {
        raw.symbol.push(symbol.clone());
        raw.date.push(b.date);
        raw.minute.push(b.minute);
        raw.open.push(b.open);
        raw.high.push(b.high);
        raw.low.push(b.low);
        raw.close.push(b.close);
        raw.volume.push(b.volume);
        raw.line.push(b.record);
    }
    raw
}

#[cfg(test)]
mod tests {
    use super::*;
    use dbn::decode::{DecodeRecord, DynDecoder};
    use dbn::VersionUpgradePolicy;

    /// The crate's own decoder, the reference.
    fn decoder(
        path: &Path,
    ) -> Result<DynDecoder<'static, std::io::BufReader<std::fs::File>>, Problem> {
        DynDecoder::from_file(path, VersionUpgradePolicy::UpgradeToV3).map_err(|e| {
            Problem::file_error(
                path,
                ProblemKind::Io,
                format!("not a readable DBN file: {e}"),
            )
        })
    }

    use crate::dbn_records::sample;

    /// Every bar serl reads is the crate's own record, price for price.
    #[test]
    fn the_sample_bars_match_the_crates_own_decoding_record_by_record() {
        for name in ["test_data.ohlcv-1m.dbn", "test_data.ohlcv-1m.v3.dbn.zst"] {
            let path = sample(name);
            let symbols = dbn_symbols(&path).unwrap();
            assert_eq!(symbols.len(), 1, "{name}: {symbols:?}");
            let raw = read_dbn(&path, &symbols[0], chrono_tz::UTC, &mut Vec::new()).unwrap();
            let mut dec = decoder(&path).unwrap();
            let mut k = 0;
            while let Some(rec) = dec.decode_record::<OhlcvMsg>().unwrap() {
                assert_eq!(raw.open[k], rec.open as f64 * 1e-9, "{name} record {k}");
                assert_eq!(raw.close[k], rec.close as f64 * 1e-9, "{name} record {k}");
                assert_eq!(raw.volume[k], rec.volume as f64, "{name} record {k}");
                let t = DateTime::from_timestamp_nanos(rec.hd.ts_event as i64);
                assert_eq!(raw.date[k], t.date_naive());
                assert_eq!(raw.minute[k] as u32, t.hour() * 60 + t.minute());
                k += 1;
            }
            assert!(
                k > 0 && k == raw.len(),
                "{name}: {k} records, {} bars",
                raw.len()
            );
        }
    }

    #[test]
    fn second_bars_are_gathered_into_their_minute() {
        let path = sample("test_data.ohlcv-1s.dbn");
        let symbols = dbn_symbols(&path).unwrap();
        let raw = read_dbn(&path, &symbols[0], chrono_tz::UTC, &mut Vec::new()).unwrap();
        let mut dec = decoder(&path).unwrap();
        let mut volume = 0.0;
        while let Some(rec) = dec.decode_record::<OhlcvMsg>().unwrap() {
            volume += rec.volume as f64;
        }
        assert!(raw.len() >= 1);
        assert_eq!(raw.volume.iter().sum::<f64>(), volume);
    }

    #[test]
    fn a_truncated_file_and_a_schema_of_no_bars_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = std::fs::read(sample("test_data.ohlcv-1m.dbn")).unwrap();
        let cut = dir.path().join("cut.dbn");
        std::fs::write(&cut, &bytes[..bytes.len() - 20]).unwrap();
        let symbols = dbn_symbols(&cut).unwrap();
        let e = read_dbn(&cut, &symbols[0], chrono_tz::UTC, &mut Vec::new()).unwrap_err();
        assert!(e.message.contains("record"), "{}", e.message);
        let mbo = sample("../mbo/test_data.mbo.dbn");
        let e = dbn_symbols(&mbo).unwrap_err();
        assert!(
            e.message.contains("not minute or second bars"),
            "{}",
            e.message
        );
    }

    /// The quarter-hour offset cache gives chrono's own local time across
    /// New York's and Newfoundland's (a half hour off UTC) DST changes.
    #[test]
    fn the_local_clock_is_chronos_own_across_daylight_saving_changes() {
        for tz in [chrono_tz::America::New_York, chrono_tz::America::St_Johns] {
            let mut clock = LocalClock::new(tz);
            for day in ["2019-03-09", "2019-11-02"] {
                let start = day
                    .parse::<NaiveDate>()
                    .unwrap()
                    .and_hms_opt(0, 0, 0)
                    .unwrap();
                let start = start.and_utc().timestamp_nanos_opt().unwrap() as u64;
                for minute in 0..(3 * 24 * 60) {
                    let ts = start + minute * 60_000_000_000 + 7_000_000_000;
                    let local = DateTime::from_timestamp_nanos(ts as i64).with_timezone(&tz);
                    let want = (
                        local.date_naive(),
                        (local.hour() * 60 + local.minute()) as u16,
                    );
                    assert_eq!(clock.local(ts), want, "{tz} at {local}");
                }
            }
        }
    }
}
