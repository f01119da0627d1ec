//! Databento's DBN MBO (market by order) as message data: each symbol's
//! order-by-order records, plain or zstd, read through Databento's own
//! `dbn` crate, become LOBSTER message rows, and the book after each is
//! the engine's own (the records are the whole book, so there is nothing
//! anonymous to reconcile). Everything that reads LOBSTER days reads them
//! (`LobsterDayFiles::read`): the queue venue, the dynamic market's order
//! flow, `serl simulate realism`, `fills` and `calibrate`.
//!
//! - **Add** is a submission; **Cancel** a partial cancel, or a deletion
//!   when it takes what is left; **Modify** a partial cancel when it only
//!   shrinks the order at its price (which keeps its place in the queue),
//!   else a deletion and a new submission under the same id (a new place);
//!   **Fill** an execution of the resting order, at its price; **Clear**
//!   deletes every resting order. **Trade** records (the aggressor's side
//!   of the fills that follow) are left out, as LOBSTER has no such row.
//! - Times are the matching engine's (`ts_event`), in seconds after
//!   midnight, New York time; prices are DBN's 1e-9 fixed point in
//!   LOBSTER's units (dollars × 10,000).
//! - A record about an order the file never added (a file that starts
//!   after the open without a snapshot) keeps its row, as the record says,
//!   and leaves the book alone (LOBSTER's anonymous liquidity); a modify
//!   of one places it where it now rests.
//! - An add resting at or through the other side's best price crosses the
//!   file's book, which a book cannot hold: the engine matches it, and the
//!   day says where ([`CrossedBook`], a warning, not a refusal).

use std::path::Path;

use dbn::decode::{DbnMetadata, DecodeRecord, DynDecoder};
use dbn::symbol_map::SymbolIndex;
use dbn::{MboMsg, Schema, VersionUpgradePolicy};
use rustc_hash::FxHashMap;

use super::messages::{LobsterEvent, MessageRow};
use super::orderbook::BookRows;
use super::ReplayError;
use crate::{NewOrder, OrderBook, OrderKind, SelfTradePolicy, Side};

/// DBN's price units per LOBSTER price unit (1e-9 against 1e-4 dollars).
pub(super) const PRICE_DIV: i64 = 100_000;

/// Whether `path` names a DBN file (`.dbn` or `.dbn.zst`).
pub fn is_dbn(path: &Path) -> bool {
    let name = path.to_string_lossy().to_lowercase();
    name.ends_with(".dbn") || name.ends_with(".dbn.zst")
}

pub(super) fn refused(path: &Path, why: impl std::fmt::Display) -> ReplayError {
    ReplayError::Samples {
        message: format!("{}: {why}", path.display()),
    }
}

fn decoder(
    path: &Path,
) -> Result<DynDecoder<'static, std::io::BufReader<std::fs::File>>, ReplayError> {
    let dec = DynDecoder::from_file(path, VersionUpgradePolicy::UpgradeToV3)
        .map_err(|e| refused(path, format!("not a readable DBN file: {e}")))?;
    match dec.metadata().schema {
        Some(Schema::Mbo) => Ok(dec),
        other => Err(refused(
            path,
            format!(
                "DBN schema {} is not order-by-order messages (mbo)",
                other.map_or("mixed".to_string(), |s| s.to_string())
            ),
        )),
    }
}

/// The symbols an MBO file holds, from its symbology mappings.
pub fn mbo_symbols(path: &Path) -> Result<Vec<String>, ReplayError> {
    let dec = decoder(path)?;
    let map = dec
        .metadata()
        .symbol_map()
        .map_err(|e| refused(path, format!("its symbology mappings: {e}")))?;
    let mut symbols: Vec<String> = map
        .inner()
        .values()
        .flat_map(|m| m.intervals().iter().map(|i| i.symbol.clone()))
        .collect();
    symbols.sort();
    symbols.dedup();
    if symbols.is_empty() {
        return Err(refused(path, "no symbology mappings name its instruments"));
    }
    Ok(symbols)
}

