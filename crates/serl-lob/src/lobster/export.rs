//! Writing a book's day in LOBSTER's format: the message file and the
//! order-book file that [`super::replay`] and outside tools read.
//!
//! [`LobsterRecorder`] is an [`EventSink`]: pass it to the book's calls
//! (after [`LobsterRecorder::at`] sets the clock) and it turns every event
//! into LOBSTER messages. It keeps its own copy of the resting orders, so
//! it needs nothing from the book, and it applies LOBSTER's rule for a
//! level-*L* file: a message is kept only when it changed the top *L*
//! levels, and the order-book row after it is kept with it.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;

use super::orderbook::BookRows;
use super::{LobsterEvent, MessageRow, EMPTY_ASK, EMPTY_BID};
use crate::{Event, EventSink, Lots, OrderId, Side, Ticks};

/// Records a book's events as a level-*L* LOBSTER day.
#[derive(Debug, Clone)]
pub struct LobsterRecorder {
    levels: usize,
    price_scale: i64,
    time: f64,
    live: HashMap<OrderId, (Side, Ticks, Lots)>,
    bids: BTreeMap<Ticks, Lots>,
    asks: BTreeMap<Ticks, Lots>,
    row: Vec<i64>,
    messages: Vec<MessageRow>,
    rows: Vec<i64>,
    /// Keep every message, not only those that change the top levels.
    whole: bool,
}

impl LobsterRecorder {
    /// A recorder of the top `levels` levels (at least 1), prices written
    /// as `price_scale` LOBSTER units (dollars × 10,000) per tick: 100 for a
    /// one-cent tick.
    pub fn new(levels: usize, price_scale: i64) -> Self {
        let levels = levels.max(1);
        let mut r = LobsterRecorder {
            levels,
            price_scale,
            time: 0.0,
            live: HashMap::new(),
            bids: BTreeMap::new(),
            asks: BTreeMap::new(),
            row: Vec::new(),
            messages: Vec::new(),
            rows: Vec::new(),
            whole: false,
        };
        r.row = r.top();
        r
    }

    /// The same recorder keeping every message, not only those that
    /// change the top levels: the whole book's day, as a DBN MBO file
    /// holds it (`serl lob export --queue-reactive`); the rows are still
    /// the top levels.
    pub fn whole(mut self) -> Self {
        self.whole = true;
        self
    }

    /// Sets the time of the events that follow, seconds after midnight.
    pub fn at(&mut self, seconds: f64) {
        self.time = seconds;
    }

    /// The messages kept so far.
    pub fn messages(&self) -> &[MessageRow] {
        &self.messages
    }

    /// The messages and the order-book row after each.
    pub fn into_rows(self) -> (Vec<MessageRow>, BookRows) {
        (self.messages, BookRows::from_values(self.levels, self.rows))
    }

    /// Writes the message file and the order-book file, times with
    /// nanosecond digits as LOBSTER writes them.
    pub fn write(
        &self,
        messages: &mut impl Write,
        orderbook: &mut impl Write,
    ) -> std::io::Result<()> {
        let width = 4 * self.levels;
        for (m, row) in self.messages.iter().zip(self.rows.chunks(width)) {
            writeln!(
                messages,
                "{:.9},{},{},{},{},{}",
                m.time,
                m.kind.code(),
                m.id,
                m.size,
                m.price,
                m.direction
            )?;
            let mut line = String::with_capacity(width * 8);
            for (i, v) in row.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                line.push_str(&v.to_string());
            }
            writeln!(orderbook, "{line}")?;
        }
        Ok(())
    }

    fn side_levels(&mut self, side: Side) -> &mut BTreeMap<Ticks, Lots> {
        match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
        }
    }

    /// Takes `qty` off the level of a resting order.
    fn remove(&mut self, side: Side, price: Ticks, qty: Lots) {
        let levels = self.side_levels(side);
        if let Some(q) = levels.get_mut(&price) {
            *q = q.saturating_sub(qty);
            if *q == 0 {
                levels.remove(&price);
            }
        }
    }

    /// The top `levels` levels as a LOBSTER order-book row.
    fn top(&self) -> Vec<i64> {
        let mut asks = self.asks.iter();
        let mut bids = self.bids.iter().rev();
        let mut row = Vec::with_capacity(4 * self.levels);
        for _ in 0..self.levels {
            match asks.next() {
                Some((&p, &q)) => row.extend([p * self.price_scale, q as i64]),
                None => row.extend([EMPTY_ASK, 0]),
            }
            match bids.next() {
                Some((&p, &q)) => row.extend([p * self.price_scale, q as i64]),
                None => row.extend([EMPTY_BID, 0]),
            }
        }
        row
    }

    fn message(&mut self, kind: LobsterEvent, id: OrderId, size: Lots, side: Side, price: Ticks) {
        let row = self.top();
        if row == self.row && !self.whole {
            return;
        }
        self.messages.push(MessageRow {
            time: self.time,
            kind,
            id,
            size: size as i64,
            price: price * self.price_scale,
            direction: if side == Side::Bid { 1 } else { -1 },
        });
        self.rows.extend_from_slice(&row);
        self.row = row;
    }
}

