//! Read-only questions about the book: best levels, depth, queues.

use super::ladder::Ladder;
use super::levels::{key, side_ix};
use super::{OrderBook, QueuePosition, NIL};
use crate::types::*;

impl OrderBook {
    pub(super) fn ladder(&self, side: Side) -> &Ladder {
        match side {
            Side::Bid => &self.bids,
            Side::Ask => &self.asks,
        }
    }

    fn view(&self, li: u32) -> LevelView {
        let l = &self.levels[li as usize];
        LevelView {
            price: l.price,
            qty: l.qty,
            orders: l.count,
        }
    }

    /// The best level of a side.
    #[inline]
    pub fn best(&self, side: Side) -> Option<LevelView> {
        self.ladder(side).best().map(|(_, li)| self.view(li))
    }

    /// The highest bid price, if any bid rests.
    pub fn best_bid(&self) -> Option<Ticks> {
        self.best(Side::Bid).map(|l| l.price)
    }

    /// The lowest ask price, if any ask rests.
    pub fn best_ask(&self) -> Option<Ticks> {
        self.best(Side::Ask).map(|l| l.price)
    }

    /// Best ask minus best bid in ticks, when both sides have orders.
    pub fn spread(&self) -> Option<Ticks> {
        Some(self.best_ask()? - self.best_bid()?)
    }

    /// Mid price in ticks (a half tick when the spread is odd), when both
    /// sides have orders.
    pub fn mid(&self) -> Option<f64> {
        Some((self.best_ask()? + self.best_bid()?) as f64 / 2.0)
    }

    /// Levels of a side from the best outwards.
    pub fn levels(&self, side: Side) -> impl Iterator<Item = LevelView> + '_ {
        self.ladder(side).iter().map(move |(_, li)| self.view(li))
    }

    /// The top `depth` levels of a side, written into `out` (cleared first)
    /// so that a caller can reuse one buffer.
    pub fn depth_into(&self, side: Side, depth: usize, out: &mut Vec<LevelView>) {
        out.clear();
        out.extend(self.levels(side).take(depth));
    }

    /// The top `depth` levels of a side.
    pub fn depth(&self, side: Side, depth: usize) -> Vec<LevelView> {
        self.levels(side).take(depth).collect()
    }

    /// Number of price levels on a side.
    pub fn level_count(&self, side: Side) -> usize {
        self.ladder(side).len()
    }

    /// Lots resting at one price.
    pub fn qty_at(&self, side: Side, price: Ticks) -> Lots {
        match self.ladder(side).get(key(side, price)) {
            Some(li) => self.levels[li as usize].qty,
            None => 0,
        }
    }

    /// Lots resting on a side.
    pub fn resting_volume(&self, side: Side) -> Lots {
        self.resting[side_ix(side)]
    }

    /// How many times a side's resting lots have changed (an order rested,
    /// filled, shrunk or left; the book cleared). Every change to a side's
    /// levels moves it, so a reader of the levels may keep what it read
    /// while this stands still (the queue-reactive flow reads ten levels a
    /// side on every event, and an event changes one side).
    pub fn side_changes(&self, side: Side) -> u64 {
        self.changes[side_ix(side)]
    }

    /// Number of resting orders.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether no order rests on either side.
    pub fn is_empty(&self) -> bool {
        self.index.len() == 0
    }

    /// A resting order by id; `None` once it has traded away or been
    /// cancelled.
    pub fn order(&self, id: OrderId) -> Option<RestingOrder> {
        let n = self.placed(self.slot(id)?);
        Some(RestingOrder {
            id,
            owner: n.owner,
            side: n.side,
            price: n.price,
            qty: n.qty,
        })
    }

    /// The queue ahead of a resting order at its price.
    pub fn queue_position(&self, id: OrderId) -> Option<QueuePosition> {
        let oi = self.slot(id)?;
        let mut pos = QueuePosition {
            orders_ahead: 0,
            qty_ahead: 0,
        };
        let mut cur = self.levels[self.nodes[oi as usize].level as usize].head;
        while cur != oi {
            let n = &self.nodes[cur as usize];
            pos.orders_ahead += 1;
            pos.qty_ahead += n.qty;
            cur = n.next;
        }
        Some(pos)
    }

    /// The resting orders at one level, front of the queue first.
    pub fn queue(&self, side: Side, price: Ticks) -> Vec<RestingOrder> {
        self.queue_iter(side, price).collect()
    }

    /// [`OrderBook::queue`] without collecting it: for a caller on every
    /// event of a flow, which must not allocate there.
    pub fn queue_iter(&self, side: Side, price: Ticks) -> impl Iterator<Item = RestingOrder> + '_ {
        let mut cur = match self.ladder(side).get(key(side, price)) {
            Some(li) => self.levels[li as usize].head,
            None => NIL,
        };
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let n = &self.nodes[cur as usize];
            cur = n.next;
            Some(RestingOrder {
                id: n.id,
                owner: n.owner,
                side,
                price,
                qty: n.qty,
            })
        })
    }

    /// The running lot totals since the book was made or last cleared.
    pub fn totals(&self) -> Totals {
        self.totals
    }
}