/// `symbol`'s messages in the MBO file `path`, and the book of `levels`
/// levels after each.
pub fn read_mbo(
    path: &Path,
    symbol: &str,
    levels: usize,
) -> Result<(Vec<MessageRow>, BookRows), ReplayError> {
    let messages = read_mbo_day(path, symbol)?.messages;
    let rows = book_rows(&messages, levels);
    Ok((messages, rows))
}

/// `symbol`'s messages in the MBO file `path`: [`read_mbo_messages`] of
/// one symbol.
pub(super) fn read_mbo_day(path: &Path, symbol: &str) -> Result<MboMessages, ReplayError> {
    read_mbo_messages(path, &[symbol.to_string()])?.remove(0)
}

/// One symbol's messages from a DBN MBO file, each with the record it
/// came from (so what the book makes of a message can name its record).
#[derive(Debug, Clone, Default)]
pub struct MboMessages {
    /// The messages, in the file's order.
    pub messages: Vec<MessageRow>,
    /// The 1-based index in the file of each message's record.
    records: Vec<u32>,
}

impl MboMessages {
    /// The 1-based index in the file of message `i`'s record (0 for a
    /// message it did not read).
    pub fn record(&self, i: usize) -> u64 {
        self.records.get(i).map_or(0, |&r| u64::from(r))
    }

    /// The book of `levels` levels after each message, from the engine,
    /// and the adds that rested through the other side's best price.
    pub fn book(&self, levels: usize) -> (BookRows, Option<CrossedBook>) {
        let (rows, crossing) = replay_book(&self.messages, levels);
        let crossed = crossing.map(|(i, adds, opposite)| {
            let m = &self.messages[i];
            CrossedBook {
                message: i,
                record: self.record(i),
                time: m.time,
                direction: m.direction,
                price: m.price,
                opposite,
                adds,
            }
        });
        (rows, crossed)
    }
}

/// Where a DBN MBO day's book is crossed: an add resting at or through
/// the other side's best price. A book cannot hold that, so the engine
/// matched each such add against the orders it reached; the day is still
/// read (a day cut to *L* levels keeps orders whose cancels were deeper
/// and crosses through them), and the readers say so as a warning.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossedBook {
    /// The first such add: its index among the day's messages.
    pub message: usize,
    /// Its record: its 1-based index in the file.
    pub record: u64,
    /// Its time, in seconds after midnight, New York.
    pub time: f64,
    /// Its side: 1 a bid, -1 an ask.
    pub direction: i8,
    /// Its price, and the other side's best price it reached (LOBSTER's
    /// units, dollars × 10,000).
    pub price: i64,
    /// See `price`.
    pub opposite: i64,
    /// How many adds of the day did so.
    pub adds: u64,
}

impl std::fmt::Display for CrossedBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (side, other) = if self.direction == 1 {
            ("a bid", "ask")
        } else {
            ("an ask", "bid")
        };
        let secs = self.time.max(0.0);
        let (h, m) = ((secs / 3600.0) as u64, (secs / 60.0) as u64 % 60);
        write!(
            f,
            "record {}: the book is crossed: {side} added at {:.4} ({h:02}:{m:02}:{:09.6}) reaches the best {other} at {:.4}, and the engine matched it ({} such adds in the day)",
            self.record,
            self.price as f64 / 1e4,
            secs % 60.0,
            self.opposite as f64 / 1e4,
            self.adds
        )
    }
}

/// The messages of each of `symbols` in the MBO file `path`, from one
/// decoding pass over the file (a file of N instruments is read once, not
/// N times): an error for the whole file, or one per symbol (one with no
/// order message, or whose flow the engine cannot follow).
pub fn read_mbo_messages(
    path: &Path,
    symbols: &[String],
) -> Result<Vec<Result<MboMessages, ReplayError>>, ReplayError> {
    let replayed = replay_symbols(path, symbols, |_, _, _| {})?;
    Ok(replayed
        .into_iter()
        .map(|orders| {
            orders.map(|o| MboMessages {
                messages: o.rows,
                records: o.records,
            })
        })
        .collect())
}