impl EventSink for LobsterRecorder {
    fn event(&mut self, e: Event) {
        match e {
            Event::Added {
                id,
                side,
                price,
                qty,
                ..
            } => {
                self.live.insert(id, (side, price, qty));
                *self.side_levels(side).entry(price).or_default() += qty;
                self.message(LobsterEvent::Submit, id, qty, side, price);
            }
            Event::Trade(f) => {
                let Some(&(side, price, left)) = self.live.get(&f.maker) else {
                    return;
                };
                self.remove(side, price, f.qty);
                if left <= f.qty {
                    self.live.remove(&f.maker);
                } else {
                    self.live.insert(f.maker, (side, price, left - f.qty));
                }
                self.message(LobsterEvent::Execute, f.maker, f.qty, side, price);
            }
            // The unfilled rest of a market or IOC order never rested, and
            // an order the recorder never saw rest has nothing to remove.
            Event::Cancelled {
                id, qty, remaining, ..
            } => {
                let Some(&(side, price, _)) = self.live.get(&id) else {
                    return;
                };
                self.remove(side, price, qty);
                let kind = if remaining == 0 {
                    self.live.remove(&id);
                    LobsterEvent::Delete
                } else {
                    self.live.insert(id, (side, price, remaining));
                    LobsterEvent::Cancel
                };
                self.message(kind, id, qty, side, price);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{replay, LobsterInput, NewOrder, OrderBook, OrderKind, ReplayOptions};

    fn limit(id: u64, side: Side, price: Ticks, qty: Lots) -> NewOrder {
        NewOrder {
            id,
            owner: 1,
            side,
            kind: OrderKind::Limit { price },
            qty,
        }
    }

    #[test]
    fn a_recorded_stream_replays_without_a_mismatch() {
        let mut book = OrderBook::default();
        let mut rec = LobsterRecorder::new(2, 100);
        for (i, m) in crate::message_stream(20_000, 3).iter().enumerate() {
            rec.at(34_200.0 + i as f64 * 1e-3);
            let _ = book.apply(m, &mut rec);
        }
        let (mut msg, mut ob) = (Vec::new(), Vec::new());
        rec.write(&mut msg, &mut ob).unwrap();
        let input = LobsterInput {
            message_name: "SIM_message_2.csv".into(),
            orderbook_name: "SIM_orderbook_2.csv".into(),
            messages: msg,
            orderbook: ob,
        };
        let report = replay(&input, &ReplayOptions::default()).unwrap();
        assert!(report.messages > 1_000, "{} messages kept", report.messages);
        assert_eq!(report.mismatched_rows, 0);
    }

    #[test]
    fn only_changes_to_the_visible_levels_are_kept() {
        let mut book = OrderBook::default();
        let mut rec = LobsterRecorder::new(1, 100);
        book.submit(limit(1, Side::Bid, 100, 5), &mut rec).unwrap();
        // Behind the best bid: invisible in a level-1 file.
        book.submit(limit(2, Side::Bid, 99, 5), &mut rec).unwrap();
        book.cancel(2, &mut rec).unwrap();
        // A sell that takes 3 of the best bid, then a partial cancel.
        let sell = NewOrder {
            id: 3,
            owner: 2,
            side: Side::Ask,
            kind: OrderKind::Market,
            qty: 3,
        };
        book.submit(sell, &mut rec).unwrap();
        book.reduce(1, 1, &mut rec).unwrap();
        let kinds: Vec<(u8, u64, i64)> = rec
            .messages()
            .iter()
            .map(|m| (m.kind.code(), m.id, m.size))
            .collect();
        assert_eq!(kinds, vec![(1, 1, 5), (4, 1, 3), (2, 1, 1)]);
        let (_, rows) = rec.into_rows();
        assert_eq!(rows.row(2), &[EMPTY_ASK, 0, 10_000, 1]);
    }
}
