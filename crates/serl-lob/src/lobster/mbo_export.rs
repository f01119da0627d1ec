//! LOBSTER days written as Databento DBN MBO, so that other tools read
//! serl's markets (a simulated day `serl simulate realism --export`
//! wrote, or any LOBSTER day), and the check that the file read back
//! gives the same book after every message (`serl lob export --dbn`).

use std::path::Path;

use chrono::{Datelike, NaiveDate, TimeZone};
use dbn::encode::{DbnEncoder, EncodeRecord};
use dbn::{MboMsg, Schema};
use rustc_hash::FxHashSet;
use serde::Serialize;

use super::mbo::{read_mbo, refused, PRICE_DIV};
use super::messages::{LobsterEvent, MessageRow};
use super::orderbook::BookRows;
use super::ReplayError;

/// The MBO records a LOBSTER message becomes: (action, written as the
/// aggressor's side). An execution is the aggressor's Trade, then the
/// resting order's Fill; hidden executions, crosses and halts have none.
pub(super) fn records_of(kind: LobsterEvent) -> &'static [(u8, bool)] {
    match kind {
        LobsterEvent::Submit => &[(b'A', false)],
        LobsterEvent::Cancel | LobsterEvent::Delete => &[(b'C', false)],
        LobsterEvent::Execute => &[(b'T', true), (b'F', false)],
        _ => &[],
    }
}

fn dbn_date(path: &Path, d: NaiveDate) -> Result<time::Date, ReplayError> {
    let month = time::Month::try_from(d.month() as u8).map_err(|e| refused(path, e))?;
    time::Date::from_calendar_date(d.year(), month, d.day() as u8).map_err(|e| refused(path, e))
}

/// A file's metadata: `symbol` mapped to instrument 1 on `date`, the
/// records of `schema`, starting at New York's midnight.
fn metadata_for(
    path: &Path,
    symbol: &str,
    date: NaiveDate,
    schema: Schema,
) -> Result<dbn::Metadata, ReplayError> {
    let midnight = chrono_tz::America::New_York
        .from_local_datetime(&date.and_time(chrono::NaiveTime::MIN))
        .earliest()
        .ok_or_else(|| refused(path, format!("{date} has no New York midnight")))?;
    let start = midnight.timestamp_nanos_opt().unwrap_or(0).max(0) as u64;
    Ok(dbn::Metadata::builder()
        .dataset("SERL.SIM")
        .schema(Some(schema))
        .start(start)
        .stype_in(Some(dbn::SType::RawSymbol))
        .stype_out(dbn::SType::InstrumentId)
        .symbols(vec![symbol.to_string()])
        .mappings(vec![dbn::SymbolMapping {
            raw_symbol: symbol.to_string(),
            intervals: vec![dbn::MappingInterval {
                start_date: dbn_date(path, date)?,
                end_date: dbn_date(path, date.succ_opt().unwrap_or(date))?,
                symbol: "1".to_string(),
            }],
        }])
        .build())
}

/// Writes `messages` (one symbol's day of LOBSTER rows, on `date` in New
/// York) as a DBN MBO file at `path`, `symbol` mapped to instrument 1: a
/// submission is an Add, a cancel or deletion a Cancel of its size, an
/// execution a Trade of the aggressor's side then the resting order's
/// Fill. Hidden executions, crosses and halts have no MBO record and are
/// left out. Returns the records written.
pub fn write_mbo(
    path: &Path,
    symbol: &str,
    date: NaiveDate,
    messages: &[MessageRow],
) -> Result<u64, ReplayError> {
    let (mut enc, base_ns) = encoder_for(path, symbol, date, Schema::Mbo)?;
    let mut written = 0u64;
    for (sequence, m) in messages.iter().enumerate() {
        let records = records_of(m.kind);
        for (k, &(action, aggressor)) in records.iter().enumerate() {
            let resting = if m.direction == 1 { b'B' } else { b'A' };
            let side = match (aggressor, resting) {
                (false, s) => s,
                (true, b'B') => b'A',
                (true, _) => b'B',
            };
            let ts = timestamp(base_ns, m);
            // The message's last record ends its event, as Databento marks
            // it: the book is whole after it.
            let flags = if k + 1 == records.len() {
                dbn::flags::LAST
            } else {
                0
            };
            let mut r = MboMsg {
                hd: dbn::RecordHeader::new::<MboMsg>(dbn::rtype::MBO, 0, 1, ts),
                order_id: if aggressor { 0 } else { m.id },
                price: m.price * PRICE_DIV,
                size: m.size.clamp(0, i64::from(u32::MAX)) as u32,
                flags: flags.into(),
                ts_recv: ts,
                sequence: sequence as u32,
                ..MboMsg::default()
            };
            r.action = action as std::ffi::c_char;
            r.side = side as std::ffi::c_char;
            enc.encode_record(&r)
                .map_err(|e| refused(path, format!("record {}: {e}", written + 1)))?;
            written += 1;
        }
    }
    enc.flush()
        .map_err(|e| refused(path, format!("flushing it: {e}")))?;
    Ok(written)
}