/// Each of `symbols`' records in the MBO file `path` applied to its own
/// [`Orders`], in one decoding pass; `after` hears every record applied
/// (the symbol's place in `symbols`, the record, its orders now). An
/// error for the whole file, or one per symbol, as [`read_mbo_messages`]
/// says.
pub(super) fn replay_symbols(
    path: &Path,
    symbols: &[String],
    mut after: impl FnMut(usize, &MboMsg, &Orders),
) -> Result<Vec<Result<Orders, ReplayError>>, ReplayError> {
    let mut dec = decoder(path)?;
    let map = dec
        .metadata()
        .symbol_map()
        .map_err(|e| refused(path, format!("its symbology mappings: {e}")))?;
    let wanted: FxHashMap<String, usize> = symbols
        .iter()
        .enumerate()
        .map(|(k, s)| (s.to_ascii_uppercase(), k))
        .collect();
    // Instrument id to (UTC day, which wanted symbol): a mapping holds for
    // a day, so it is looked up once a day per instrument.
    let mut known: FxHashMap<u32, (u64, Option<usize>)> = FxHashMap::default();
    let mut orders: Vec<Result<Orders, String>> =
        symbols.iter().map(|_| Ok(Orders::default())).collect();
    let (mut record, mut received) = (0u64, 0u64);
    while let Some(rec) = dec
        .decode_record::<MboMsg>()
        .map_err(|e| refused(path, format!("record {}: {e}", record + 1)))?
    {
        record += 1;
        in_order(path, record, &mut received, rec.ts_recv)?;
        // The day the mappings index a record by (an MBO record's receipt).
        let day = dbn::Record::raw_index_ts(rec) / NANOS_PER_DAY;
        let k = match known.get(&rec.hd.instrument_id) {
            Some(&(d, k)) if d == day => k,
            _ => {
                let k = map
                    .get_for_rec(rec)
                    .and_then(|s| wanted.get(&s.to_ascii_uppercase()).copied());
                known.insert(rec.hd.instrument_id, (day, k));
                k
            }
        };
        // A symbol whose flow fails keeps its first error; the others go on.
        let Some(k) = k else { continue };
        let Ok(o) = &mut orders[k] else { continue };
        match o.apply(rec) {
            Ok(()) => {
                // Records past u32's range name the last it holds.
                o.records
                    .resize(o.rows.len(), record.min(u64::from(u32::MAX)) as u32);
                after(k, rec, o)
            }
            Err(why) => orders[k] = Err(format!("record {record}: {why}")),
        }
    }
    Ok(orders
        .into_iter()
        .zip(symbols)
        .map(|(o, symbol)| match o {
            Ok(o) if o.rows.is_empty() => {
                Err(refused(path, format!("no order messages for {symbol}")))
            }
            Ok(o) => Ok(o),
            Err(why) => Err(refused(path, why)),
        })
        .collect())
}

const NANOS_PER_DAY: u64 = 86_400 * 1_000_000_000;

/// A file's records come in the order they were received (`ts_recv`, the
/// time DBN sorts and indexes them by): one received before the record
/// ahead of it is refused, named.
fn in_order(path: &Path, record: u64, received: &mut u64, ts_recv: u64) -> Result<(), ReplayError> {
    if ts_recv < *received {
        return Err(refused(
            path,
            format!(
                "record {record}: out of order: received at {ts_recv} ns, before the record ahead of it ({} ns)",
                *received
            ),
        ));
    }
    *received = ts_recv;
    Ok(())
}

/// The live orders of one symbol, and the rows written so far.
#[derive(Default)]
pub(super) struct Orders {
    /// Price (LOBSTER units), shares left, direction.
    live: FxHashMap<u64, (i64, i64, i8)>,
    pub(super) rows: Vec<MessageRow>,
    /// The record (1-based, in the file) of each row.
    records: Vec<u32>,
    /// Records about orders never added.
    pub(super) unknown: u64,
}

