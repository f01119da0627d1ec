//! The fill reference for resting orders: a real LOBSTER day's message
//! stream, with the order's place in the queue tracked message by message.
//!
//! A resting order joins the back of the queue at its price, behind every
//! share shown there when it arrives. It fills only once the book ahead of
//! it has traded or cancelled: executions at its price take the queue
//! ahead first, cancellations count only for orders that were there before
//! it (an order submitted later is behind it), and an execution at a worse
//! price (the market trading through it) fills it at once. The real book
//! does not know the order is there, so it is not moved by it; crossing
//! child orders fill as in the static replay, on minute bars built from the
//! same messages ([`LobsterDay::session`]).

use std::collections::HashSet;
use std::sync::Arc;

use chrono::NaiveDate;
use serl_data::{QuoteBars, Session};
use serl_lob::{BookRows, LobsterEvent, MessageRow, Side};
use serl_market::OrderFlow;

/// LOBSTER prices are dollars × 10 000.
const PRICE_SCALE: f64 = 10_000.0;

/// One real LOBSTER symbol-day: its messages, the book after each, and
/// minute bars built from them.
pub struct LobsterDay {
    messages: Vec<MessageRow>,
    rows: BookRows,
    session: Session,
    order_flow: Option<Arc<OrderFlow>>,
}

/// A fill of a resting order in the message stream: seconds after
/// midnight, shares, and the mid then (dollars).
pub(crate) type QueueFill = (f64, f64, f64);

impl LobsterDay {
    /// The day of `symbol` on `date` from its messages and order-book rows
    /// (as many rows as messages).
    pub fn new(symbol: &str, date: NaiveDate, messages: Vec<MessageRow>, rows: BookRows) -> Self {
        let session = minute_bars(symbol, date, &messages, &rows);
        let cent = (PRICE_SCALE * crate::TICK).round() as i64;
        let order_flow = OrderFlow::measure(&messages, &rows, cent).map(Arc::new);
        LobsterDay {
            messages,
            rows,
            session,
            order_flow,
        }
    }

    /// The day's order flow (sizes, cancels, limit-order depths, gap
    /// between messages), for a
    /// dynamic market calibrated to it ([`crate::MarketData::with_order_flow`]);
    /// `None` for a day without submissions.
    pub fn order_flow(&self) -> Option<&Arc<OrderFlow>> {
        self.order_flow.as_ref()
    }

    /// The day as minute bars: OHLCV and VWAP of its executions (visible
    /// and hidden), and the quotes at each minute's end.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The stock.
    pub fn symbol(&self) -> &Arc<str> {
        &self.session.symbol
    }

    /// The date.
    pub fn date(&self) -> NaiveDate {
        self.session.date
    }

    /// The index of the first message at or after `t` seconds.
    fn at(&self, t: f64) -> usize {
        self.messages.partition_point(|m| m.time < t)
    }

    /// The best bid and ask (dollars) before message `i`: the book after
    /// the message before it.
    fn touch_before(&self, i: usize) -> Option<(f64, f64)> {
        quotes(&self.rows, i.saturating_sub(1))
            .filter(|&(bid, _, ask, _)| ask > bid)
            .map(|(bid, _, ask, _)| (bid as f64 / PRICE_SCALE, ask as f64 / PRICE_SCALE))
    }

    /// The mid and half spread (dollars) at `t` seconds, from the book.
    pub(crate) fn quote_at(&self, t: f64) -> Option<(f64, f64)> {
        let (bid, ask) = self.touch_before(self.at(t))?;
        Some(((bid + ask) / 2.0, (ask - bid) / 2.0))
    }

    /// The mid (dollars) just after every message at or before `t`
    /// seconds: `None` before the first message and after the last, where
    /// the day's book says nothing, and where it is not two-sided.
    pub(crate) fn mid_after(&self, t: f64) -> Option<f64> {
        let i = self.messages.partition_point(|m| m.time <= t);
        if i == 0 || i >= self.messages.len() {
            return None;
        }
        self.touch_before(i).map(|(bid, ask)| (bid + ask) / 2.0)
    }

    /// Shares shown at `price` (LOBSTER units) on the side of direction `d`
    /// (1 bids, -1 asks) before message `i`.
    fn shown_at(&self, i: usize, d: i8, price: i64) -> i64 {
        let side = if d > 0 { Side::Bid } else { Side::Ask };
        (0..self.rows.levels())
            .map(|k| self.rows.level(i.saturating_sub(1), side, k))
            .find(|&(p, _)| p == price)
            .map_or(0, |(_, s)| s)
    }