/// A new DBN file of `schema` at `path` with [`metadata_for`]'s metadata
/// written, and its start (the day's New York midnight, UTC nanoseconds).
pub(super) fn encoder_for(
    path: &Path,
    symbol: &str,
    date: NaiveDate,
    schema: Schema,
) -> Result<(DbnEncoder<std::io::BufWriter<std::fs::File>>, u64), ReplayError> {
    let metadata = metadata_for(path, symbol, date, schema)?;
    let file =
        std::fs::File::create(path).map_err(|e| refused(path, format!("creating it: {e}")))?;
    let enc = DbnEncoder::new(std::io::BufWriter::new(file), &metadata)
        .map_err(|e| refused(path, format!("writing its metadata: {e}")))?;
    Ok((enc, metadata.start))
}

/// A message's time as UTC nanoseconds after `base_ns` (the day's New
/// York midnight).
pub(super) fn timestamp(base_ns: u64, m: &MessageRow) -> u64 {
    base_ns + (m.time * 1e9).round().max(0.0) as u64
}

/// What `serl lob export --dbn` wrote, and how the file's book, read back
/// through the engine, compares with the day's after every message.
#[derive(Debug, Clone, Serialize)]
pub struct MboExport {
    /// DBN records written.
    pub records: u64,
    /// The day's messages.
    pub messages: usize,
    /// Messages with no MBO record (hidden executions, crosses, halts);
    /// none of them moves the visible book.
    pub left_out: usize,
    /// Messages about orders the day never added (LOBSTER's anonymous
    /// liquidity: resting before the file starts, or deeper than its
    /// levels). An MBO file cannot hold such an order, so the book read
    /// back lacks it and its rows may differ.
    pub never_added: usize,
    /// Levels a side compared (the day's own).
    pub levels: usize,
    /// Rows where a compared level differs.
    pub mismatched_rows: usize,
    /// The first such row's message (1-based, as a message file's line).
    pub first_mismatch: Option<usize>,
}

/// Writes the day (`messages` with the book `rows` after each) as DBN MBO
/// at `path` with [`write_mbo`], reads it back with
/// [`read_mbo`](super::read_mbo), and compares the two books row by row
/// at the day's depth.
pub fn export_mbo(
    path: &Path,
    symbol: &str,
    date: NaiveDate,
    messages: &[MessageRow],
    rows: &BookRows,
) -> Result<MboExport, ReplayError> {
    let records = write_mbo(path, symbol, date, messages)?;
    let levels = rows.levels();
    let (_, back) = read_mbo(path, symbol, levels)?;
    let mut added = FxHashSet::default();
    let (mut left_out, mut never_added, mut mismatched_rows) = (0, 0, 0);
    let (mut first_mismatch, mut next) = (None, 0);
    for (i, m) in messages.iter().enumerate() {
        if records_of(m.kind).is_empty() {
            left_out += 1;
            continue;
        }
        if m.kind == LobsterEvent::Submit {
            added.insert(m.id);
        } else if !added.contains(&m.id) {
            never_added += 1;
        }
        if next < back.len() && back.row(next) != rows.row(i) {
            mismatched_rows += 1;
            first_mismatch.get_or_insert(i + 1);
        }
        next += 1;
    }
    if next != back.len() {
        return Err(refused(
            path,
            format!(
                "read back {} messages, {next} written: the file does not hold the day",
                back.len()
            ),
        ));
    }
    Ok(MboExport {
        records,
        messages: messages.len(),
        left_out,
        never_added,
        levels,
        mismatched_rows,
        first_mismatch,
    })
}

