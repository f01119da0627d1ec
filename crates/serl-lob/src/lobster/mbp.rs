//! Databento's market-by-price books (`mbp-1`, `mbp-10`) checked against
//! the engine's book replayed from the MBO file of the same symbol and
//! feed (`serl lob mbp`), and a day's book written as MBP beside its MBO
//! export (`serl lob export --mbp`).
//!
//! An MBP record and the MBO records of the same event share the receipt
//! time and the sequence number, so each MBP record is compared with the
//! engine's book after the last MBO record at or before its
//! `(ts_recv, sequence)`: level by level, price and size on each side.
//! Order counts are not compared (the engine's levels hold shares, and a
//! LOBSTER day does not carry the count).

use std::path::Path;

use chrono::NaiveDate;
use dbn::decode::{DbnMetadata, DecodeRecord, DynDecoder};
use dbn::encode::EncodeRecord;
use dbn::symbol_map::SymbolIndex;
use dbn::{BidAskPair, Mbp10Msg, Mbp1Msg, Schema, VersionUpgradePolicy, UNDEF_PRICE};
use serde::Serialize;

use super::mbo::{book_rows, refused, replay_symbols, Orders, PRICE_DIV};
use super::mbo_export::{encoder_for, records_of, timestamp};
use super::messages::MessageRow;
use super::orderbook::BookRows;
use super::ReplayError;

/// LOBSTER's empty ask and bid prices.
const NO_ASK: i64 = 9_999_999_999;
const NO_BID: i64 = -9_999_999_999;

/// How an MBP file's books compare with the engine's, replayed from MBO.
#[derive(Debug, Clone, Serialize)]
pub struct MbpCheck {
    /// The symbol compared.
    pub symbol: String,
    /// Levels an MBP record holds (1 or 10).
    pub depth: usize,
    /// The symbol's MBP records.
    pub records: u64,
    /// Records before the first MBO record, which no replayed book
    /// precedes; not compared.
    pub before_mbo: u64,
    /// Records compared.
    pub compared: u64,
    /// Records where a level differs.
    pub mismatched: u64,
    /// The first of them.
    pub first_mismatch: Option<MbpMismatch>,
    /// MBO records about orders the file never added (orders resting
    /// before it starts): while there are any, the replayed book lacks
    /// them and cannot be whole.
    pub never_added: u64,
}

/// One level that differs.
#[derive(Debug, Clone, Serialize)]
pub struct MbpMismatch {
    /// The MBP record's place in its file, 1-based.
    pub record: u64,
    /// Its sequence number.
    pub sequence: u32,
    /// `"bid"` or `"ask"`.
    pub side: &'static str,
    /// The level, 1-based.
    pub level: usize,
    /// The MBP record's (price, size), LOBSTER price units.
    pub mbp: (i64, i64),
    /// The engine's.
    pub engine: (i64, i64),
}

/// One MBP record as compared: its place, key and levels.
struct MbpBook {
    /// Its place in the file, 1-based.
    record: u64,
    key: (u64, u32),
    levels: Vec<BidAskPair>,
}

/// `symbol`'s MBP records in `path` (mbp-1 or mbp-10) and their depth.
fn read_mbp(path: &Path, symbol: &str) -> Result<(usize, Vec<MbpBook>), ReplayError> {
    let mut dec = DynDecoder::from_file(path, VersionUpgradePolicy::UpgradeToV3)
        .map_err(|e| refused(path, format!("not a readable DBN file: {e}")))?;
    let depth = match dec.metadata().schema {
        Some(Schema::Mbp1) => 1,
        Some(Schema::Mbp10) => 10,
        other => {
            return Err(refused(
                path,
                format!(
                    "DBN schema {} is not market by price (mbp-1, mbp-10)",
                    other.map_or("mixed".to_string(), |s| s.to_string())
                ),
            ))
        }
    };
    let map = dec
        .metadata()
        .symbol_map()
        .map_err(|e| refused(path, format!("its symbology mappings: {e}")))?;
    let books = match depth {
        1 => books_of::<Mbp1Msg>(path, &mut dec, &map, symbol)?,
        _ => books_of::<Mbp10Msg>(path, &mut dec, &map, symbol)?,
    };
    Ok((depth, books))
}