    /// A resting order at `price` (dollars) for a side of sign `sign` (+1
    /// a buy) joining the back of the queue at `at` seconds.
    pub(crate) fn join_queue(&self, sign: f64, price: f64, at: f64) -> QueueTrack {
        let d: i8 = if sign > 0.0 { 1 } else { -1 };
        let p = (price * PRICE_SCALE).round() as i64;
        let next = self.at(at);
        QueueTrack {
            price: p,
            direction: d,
            ahead: self.shown_at(next, d, p),
            behind: HashSet::new(),
            next,
        }
    }

    /// Works a resting order of `qty` shares through the messages before
    /// `until` seconds, at most `cap` shares; its queue place is kept in
    /// `track` for the next step.
    pub(crate) fn work_queue(
        &self,
        track: &mut QueueTrack,
        qty: f64,
        until: f64,
        cap: f64,
    ) -> Vec<QueueFill> {
        let p = track.price;
        let mut left = qty.min(cap).floor();
        let mut fills = Vec::new();
        // Every message of the step is read, even once the order is
        // filled or capped, so that a kept order's place is right next step.
        while let Some(m) = self.messages.get(track.next) {
            if m.time >= until {
                break;
            }
            let i = track.next;
            track.next += 1;
            let got = (track.read(m) as f64).min(left);
            if got >= 1.0 {
                left -= got;
                let mid = self
                    .touch_before(i)
                    .map_or(p as f64 / PRICE_SCALE, |(bid, ask)| (bid + ask) / 2.0);
                fills.push((m.time, got, mid));
            }
        }
        fills
    }

    /// The fills of a resting order of `qty` shares at `price` posted at
    /// `from` seconds and withdrawn at `to`, at most `cap` shares in all.
    #[cfg(test)]
    fn queue_fills(
        &self,
        sign: f64,
        price: f64,
        qty: f64,
        (from, to): (f64, f64),
        cap: f64,
    ) -> Vec<QueueFill> {
        let mut track = self.join_queue(sign, price, from);
        self.work_queue(&mut track, qty, to, cap)
    }
}

impl QueueTrack {
    /// Reads one message: updates the queue ahead and the orders behind,
    /// and returns the shares it would have filled (any number: the
    /// caller caps it at what is left).
    fn read(&mut self, m: &MessageRow) -> i64 {
        let (p, d) = (self.price, self.direction);
        if m.direction != d {
            // An order on the other side arriving at or through the price
            // rests in the real book only because the real book did not
            // hold this one: with it there, it would have traded with it
            // (once nothing is ahead).
            let crosses = m.kind == LobsterEvent::Submit && i64::from(d) * (p - m.price) >= 0;
            return if crosses && self.ahead == 0 {
                m.size
            } else {
                0
            };
        }
        // How far the message's price is on the worse side of ours, for
        // the resting side: below a bid, above an ask.
        let worse = i64::from(d) * (p - m.price);
        match m.kind {
            LobsterEvent::Submit if m.price == p => {
                self.behind.insert(m.id);
                0
            }
            LobsterEvent::Cancel | LobsterEvent::Delete if m.price == p => {
                if !self.behind.contains(&m.id) {
                    self.ahead = (self.ahead - m.size).max(0);
                }
                0
            }
            LobsterEvent::Execute if m.price == p && self.behind.contains(&m.id) => {
                // An order behind it traded: everything ahead and the
                // order itself went first.
                self.ahead = 0;
                i64::MAX
            }
            LobsterEvent::Execute if m.price == p => {
                let from_queue = self.ahead.min(m.size);
                self.ahead -= from_queue;
                m.size - from_queue
            }
            LobsterEvent::Execute | LobsterEvent::ExecuteHidden if worse > 0 => {
                self.ahead = 0;
                m.size
            }
            _ => 0,
        }
    }
}

/// A resting order's place in a LOBSTER day's queue, kept from step to
/// step while the order stays at its price.
#[derive(Debug, Clone)]
pub(crate) struct QueueTrack {
    /// Its price, LOBSTER units.
    pub(crate) price: i64,
    /// 1 a bid, -1 an ask.
    direction: i8,
    /// Shares ahead of it.
    pub(crate) ahead: i64,
    /// Orders that joined its price after it.
    behind: HashSet<u64>,
    /// The next message to read.
    next: usize,
}