impl Orders {
    fn apply(&mut self, m: &MboMsg) -> Result<(), String> {
        let time = seconds_after_midnight(m.hd.ts_event)?;
        let price = m.price / PRICE_DIV;
        let size = i64::from(m.size);
        let row = |kind, id, size, price, direction| MessageRow {
            time,
            kind,
            id,
            size,
            price,
            direction,
        };
        // The record's order as a new submission where it says it rests.
        let submit = |direction| row(LobsterEvent::Submit, m.order_id, size, price, direction);
        match m.action as u8 {
            b'A' => {
                let direction = match m.side as u8 {
                    b'B' => 1,
                    b'A' => -1,
                    other => return Err(format!("an add on side `{}`", other as char)),
                };
                self.add(submit(direction));
            }
            b'C' | b'F' => {
                let Some(&(at, left, direction)) = self.live.get(&m.order_id) else {
                    // An order resting before the file starts: its row as
                    // the record says (the book has no such order to
                    // change, as LOBSTER's anonymous liquidity).
                    self.unknown += 1;
                    let kind = if m.action as u8 == b'F' {
                        LobsterEvent::Execute
                    } else {
                        LobsterEvent::Cancel
                    };
                    let direction = if m.side as u8 == b'B' { 1 } else { -1 };
                    self.rows
                        .push(row(kind, m.order_id, size, price, direction));
                    return Ok(());
                };
                let taken = size.min(left);
                let kind = match (m.action as u8, taken >= left) {
                    (b'F', _) => LobsterEvent::Execute,
                    (_, true) => LobsterEvent::Delete,
                    (_, false) => LobsterEvent::Cancel,
                };
                self.take(m.order_id, taken);
                self.rows.push(row(kind, m.order_id, taken, at, direction));
            }
            b'M' => {
                let Some(&(at, left, direction)) = self.live.get(&m.order_id) else {
                    // A modify of an order resting before the file starts
                    // tells where it rests now: from here on it is known.
                    self.unknown += 1;
                    let direction = if m.side as u8 == b'B' { 1 } else { -1 };
                    self.add(submit(direction));
                    return Ok(());
                };
                if price == at && size < left {
                    self.take(m.order_id, left - size);
                    self.rows.push(row(
                        LobsterEvent::Cancel,
                        m.order_id,
                        left - size,
                        at,
                        direction,
                    ));
                } else {
                    self.rows
                        .push(row(LobsterEvent::Delete, m.order_id, left, at, direction));
                    self.add(submit(direction));
                }
            }
            b'R' => {
                let mut ids: Vec<u64> = self.live.keys().copied().collect();
                ids.sort_unstable();
                for id in ids {
                    let (at, left, direction) = self.live[&id];
                    self.rows
                        .push(row(LobsterEvent::Delete, id, left, at, direction));
                }
                self.live.clear();
            }
            _ => {}
        }
        Ok(())
    }

    /// A live order from here on, and its submission's row.
    fn add(&mut self, submit: MessageRow) {
        self.live
            .insert(submit.id, (submit.price, submit.size, submit.direction));
        self.rows.push(submit);
    }

    fn take(&mut self, id: u64, shares: i64) {
        if let Some(o) = self.live.get_mut(&id) {
            o.1 -= shares;
            if o.1 <= 0 {
                self.live.remove(&id);
            }
        }
    }
}

/// UTC nanoseconds as seconds after midnight in New York.
fn seconds_after_midnight(ns: u64) -> Result<f64, String> {
    use chrono::{TimeZone, Timelike};
    let utc = chrono::Utc
        .timestamp_opt((ns / 1_000_000_000) as i64, (ns % 1_000_000_000) as u32)
        .single()
        .ok_or_else(|| format!("timestamp {ns} is out of range"))?;
    let local = utc.with_timezone(&chrono_tz::America::New_York);
    Ok(f64::from(local.num_seconds_from_midnight()) + f64::from(local.nanosecond()) / 1e9)
}

/// The book of `levels` levels after each message, from the engine (in
/// LOBSTER's price units, one per tick).
pub(super) fn book_rows(messages: &[MessageRow], levels: usize) -> BookRows {
    replay_book(messages, levels).0
}