/// An MBP record's key and levels, whatever its depth.
trait MbpRecord: dbn::HasRType + dbn::Record<Header = dbn::RecordHeader> {
    fn book(&self) -> (u64, u32, &[BidAskPair]);
}

impl MbpRecord for Mbp1Msg {
    fn book(&self) -> (u64, u32, &[BidAskPair]) {
        (self.ts_recv, self.sequence, &self.levels)
    }
}

impl MbpRecord for Mbp10Msg {
    fn book(&self) -> (u64, u32, &[BidAskPair]) {
        (self.ts_recv, self.sequence, &self.levels)
    }
}

/// `symbol`'s books among the records of type `T` that `dec` holds.
fn books_of<T: MbpRecord>(
    path: &Path,
    dec: &mut impl DecodeRecord,
    map: &dbn::TsSymbolMap,
    symbol: &str,
) -> Result<Vec<MbpBook>, ReplayError> {
    let mut books = Vec::new();
    let mut record = 0u64;
    while let Some(r) = dec
        .decode_record::<T>()
        .map_err(|e| refused(path, format!("record {}: {e}", record + 1)))?
    {
        record += 1;
        if map
            .get_for_rec(r)
            .is_some_and(|s| s.eq_ignore_ascii_case(symbol))
        {
            let (ts_recv, sequence, levels) = r.book();
            books.push(MbpBook {
                record,
                key: (ts_recv, sequence),
                levels: levels.to_vec(),
            });
        }
    }
    Ok(books)
}

/// After an MBO record: its `(ts_recv, sequence)` and the messages so far.
type AfterRecord = (u64, u32, usize);

/// The MBO file's messages for `symbol`, with where each record left them,
/// and its records about orders never added.
fn replay_keys(path: &Path, symbol: &str) -> Result<(Orders, Vec<AfterRecord>), ReplayError> {
    let mut keys = Vec::new();
    let mut replayed = replay_symbols(path, &[symbol.to_string()], |_, rec, orders| {
        keys.push((rec.ts_recv, rec.sequence, orders.rows.len()));
    })?;
    Ok((replayed.remove(0)?, keys))
}

/// Compares every MBP record of `symbol` in `mbp` with the engine's book
/// replayed from `mbo` (module docs).
pub fn check_mbp(mbo: &Path, mbp: &Path, symbol: &str) -> Result<MbpCheck, ReplayError> {
    let (depth, books) = read_mbp(mbp, symbol)?;
    let (orders, keys) = replay_keys(mbo, symbol)?;
    let engine = book_rows(&orders.rows, depth);
    let mut check = MbpCheck {
        symbol: symbol.to_string(),
        depth,
        records: books.len() as u64,
        before_mbo: 0,
        compared: 0,
        mismatched: 0,
        first_mismatch: None,
        never_added: orders.unknown,
    };
    let mut next = 0;
    for book in &books {
        while next < keys.len() && (keys[next].0, keys[next].1) <= book.key {
            next += 1;
        }
        if next == 0 {
            check.before_mbo += 1;
            continue;
        }
        check.compared += 1;
        let rows = keys[next - 1].2;
        let row = (rows > 0).then(|| engine.row(rows - 1));
        if let Some(m) = first_difference(&book.levels, row, (book.record, book.key.1)) {
            check.mismatched += 1;
            check.first_mismatch.get_or_insert(m);
        }
    }
    Ok(check)
}

/// The first level where the MBP record and the engine's LOBSTER row
/// (none: an empty book) differ.
fn first_difference(
    levels: &[BidAskPair],
    row: Option<&[i64]>,
    (record, sequence): (u64, u32),
) -> Option<MbpMismatch> {
    let px = |p: i64, none: i64| {
        if p == UNDEF_PRICE {
            none
        } else {
            p / PRICE_DIV
        }
    };
    for (k, l) in levels.iter().enumerate() {
        let level =
            |j: usize, none: i64| row.map_or((none, 0), |r| (r[4 * k + j], r[4 * k + j + 1]));
        let sides = [
            (
                "ask",
                (px(l.ask_px, NO_ASK), i64::from(l.ask_sz)),
                level(0, NO_ASK),
            ),
            (
                "bid",
                (px(l.bid_px, NO_BID), i64::from(l.bid_sz)),
                level(2, NO_BID),
            ),
        ];
        for (side, mbp, engine) in sides {
            // An empty level is empty whatever price stands for it.
            let empty = |(p, s): (i64, i64), none: i64| s == 0 || p == none;
            let none = if side == "ask" { NO_ASK } else { NO_BID };
            if (empty(mbp, none) && empty(engine, none)) || mbp == engine {
                continue;
            }
            return Some(MbpMismatch {
                record,
                sequence,
                side,
                level: k + 1,
                mbp,
                engine,
            });
        }
    }
    None
}