/// `n` messages of the engine's synthetic stream from 09:30, four a
/// second, recorded at 64 levels, deep enough to see every level: the
/// recording is the whole book, as an MBO file is.
impl MboExport {
    /// The book read back matched the day's at every row, or the day
    /// touched orders it never added (which an MBO file cannot hold), so
    /// differences were expected.
    pub fn as_expected(&self) -> bool {
        self.mismatched_rows == 0 || self.never_added > 0
    }
}

/// What was read back, as `serl lob export` prints it (after the line
/// naming the file written).
impl std::fmt::Display for MboExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "read back  the book at {} levels after every message",
            self.levels
        )?;
        writeln!(f, "mismatched rows  {}", self.mismatched_rows)?;
        if let Some(line) = self.first_mismatch {
            writeln!(f, "  first at message {line}")?;
        }
        if self.never_added > 0 {
            writeln!(
                f,
                "never added  {} messages are about orders the day never added (anonymous liquidity an MBO file cannot hold)",
                self.never_added
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(super) fn whole_synthetic_day(n: usize, seed: u64) -> (Vec<MessageRow>, BookRows) {
    use crate::{LobsterRecorder, OrderBook, Side};
    let mut book = OrderBook::default();
    let mut rec = LobsterRecorder::new(64, 1);
    for (i, m) in crate::message_stream(n, seed).iter().enumerate() {
        rec.at(34_200.0 + i as f64 * 0.25);
        let _ = book.apply(m, &mut rec);
        assert!(book.level_count(Side::Bid).max(book.level_count(Side::Ask)) <= 64);
    }
    rec.into_rows()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mbo_symbols;

    /// A day of the engine's synthetic order flow, recorded whole as
    /// LOBSTER rows, written as DBN MBO and read back: the same messages,
    /// and every row of the book the same as the recorder's (0
    /// mismatches).
    #[test]
    fn a_day_written_as_mbo_reads_back_with_the_same_book_after_every_message() {
        let (messages, rows) = whole_synthetic_day(4_000, 11);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("day.mbo.dbn");
        let date = chrono::NaiveDate::from_ymd_opt(2018, 3, 12).unwrap();
        let written = write_mbo(&path, "SYN", date, &messages).unwrap();
        assert!(written as usize >= messages.len());
        assert_eq!(mbo_symbols(&path).unwrap(), ["SYN"]);
        let (read, book_rows) = read_mbo(&path, "syn", 10).unwrap();
        assert_eq!(read.len(), messages.len());
        for (i, (a, b)) in read.iter().zip(&messages).enumerate() {
            assert_eq!(
                (a.kind, a.id, a.size, a.price, a.direction),
                (b.kind, b.id, b.size, b.price, b.direction),
                "message {i}"
            );
            assert!(
                (a.time - b.time).abs() < 1e-6,
                "message {i}: {} against {}",
                a.time,
                b.time
            );
        }
        let mismatches = (0..rows.len())
            .filter(|&i| book_rows.row(i) != &rows.row(i)[..40])
            .count();
        assert_eq!(mismatches, 0);
    }

    /// The export's own check: a whole-book day reads back with no
    /// mismatched row; a book row changed behind its message is found.
    #[test]
    fn the_export_compares_every_row_and_names_the_first_that_differs() {
        let mut book = crate::OrderBook::default();
        let mut rec = crate::LobsterRecorder::new(5, 1);
        for (i, m) in crate::message_stream(2_000, 5).iter().enumerate() {
            rec.at(34_200.0 + i as f64);
            let _ = book.apply(m, &mut rec);
        }
        let (messages, rows) = rec.into_rows();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("day.mbo.dbn");
        let date = NaiveDate::from_ymd_opt(2012, 6, 21).unwrap();
        let report = export_mbo(&path, "SYN", date, &messages, &rows).unwrap();
        assert_eq!(
            (report.mismatched_rows, report.never_added, report.levels),
            (0, 0, 5)
        );
        assert_eq!(report.messages, messages.len());

        let mut values: Vec<i64> = (0..rows.len()).flat_map(|i| rows.row(i).to_vec()).collect();
        values[20 * 300 + 1] += 1; // the ask size after message 301
        let changed = BookRows::from_values(5, values);
        let report = export_mbo(&path, "SYN", date, &messages, &changed).unwrap();
        assert_eq!(
            (report.mismatched_rows, report.first_mismatch),
            (1, Some(301))
        );
    }
}