/// [`book_rows`], and the adds that rested through the other side's best
/// price (the book crossed, so the engine matched them): the first one's
/// message, their count, and the price it reached.
fn replay_book(messages: &[MessageRow], levels: usize) -> (BookRows, Option<(usize, u64, i64)>) {
    let mut crossing: Option<(usize, u64, i64)> = None;
    let mut book = OrderBook::with_capacity(SelfTradePolicy::Allow, 1 << 16);
    let mut values = Vec::with_capacity(messages.len() * 4 * levels);
    for (i, m) in messages.iter().enumerate() {
        let side = if m.direction == 1 {
            Side::Bid
        } else {
            Side::Ask
        };
        let size = m.size.max(0) as u64;
        // Records the book would refuse (a second add of a live id, a
        // cancel of one gone) leave it as it was.
        let _ = match m.kind {
            LobsterEvent::Submit => {
                let opposite = book.best(side.opposite()).map_or(0, |l| l.price);
                book.submit(
                    NewOrder {
                        id: m.id,
                        owner: 1,
                        side,
                        kind: OrderKind::Limit { price: m.price },
                        qty: size,
                    },
                    &mut (),
                )
                .map(|report| {
                    if report.filled > 0 {
                        let (_, adds, _) = crossing.get_or_insert((i, 0, opposite));
                        *adds += 1;
                    }
                })
            }
            LobsterEvent::Cancel => book.reduce(m.id, size, &mut ()).map(|_| ()),
            LobsterEvent::Delete => book.cancel(m.id, &mut ()).map(|_| ()),
            LobsterEvent::Execute => book.execute(m.id, size, &mut ()).map(|_| ()),
            _ => Ok(()),
        };
        push_row(&book, levels, &mut values);
    }
    (BookRows::from_values(levels, values), crossing)
}

