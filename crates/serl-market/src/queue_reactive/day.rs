//! A day of the queue-reactive flow alone, on its own book, recorded as
//! LOBSTER files: what the realism study scores and the calibration test
//! fits again.

use rand::rngs::SmallRng;
use rand::SeedableRng;
use serl_lob::{Event, LobsterRecorder, NewOrder, OrderBook, OrderId, OrderKind, Side};

use super::{draw_resting, QrEvent, QrRates, QueueReactive};

/// The flow's own orders' owner id.
pub const FLOW_OWNER: u32 = 2;

impl QueueReactive {
    /// Plays `seconds` of the flow from `open` (seconds after midnight,
    /// LOBSTER's clock) with `seed`, starting from `opening` (a LOBSTER
    /// order-book row: ask price, ask size, bid price, bid size per level,
    /// prices in units of the model's tick; empty: the model's own opening
    /// book around `mid` ticks), recorded at `levels` levels.
    pub fn simulate(
        &self,
        window: (f64, f64),
        opening: &[i64],
        mid: f64,
        levels: usize,
        seed: u64,
    ) -> LobsterRecorder {
        let rec = LobsterRecorder::new(levels, self.tick);
        self.simulate_into(window, opening, mid, rec, seed)
    }

    /// [`QueueReactive::simulate`] recorded by `rec` (a whole-book
    /// recorder, say, for a DBN MBO export).
    pub fn simulate_into(
        &self,
        (open, seconds): (f64, f64),
        opening: &[i64],
        mid: f64,
        rec: LobsterRecorder,
        seed: u64,
    ) -> LobsterRecorder {
        let mut day = QrDay {
            book: OrderBook::default(),
            rec,
            rng: SmallRng::seed_from_u64(seed),
            next_id: 0,
            events: Vec::new(),
            last_mid: mid,
        };
        day.rec.at(open);
        if opening.is_empty() {
            for (side, price, qty) in self.opening_book(mid) {
                day.send(side, OrderKind::Limit { price }, qty);
            }
        } else {
            for level in opening.chunks(4) {
                for (side, price, qty) in [
                    (Side::Ask, level[0], level[1]),
                    (Side::Bid, level[2], level[3]),
                ] {
                    if qty > 0 && price > 0 {
                        day.send(
                            side,
                            OrderKind::Limit {
                                price: price / self.tick,
                            },
                            qty as u64,
                        );
                    }
                }
            }
        }
        let deepest = self.deepest();
        let mut rates = QrRates::default();
        let mut t = 0.0;
        while let Some((wait, event)) =
            self.next_event(&day.book, 1.0, day.last_mid, &mut rates, &mut day.rng)
        {
            t += wait;
            if t > seconds {
                break;
            }
            day.rec.at(open + t);
            day.apply(event, deepest);
        }
        day.rec
    }

    /// Levels a side keeps: the flow's orders behind the deepest are
    /// cancelled (nothing models their fate, and nothing should rest
    /// forever).
    pub fn deepest(&self) -> usize {
        (2 * self.levels()).max(self.levels() + 5)
    }
}

/// One day of the flow alone.
struct QrDay {
    book: OrderBook,
    rec: LobsterRecorder,
    rng: SmallRng,
    next_id: OrderId,
    events: Vec<Event>,
    last_mid: f64,
}

impl QrDay {
    fn apply(&mut self, event: QrEvent, deepest: usize) {
        match event {
            QrEvent::Limit { side, price, qty } => {
                self.send(side, OrderKind::Limit { price }, qty);
                self.trim(side, deepest);
            }
            QrEvent::Market { side, qty } => self.send(side.opposite(), OrderKind::Market, qty),
            QrEvent::Cancel { side, price } => {
                if let Some(id) = draw_resting(&self.book, (side, price), |_| true, &mut self.rng) {
                    self.cancel(id);
                }
            }
        }
    }

    /// Cancels the orders of the levels behind the `deepest`-th.
    fn trim(&mut self, side: Side, deepest: usize) {
        while self.book.level_count(side) > deepest {
            let Some(last) = self.book.levels(side).last().map(|l| l.price) else {
                return;
            };
            for o in self.book.queue(side, last) {
                self.cancel(o.id);
            }
        }
    }

    fn cancel(&mut self, id: OrderId) {
        self.events.clear();
        let _ = self.book.cancel(id, &mut self.events);
        self.settle();
    }

    fn send(&mut self, side: Side, kind: OrderKind, qty: u64) {
        if qty == 0 || matches!(kind, OrderKind::Limit { price } if price <= 0) {
            return;
        }
        self.next_id += 1;
        let order = NewOrder {
            id: self.next_id,
            owner: FLOW_OWNER,
            side,
            kind,
            qty,
        };
        self.events.clear();
        let _ = self.book.submit(order, &mut self.events);
        self.settle();
    }

    fn settle(&mut self) {
        if let Some(mid) = self.book.mid() {
            self.last_mid = mid;
        }
        for &e in &self.events {
            serl_lob::EventSink::event(&mut self.rec, e);
        }
    }
}

/// The mid of a LOBSTER order-book row, ticks of `tick` price units (one
/// side's best when the other is empty; 0 when both are).
pub fn row_mid(row: &[i64], tick: i64) -> f64 {
    let t = tick.max(1) as f64;
    match (row[1] > 0, row[3] > 0) {
        (true, true) => (row[0] + row[2]) as f64 / 2.0 / t,
        (true, false) => row[0] as f64 / t,
        (false, true) => row[2] as f64 / t,
        _ => 0.0,
    }
}