/// Writes the day's book (`rows` after each of `messages`) as DBN MBP at
/// `path`, `depth` levels (1: `mbp-1`, else `mbp-10`): a record per
/// message that has MBO records, with the time and sequence number
/// [`write_mbo`](super::write_mbo) gives them. Returns the records
/// written.
pub fn write_mbp(
    path: &Path,
    symbol: &str,
    date: NaiveDate,
    messages: &[MessageRow],
    rows: &BookRows,
    depth: usize,
) -> Result<u64, ReplayError> {
    let schema = if depth == 1 {
        Schema::Mbp1
    } else {
        Schema::Mbp10
    };
    let (mut enc, base_ns) = encoder_for(path, symbol, date, schema)?;
    let mut written = 0u64;
    for (sequence, m) in messages.iter().enumerate() {
        if records_of(m.kind).is_empty() {
            continue;
        }
        let levels = levels_of(rows.row(sequence), rows.levels());
        let ts = timestamp(base_ns, m);
        let result = if depth == 1 {
            let r = Mbp1Msg {
                hd: dbn::RecordHeader::new::<Mbp1Msg>(dbn::rtype::MBP_1, 0, 1, ts),
                price: m.price * PRICE_DIV,
                size: m.size.clamp(0, i64::from(u32::MAX)) as u32,
                flags: dbn::flags::LAST.into(),
                ts_recv: ts,
                sequence: sequence as u32,
                levels: [levels[0].clone()],
                ..Mbp1Msg::default()
            };
            enc.encode_record(&r)
        } else {
            let r = Mbp10Msg {
                hd: dbn::RecordHeader::new::<Mbp10Msg>(dbn::rtype::MBP_10, 0, 1, ts),
                price: m.price * PRICE_DIV,
                size: m.size.clamp(0, i64::from(u32::MAX)) as u32,
                flags: dbn::flags::LAST.into(),
                ts_recv: ts,
                sequence: sequence as u32,
                levels,
                ..Mbp10Msg::default()
            };
            enc.encode_record(&r)
        };
        result.map_err(|e| refused(path, format!("record {}: {e}", written + 1)))?;
        written += 1;
    }
    enc.flush()
        .map_err(|e| refused(path, format!("flushing it: {e}")))?;
    Ok(written)
}

/// A LOBSTER row's first ten levels as DBN's pairs (empty beyond the row's
/// depth or where a side is empty).
fn levels_of(row: &[i64], depth: usize) -> [BidAskPair; 10] {
    let mut out: [BidAskPair; 10] = std::array::from_fn(|_| BidAskPair::default());
    for (k, pair) in out.iter_mut().enumerate().take(depth) {
        let (ask, ask_sz, bid, bid_sz) =
            (row[4 * k], row[4 * k + 1], row[4 * k + 2], row[4 * k + 3]);
        let price = |p: i64, sz: i64, none: i64| {
            if sz == 0 || p == none {
                UNDEF_PRICE
            } else {
                p * PRICE_DIV
            }
        };
        pair.ask_px = price(ask, ask_sz, NO_ASK);
        pair.bid_px = price(bid, bid_sz, NO_BID);
        pair.ask_sz = ask_sz.clamp(0, i64::from(u32::MAX)) as u32;
        pair.bid_sz = bid_sz.clamp(0, i64::from(u32::MAX)) as u32;
    }
    out
}

impl MbpCheck {
    /// No record differs, or the replayed book could not be whole (an
    /// order rested before the MBO file starts), so differences were
    /// expected.
    pub fn as_expected(&self) -> bool {
        self.mismatched == 0 || self.never_added > 0
    }
}