/// The book's top `levels` levels as a LOBSTER row: ask price, ask size,
/// bid price, bid size per level, an empty level at LOBSTER's placeholder
/// prices.
fn push_row(book: &OrderBook, levels: usize, out: &mut Vec<i64>) {
    let mut asks = book.levels(Side::Ask);
    let mut bids = book.levels(Side::Bid);
    for _ in 0..levels {
        match asks.next() {
            Some(l) => out.extend([l.price, l.qty as i64]),
            None => out.extend([9_999_999_999, 0]),
        }
        match bids.next() {
            Some(l) => out.extend([l.price, l.qty as i64]),
            None => out.extend([-9_999_999_999, 0]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../serl-data/tests/dbn/mbo/test_data.mbo.dbn")
    }

    /// Every record of Databento's sample (two cancels of orders resting
    /// before it starts), decoded by the crate itself, against the rows
    /// it became.
    #[test]
    fn the_sample_mbo_file_matches_the_crates_own_decoding_record_by_record() {
        let path = sample();
        let symbols = mbo_symbols(&path).unwrap();

        assert!(!symbols.is_empty());
        for symbol in &symbols {
            let (rows, book) = read_mbo(&path, symbol, 3).unwrap();
            assert_eq!(book.len(), rows.len(), "a book row per message");
            let mut dec = decoder(&path).unwrap();
            let map = dec.metadata().symbol_map().unwrap();
            let mut records = Vec::new();
            while let Some(r) = dec.decode_record::<MboMsg>().unwrap() {
                if map.get_for_rec(r).is_some_and(|s| s == symbol) && r.action as u8 != b'T' {
                    let time = seconds_after_midnight(r.hd.ts_event).unwrap();
                    records.push((r.order_id, r.price / PRICE_DIV, i64::from(r.size), time));
                }
            }
            assert!(!records.is_empty());
            let read: Vec<(u64, i64, i64, f64)> = rows
                .iter()
                .map(|m| (m.id, m.price, m.size, m.time))
                .collect();
            assert_eq!(read, records, "{symbol}");
        }
    }

    /// A record of `action` on `side`, `dt` ns after 09:30 in New York on
    /// 2018-06-21 (13:30 UTC).
    fn msg(action: u8, side: u8, id: u64, price: i64, size: u32, dt: u64) -> MboMsg {
        let mut m = MboMsg::default();
        m.hd.ts_event = 1_529_587_800_000_000_000 + dt;
        m.action = action as std::ffi::c_char;
        m.side = side as std::ffi::c_char;
        m.order_id = id;
        m.price = price * PRICE_DIV;
        m.size = size;
        m
    }

    /// An add, a partial cancel, a shrinking modify (same place), a
    /// growing one (a new place), a fill and a clear, as LOBSTER rows,
    /// and the book after each.
    #[test]
    fn each_action_becomes_its_lobster_rows_and_the_book_follows() {
        let mut o = Orders::default();
        for m in [
            msg(b'A', b'B', 1, 1_000_000, 300, 0),
            msg(b'A', b'B', 2, 1_000_000, 100, 1),
            msg(b'C', b'B', 1, 1_000_000, 100, 2),
            msg(b'M', b'B', 1, 1_000_000, 150, 3),
            msg(b'M', b'B', 2, 1_000_000, 400, 4),
            msg(b'F', b'B', 1, 1_000_000, 150, 5),
            msg(b'A', b'A', 3, 1_000_100, 50, 6),
            msg(b'R', b'N', 0, 0, 0, 7),
            msg(b'C', b'B', 9, 1_000_000, 10, 8),
            msg(b'M', b'A', 8, 1_000_200, 70, 9),
        ] {
            o.apply(&m).unwrap();
        }
        use LobsterEvent::*;
        let kinds: Vec<(LobsterEvent, u64, i64)> =
            o.rows.iter().map(|r| (r.kind, r.id, r.size)).collect();
        assert_eq!(
            kinds,
            [
                (Submit, 1, 300),
                (Submit, 2, 100),
                (Cancel, 1, 100),
                (Cancel, 1, 50),
                (Delete, 2, 100),
                (Submit, 2, 400),
                (Execute, 1, 150),
                (Submit, 3, 50),
                (Delete, 2, 400),
                (Delete, 3, 50),
                (Cancel, 9, 10),
                (Submit, 8, 70),
            ]
        );
        assert_eq!(o.unknown, 2, "a cancel and a modify of orders never added");
        assert!(
            (o.rows[0].time - 34_200.0).abs() < 1e-6,
            "{}",
            o.rows[0].time
        );
        let book = book_rows(&o.rows, 2);
        // After the fill: order 2's 400 alone at the bid (order 1 is gone).
        assert_eq!(&book.row(6)[..4], &[9_999_999_999, 0, 1_000_000, 400]);
        // After the clear: nothing, and the cancel of an order never
        // added changes nothing; the modify of one places it.
        assert_eq!(book.row(9)[1] + book.row(9)[3], 0);
        assert_eq!(book.row(10), book.row(9));
        assert_eq!(&book.row(11)[..2], &[1_000_200, 70]);
    }

    /// A record received before the one ahead of it is refused, named.
    #[test]
    fn a_record_out_of_order_is_refused_with_its_index() {
        let mut received = 0;
        let path = Path::new("day.mbo.dbn");
        assert!(in_order(path, 1, &mut received, 10).is_ok());
        assert!(in_order(path, 2, &mut received, 10).is_ok());
        let e = in_order(path, 3, &mut received, 9).unwrap_err().to_string();
        assert!(e.starts_with("day.mbo.dbn: record 3: out of order"), "{e}");
    }

    /// Two instruments interleaved in one file, as Databento writes a
    /// multi-symbol day: one decoding pass gives each its own day, the
    /// same as reading it alone, and `read_days` hands both out with books.
    #[test]
    fn a_file_of_two_symbols_is_read_in_one_pass_as_each_symbols_day() {
        use dbn::encode::{DbnEncoder, EncodeRecord};
        let day = time::Date::from_calendar_date(2018, time::Month::June, 21).unwrap();
        let mapping = |raw: &str, id: &str| dbn::SymbolMapping {
            raw_symbol: raw.into(),
            intervals: vec![dbn::MappingInterval {
                start_date: day,
                end_date: day.next_day().unwrap(),
                symbol: id.into(),
            }],
        };
        let meta = dbn::Metadata::builder()
            .dataset("SERL.TEST")
            .schema(Some(Schema::Mbo))
            .start(1_529_539_200_000_000_000) // 2018-06-21 00:00 UTC
            .stype_in(Some(dbn::SType::RawSymbol))
            .stype_out(dbn::SType::InstrumentId)
            .symbols(vec!["AAA".into(), "BBB".into()])
            .mappings(vec![mapping("AAA", "1"), mapping("BBB", "2")])
            .build();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("two.mbo.dbn");
        let file = std::fs::File::create(&path).unwrap();
        let mut enc = DbnEncoder::new(std::io::BufWriter::new(file), &meta).unwrap();
        let at = 1_529_587_800_000_000_000u64; // 09:30 in New York
        for k in 0..40u64 {
            let instrument = 1 + (k % 2) as u32;
            let mut m = MboMsg {
                hd: dbn::RecordHeader::new::<MboMsg>(dbn::rtype::MBO, 0, instrument, at + k),
                ts_recv: at + k,
                order_id: 100 + k,
                price: (1_000_000 + 100 * (k as i64 % 5)) * PRICE_DIV,
                size: 10 + k as u32,
                ..MboMsg::default()
            };
            m.action = b'A' as std::ffi::c_char;
            m.side = if k % 4 < 2 { b'B' } else { b'A' } as std::ffi::c_char;
            enc.encode_record(&m).unwrap();
        }
        enc.flush().unwrap();
        drop(enc);

        let symbols = vec!["AAA".to_string(), "BBB".to_string()];
        let days = read_mbo_messages(&path, &symbols).unwrap();
        for (k, (symbol, day)) in symbols.iter().zip(days).enumerate() {
            let day = day.unwrap().messages;
            assert_eq!(day.len(), 20, "{symbol}");
            assert!(
                day.iter().all(|m| m.id % 2 == k as u64),
                "{symbol}'s own orders"
            );
            assert_eq!(day, read_mbo(&path, symbol, 5).unwrap().0, "{symbol} alone");
        }
        let files = super::super::sample_files(&path, &[]).unwrap();
        let read: Vec<(String, usize)> = super::super::read_days(files)
            .map(|(s, _, d)| (s, d.unwrap().rows.len()))
            .collect();
        assert_eq!(read, [("AAA".to_string(), 20), ("BBB".to_string(), 20)]);

        // AAA's fifth record in the file (its third add) bids 100.04
        // through the ask at 100.02 that its second left: the book
        // crossed, named by its record, and the day still read.
        let files = super::super::sample_files(&path, &["AAA".into()]).unwrap();
        let (_, _, day) = super::super::read_days(files).next().unwrap();
        let day = day.unwrap();
        let crossed = day.crossed.clone().expect("the book crossed");
        assert_eq!(
            (
                crossed.record,
                crossed.direction,
                crossed.price,
                crossed.opposite
            ),
            (5, 1, 1_000_400, 1_000_200)
        );
        assert_eq!(crossed.message, 2, "AAA's third message");
        let warning = day.warning().unwrap();
        assert!(
            warning.contains("two.mbo.dbn: AAA: record 5: the book is crossed: a bid added at 100.0400 (09:30:00.000000) reaches the best ask at 100.0200"),
            "{warning}"
        );
        // Cut after AAA's second message: the crossing goes with the part
        // that holds it, counted from that part's first message.
        let (before, after) = day.split_at(34_200.0 + 3e-9);
        assert_eq!(before.messages.len(), 2);
        assert_eq!(before.crossed, None);
        let c = after.crossed.expect("the second part holds the crossing");
        assert_eq!((c.message, c.record), (0, 5));
    }

    /// A day whose adds never reach the other side is not crossed.
    #[test]
    fn a_day_that_never_crosses_names_nothing() {
        let mut o = Orders::default();
        for (k, side, price) in [
            (0, b'B', 1_000_000),
            (1, b'A', 1_000_100),
            (2, b'B', 1_000_000),
        ] {
            o.apply(&msg(b'A', side, k + 1, price, 100, k)).unwrap();
        }
        let day = MboMessages {
            records: (1..=o.rows.len() as u32).collect(),
            messages: o.rows,
        };
        assert_eq!(day.book(2).1, None);
    }
}
