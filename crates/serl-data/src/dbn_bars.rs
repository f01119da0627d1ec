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

use chrono::{DateTime, Timelike};
use chrono_tz::Tz;
use dbn::decode::{DbnMetadata, DecodeRecord, DynDecoder};
use dbn::symbol_map::SymbolIndex;
use dbn::{Metadata, OhlcvMsg, Schema, VersionUpgradePolicy};

use crate::error::{Problem, ProblemKind};
use crate::raw::RawBars;

/// DBN's fixed-point price scale.
const PRICE_SCALE: f64 = 1e-9;

/// Whether `lower` (a lower-cased file name) is a DBN file.
pub(crate) fn is_dbn(lower: &str) -> bool {
    lower.ends_with(".dbn") || lower.ends_with(".dbn.zst")
}

fn decoder(path: &Path) -> Result<DynDecoder<'static, std::io::BufReader<std::fs::File>>, Problem> {
    DynDecoder::from_file(path, VersionUpgradePolicy::UpgradeToV3).map_err(|e| {
        Problem::file_error(
            path,
            ProblemKind::Io,
            format!("not a readable DBN file: {e}"),
        )
    })
}

/// The bar width of a file's schema in seconds, or why it is not bars.
fn bar_seconds(path: &Path, meta: &Metadata) -> Result<u64, Problem> {
    match meta.schema {
        Some(Schema::Ohlcv1M) => Ok(60),
        Some(Schema::Ohlcv1S) => Ok(1),
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
    let dec = decoder(path)?;
    let meta = dec.metadata();
    bar_seconds(path, meta)?;
    let map = symbol_map(path, meta)?;
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

/// `symbol`'s bars in the DBN file `path`, in the session's time zone.
pub(crate) fn read_dbn(
    path: &Path,
    symbol: &Arc<str>,
    tz: Tz,
    problems: &mut Vec<Problem>,
) -> Result<RawBars, Problem> {
    let mut dec = decoder(path)?;
    let meta = dec.metadata().clone();
    let seconds = bar_seconds(path, &meta)?;
    let map = symbol_map(path, &meta)?;
    let mut raw = RawBars::default();
    let mut record = 0u64;
    let mut unmapped = 0u64;
    loop {
        let rec = match dec.decode_record::<OhlcvMsg>() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                return Err(Problem {
                    line: Some(record + 1),
                    ..Problem::file_error(
                        path,
                        ProblemKind::Compression,
                        format!("record {}: truncated or corrupt DBN ({e})", record + 1),
                    )
                })
            }
        };
        record += 1;
        match map.get_for_rec(rec) {
            Some(s) if s.as_str() == &**symbol => {}
            Some(_) => continue,
            None => {
                unmapped += 1;
                continue;
            }
        }
        push_bar(&mut raw, rec, (seconds, record), symbol, tz);
    }
    check_whole(path, record)?;
    if unmapped > 0 {
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
    Ok(raw)
}

/// A plain DBN file that ends inside a record (the crate reads such a
/// tail as the end of the stream): its bytes after the metadata are not a
/// whole number of bar records. A zstd file's frame checks itself.
fn check_whole(path: &Path, records: u64) -> Result<(), Problem> {
    if path.extension().is_some_and(|x| x == "zst") {
        return Ok(());
    }
    // The prelude (`DBN`, the version, the metadata's length) and the
    // file's size say it; the records are not read again.
    let mut prelude = [0u8; 8];
    let read = std::fs::File::open(path).and_then(|mut f| {
        std::io::Read::read_exact(&mut f, &mut prelude)?;
        f.metadata()
    });
    let Ok(file) = read else {
        return Ok(()); // the decoder has read it; nothing new to say
    };
    let meta = u32::from_le_bytes([prelude[4], prelude[5], prelude[6], prelude[7]]) as usize;
    let body = (file.len() as usize).saturating_sub(8 + meta);
    let size = std::mem::size_of::<OhlcvMsg>();
    if body.is_multiple_of(size) {
        return Ok(());
    }
    Err(Problem {
        line: Some(records + 1),
        ..Problem::file_error(
            path,
            ProblemKind::Compression,
            format!(
                "record {}: the file ends inside it ({} of its {size} bytes): truncated",
                records + 1,
                body % size
            ),
        )
    })
}

/// Adds `rec` to `raw`: a new minute, or (second bars) into the minute
/// it starts in.
fn push_bar(
    raw: &mut RawBars,
    rec: &OhlcvMsg,
    (seconds, record): (u64, u64),
    symbol: &Arc<str>,
    tz: Tz,
) {
    let local = DateTime::from_timestamp_nanos(rec.hd.ts_event as i64).with_timezone(&tz);
    let date = local.date_naive();
    let minute = (local.hour() * 60 + local.minute()) as u16;
    let px = |p: i64| p as f64 * PRICE_SCALE;
    let (open, high, low, close) = (px(rec.open), px(rec.high), px(rec.low), px(rec.close));
    let volume = rec.volume as f64;
    let last = raw.len().checked_sub(1);
    let same_minute =
        seconds < 60 && last.is_some_and(|k| raw.date[k] == date && raw.minute[k] == minute);
    if let (true, Some(k)) = (same_minute, last) {
        raw.high[k] = raw.high[k].max(high);
        raw.low[k] = raw.low[k].min(low);
        raw.close[k] = close;
        raw.volume[k] += volume;
        return;
    }
    raw.symbol.push(symbol.clone());
    raw.date.push(date);
    raw.minute.push(minute);
    raw.open.push(open);
    raw.high.push(high);
    raw.low.push(low);
    raw.close.push(close);
    raw.volume.push(volume);
    raw.line.push(record);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/dbn/bars")
            .join(name)
    }

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
}