/// The comparison's lines, as `serl lob mbp` and `lob export --mbp`
/// print them.
impl std::fmt::Display for MbpCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "compared   {} MBP records at {} level(s) a side ({} before the first MBO record)",
            self.compared, self.depth, self.before_mbo
        )?;
        writeln!(f, "mismatched records  {}", self.mismatched)?;
        if let Some(m) = &self.first_mismatch {
            writeln!(
                f,
                "  first at record {} (sequence {}): {} level {}: MBP ({}, {}), engine ({}, {})",
                m.record, m.sequence, m.side, m.level, m.mbp.0, m.mbp.1, m.engine.0, m.engine.1
            )?;
        }
        if self.never_added > 0 {
            writeln!(
                f,
                "never added  {} MBO records are about orders resting before the file starts: the replayed book cannot be whole, so differences are expected",
                self.never_added
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::write_mbo;
    use dbn::decode::DecodeRecordRef;

    /// A day of the engine's synthetic flow recorded whole, as MBO.
    fn synthetic_day(dir: &Path) -> (std::path::PathBuf, Vec<MessageRow>, BookRows, NaiveDate) {
        let (messages, rows) = super::super::mbo_export::whole_synthetic_day(3_000, 5);
        let date = NaiveDate::from_ymd_opt(2018, 3, 12).unwrap();
        let mbo = dir.join("day.mbo.dbn");
        write_mbo(&mbo, "SYN", date, &messages).unwrap();
        (mbo, messages, rows, date)
    }

    /// The recorder's book written as MBP-10 and MBP-1 matches the
    /// engine's book replayed from the MBO file at every record; a level
    /// changed in the MBP file is found and named.
    #[test]
    fn a_days_mbp_matches_the_book_replayed_from_its_mbo_and_a_changed_level_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let (mbo, messages, rows, date) = synthetic_day(dir.path());
        for depth in [10, 1] {
            let mbp = dir.path().join(format!("day.mbp-{depth}.dbn"));
            let written = write_mbp(&mbp, "SYN", date, &messages, &rows, depth).unwrap();
            let check = check_mbp(&mbo, &mbp, "SYN").unwrap();
            assert_eq!((check.depth, check.records), (depth, written));
            assert_eq!(check.compared, written, "every record has a book before it");
            assert_eq!((check.mismatched, check.never_added), (0, 0), "{check:?}");
        }
        // One share more at message 100's best ask.
        let mut values: Vec<i64> = (0..rows.len()).flat_map(|i| rows.row(i).to_vec()).collect();
        values[100 * 4 * rows.levels() + 1] += 1;
        let changed = BookRows::from_values(rows.levels(), values);
        let mbp = dir.path().join("changed.mbp-10.dbn");
        write_mbp(&mbp, "SYN", date, &messages, &changed, 10).unwrap();
        let check = check_mbp(&mbo, &mbp, "SYN").unwrap();
        assert_eq!(check.mismatched, 1, "{check:?}");
        let m = check.first_mismatch.unwrap();
        assert_eq!(
            (m.side, m.level, m.mbp.1, m.engine.1 + 1),
            ("ask", 1, m.engine.1 + 1, m.mbp.1)
        );
    }

    fn sample(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../serl-data/tests/dbn")
            .join(name)
    }

    /// Databento's samples of one ESH1 feed: their MBO holds two cancels
    /// of orders resting before it starts, so the replayed book cannot be
    /// whole, and the check says so rather than passing or failing it.
    #[test]
    fn databentos_samples_are_compared_and_their_partial_book_is_said() {
        for name in ["mbp/test_data.mbp-10.dbn", "mbp/test_data.mbp-1.dbn"] {
            let check = check_mbp(&sample("mbo/test_data.mbo.dbn"), &sample(name), "ESH1").unwrap();
            let mut dec =
                DynDecoder::from_file(sample(name), VersionUpgradePolicy::UpgradeToV3).unwrap();
            let mut records = 0;
            while dec.decode_record_ref().unwrap().is_some() {
                records += 1;
            }
            assert_eq!(check.records, records, "{name}: every record read");
            assert_eq!(check.never_added, 2, "{name}: {check:?}");
            assert_eq!(check.compared + check.before_mbo, check.records);
        }
        let e = check_mbp(
            &sample("mbo/test_data.mbo.dbn"),
            &sample("bars/test_data.ohlcv-1m.dbn"),
            "ESH1",
        )
        .unwrap_err();
        assert!(e.to_string().contains("not market by price"), "{e}");
    }
}