/// The best bid, its size, the best ask and its size in row `i`, when both
/// sides quote.
fn quotes(rows: &BookRows, i: usize) -> Option<(i64, i64, i64, i64)> {
    let (bid, bid_size) = rows.level(i, Side::Bid, 0);
    let (ask, ask_size) = rows.level(i, Side::Ask, 0);
    (bid_size > 0 && ask_size > 0).then_some((bid, bid_size, ask, ask_size))
}

/// Minute bars of a LOBSTER day: executions (visible and hidden) give the
/// bars' prices and volumes, the book at each minute's end the quotes.
/// Minutes without a trade have no bar, as in real bar files.
fn minute_bars(symbol: &str, date: NaiveDate, messages: &[MessageRow], rows: &BookRows) -> Session {
    let mut s = Session {
        symbol: symbol.into(),
        date,
        minute: Vec::new(),
        open: Vec::new(),
        high: Vec::new(),
        low: Vec::new(),
        close: Vec::new(),
        volume: Vec::new(),
        vwap: Some(Vec::new()),
        quotes: Some(QuoteBars {
            bid: Vec::new(),
            ask: Vec::new(),
            bid_size: Vec::new(),
            ask_size: Vec::new(),
        }),
        filled: Vec::new(),
        missing_minutes: 0,
        filled_minutes: 0,
        signal: None,
    };
    let mut pv = 0.0;
    for (i, m) in messages.iter().enumerate() {
        let minute = (m.time / 60.0).floor() as u16;
        if !(570..960).contains(&minute) {
            continue;
        }
        if matches!(m.kind, LobsterEvent::Execute | LobsterEvent::ExecuteHidden) && m.size > 0 {
            let price = m.price as f64 / PRICE_SCALE;
            let size = m.size as f64;
            if s.minute.last() != Some(&minute) {
                if let (Some(v), Some(&vol)) = (s.vwap.as_mut(), s.volume.last()) {
                    v.push(pv / vol);
                }
                pv = 0.0;
                s.minute.push(minute);
                s.open.push(price);
                s.high.push(price);
                s.low.push(price);
                s.close.push(price);
                s.volume.push(0.0);
                s.filled.push(false);
                let q = s.quotes.as_mut().expect("set above");
                q.bid.push(f64::NAN);
                q.ask.push(f64::NAN);
                q.bid_size.push(0.0);
                q.ask_size.push(0.0);
            }
            let k = s.minute.len() - 1;
            s.high[k] = s.high[k].max(price);
            s.low[k] = s.low[k].min(price);
            s.close[k] = price;
            s.volume[k] += size;
            pv += price * size;
        }
        // The quotes at the bar's end: the book after the minute's last
        // message.
        if s.minute.last() == Some(&minute) {
            if let Some((bid, bid_size, ask, ask_size)) = quotes(rows, i) {
                let q = s.quotes.as_mut().expect("set above");
                let k = q.bid.len() - 1;
                q.ask[k] = ask as f64 / PRICE_SCALE;
                q.ask_size[k] = ask_size as f64;
                q.bid[k] = bid as f64 / PRICE_SCALE;
                q.bid_size[k] = bid_size as f64;
            }
        }
    }
    if let (Some(v), Some(&vol)) = (s.vwap.as_mut(), s.volume.last()) {
        v.push(pv / vol);
    }
    s.missing_minutes = 390 - s.minute.len() as u32;
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serl_lob::{parse_messages, parse_orderbook};

    /// A level-1 day: the message and the book after it, one per line.
    pub(crate) fn day(lines: &[(&str, &str)]) -> LobsterDay {
        let msgs: String = lines.iter().map(|(m, _)| format!("{m}\n")).collect();
        let book: String = lines.iter().map(|(_, b)| format!("{b}\n")).collect();
        let messages = parse_messages("m.csv", msgs.as_bytes()).unwrap();
        let rows = parse_orderbook("b.csv", book.as_bytes()).unwrap();
        let date = NaiveDate::from_ymd_opt(2012, 6, 21).unwrap();
        LobsterDay::new("TEST", date, messages, rows)
    }

    #[test]
    fn a_resting_buy_waits_for_the_queue_ahead_then_fills() {
        // A bid of 100.00 (1000000) and an ask of 100.01.
        let d = day(&[
            ("34201.0,1,1,100,1000000,1", "1000100,200,1000000,400"),
            // Posted at 34260 behind 400 shares. An order joining later is
            // behind it: its submission and deletion change nothing.
            ("34270.0,1,2,50,1000000,1", "1000100,200,1000000,450"),
            ("34280.0,3,2,50,1000000,1", "1000100,200,1000000,400"),
            // An order that was there before leaves: 300 ahead.
            ("34290.0,3,1,100,1000000,1", "1000100,200,1000000,300"),
            // Executions eat the queue ahead first: 50 ahead, then none.
            ("34300.0,4,7,250,1000000,1", "1000100,200,1000000,50"),
            ("34310.0,4,8,50,1000000,1", "1000100,200,999900,500"),
            // A sell resting above it does not reach it.
            ("34315.0,1,20,70,1000100,-1", "1000100,270,999900,500"),
            // A trade below the bid went through it: 40 shares fill.
            ("34320.0,4,9,40,999900,1", "1000000,70,999900,460"),
            // An order behind it at its price trades: the rest fills.
            ("34330.0,1,3,30,1000000,1", "1000000,70,1000000,30"),
            ("34340.0,4,3,10,1000000,1", "1000000,70,1000000,20"),
        ]);
        let fills = d.queue_fills(1.0, 100.00, 100.0, (34260.0, 34500.0), 1e9);
        let got: Vec<(f64, f64)> = fills.iter().map(|&(t, q, _)| (t, q)).collect();
        assert_eq!(got, vec![(34320.0, 40.0), (34340.0, 60.0)]);
        // Withdrawn before the trade-through: nothing; and the cap binds.
        assert!(d
            .queue_fills(1.0, 100.00, 100.0, (34260.0, 34319.0), 1e9)
            .is_empty());
        let capped = d.queue_fills(1.0, 100.00, 100.0, (34260.0, 34500.0), 25.0);
        assert_eq!(capped.iter().map(|f| f.1).sum::<f64>(), 25.0);
        // Posted later, behind only the 30 shares of order 3... which a
        // trade of 10 does not clear.
        let late = d.queue_fills(1.0, 100.00, 100.0, (34335.0, 34500.0), 1e9);
        assert!(late.is_empty(), "{late:?}");
    }

    #[test]
    fn a_sell_arriving_at_a_bid_inside_the_spread_trades_with_it() {
        // The real best bid is 100.00 and the ask 100.04; a buy rests at
        // 100.02, with nobody ahead. A sell later posted at 100.02 rests in
        // the real book only because this bid was not there.
        let d = day(&[
            ("34201.0,1,1,100,1000000,1", "1000400,200,1000000,100"),
            ("34300.0,1,2,60,1000200,-1", "1000200,60,1000000,100"),
            ("34310.0,1,3,60,1000300,-1", "1000200,60,1000000,100"),
        ]);
        let fills = d.queue_fills(1.0, 100.02, 100.0, (34260.0, 34500.0), 1e9);
        let got: Vec<(f64, f64)> = fills.iter().map(|&(t, q, _)| (t, q)).collect();
        assert_eq!(
            got,
            vec![(34300.0, 60.0)],
            "the sell at 100.03 does not reach it"
        );
    }

    #[test]
    fn the_days_bars_come_from_its_executions_and_quotes() {
        let d = day(&[
            ("34201.0,1,1,100,1000000,1", "1000100,200,1000000,400"),
            ("34300.0,4,7,250,1000000,1", "1000100,200,1000000,150"),
            ("34310.0,5,0,50,1000050,1", "1000100,200,1000000,150"),
            ("34320.0,4,9,40,999900,1", "1000000,70,999900,460"),
        ]);
        let s = d.session();
        assert_eq!(s.minute, vec![571, 572]);
        assert_eq!(s.volume, vec![300.0, 40.0]);
        assert_eq!(s.high[0], 100.005);
        assert_eq!(s.low[0], 100.0);
        let vwap = s.vwap.as_ref().unwrap();
        assert!((vwap[0] - (250.0 * 100.0 + 50.0 * 100.005) / 300.0).abs() < 1e-9);
        let q = s.quotes.as_ref().unwrap();
        assert_eq!((q.bid[0], q.ask[0]), (100.0, 100.01));
        assert_eq!((q.bid[1], q.ask[1]), (99.99, 100.0));
    }
}
