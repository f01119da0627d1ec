//! The vocabulary of the book: sides, orders, fills and events.

use serde::{Deserialize, Serialize};

/// A caller-chosen order id. Unique among live orders.
pub type OrderId = u64;
/// Who owns an order (an agent id). Used for self-trade prevention and to
/// route fills.
pub type Owner = u32;
/// A price in integer ticks.
pub type Ticks = i64;
/// A quantity in integer lots.
pub type Lots = u64;

/// Which side of the book an order rests on, or which side an incoming
/// order comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Side {
    /// A buy order; bids rest below the asks.
    Bid,
    /// A sell order; asks rest above the bids.
    Ask,
}

impl Side {
    /// The side an order on this side trades against.
    pub fn opposite(self) -> Side {
        match self {
            Side::Bid => Side::Ask,
            Side::Ask => Side::Bid,
        }
    }
}

/// What an incoming order does with quantity it cannot match at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OrderKind {
    /// Rests at `price` after matching what it can.
    Limit {
        /// The limit price, in ticks.
        price: Ticks,
    },
    /// Sweeps the opposite side at any price; the rest is cancelled.
    Market,
    /// Immediate-or-cancel: matches up to `price`; the rest is cancelled.
    Ioc {
        /// The worst price it may trade at, in ticks.
        price: Ticks,
    },
}

/// An incoming order, as given to [`crate::OrderBook::submit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewOrder {
    /// Its id; the book refuses an id that is already resting.
    pub id: OrderId,
    /// Who sends it: named on its fills, and checked by self-trade
    /// prevention.
    pub owner: Owner,
    /// Buy ([`Side::Bid`]) or sell ([`Side::Ask`]).
    pub side: Side,
    /// Limit, market or IOC, with the price where it has one.
    pub kind: OrderKind,
    /// Size in lots; must be positive.
    pub qty: Lots,
}

/// One message to the engine. [`crate::OrderBook::apply`] takes any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    /// Submit an order: it matches, then rests or is cancelled by its kind.
    New(NewOrder),
    /// Remove a resting order.
    Cancel {
        /// The resting order.
        id: OrderId,
    },
    /// Partial cancel: take `by` lots off a resting order, keeping its place.
    Reduce {
        /// The resting order.
        id: OrderId,
        /// Lots to take off; at most what rests (all of it cancels the
        /// order).
        by: Lots,
    },
    /// Change price and/or size. A new price (or a larger size) loses queue
    /// priority; a smaller size at the same price keeps it.
    Modify {
        /// The resting order.
        id: OrderId,
        /// The new price, in ticks.
        price: Ticks,
        /// The new size, in lots (not a change in size).
        qty: Lots,
    },
}

/// A trade between an incoming (taker) and a resting (maker) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fill {
    /// The incoming order, or [`crate::EXTERNAL`] for an execution from
    /// outside the book ([`crate::OrderBook::execute`]).
    pub taker: OrderId,
    /// The incoming order's owner, or [`crate::EXTERNAL_OWNER`].
    pub taker_owner: Owner,
    /// The resting order that traded.
    pub maker: OrderId,
    /// The resting order's owner.
    pub maker_owner: Owner,
    /// The side of the taker (the aggressor).
    pub taker_side: Side,
    /// The maker's price.
    pub price: Ticks,
    /// Lots traded.
    pub qty: Lots,
}

/// Why quantity left the book without trading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CancelReason {
    /// The owner cancelled or reduced it.
    Requested,
    /// A modify moved it to a new price or size.
    Replaced,
    /// Self-trade prevention removed it.
    SelfTrade,
    /// The unmatched rest of a market or IOC order.
    Unfilled,
}

/// Every change to the book, in order. Together they are a full record of a
/// day: the trade tape and every book update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// An order (or its rest after matching) now rests in the book.
    Added {
        /// The order.
        id: OrderId,
        /// Its owner.
        owner: Owner,
        /// The side it rests on.
        side: Side,
        /// Its price, in ticks.
        price: Ticks,
        /// Lots now resting (the order's size less what it filled).
        qty: Lots,
    },
    /// A trade: an incoming order met a resting one, or a resting order was
    /// executed from outside the book.
    Trade(Fill),
    /// Quantity removed without trading. `remaining` is what still rests.
    Cancelled {
        /// The order.
        id: OrderId,
        /// Its owner.
        owner: Owner,
        /// Its side.
        side: Side,
        /// Its price in ticks: the limit of an unfilled IOC rest, and 0 for
        /// the unfilled rest of a market order.
        price: Ticks,
        /// Lots removed.
        qty: Lots,
        /// Lots of the order still resting; 0 when it is gone.
        remaining: Lots,
        /// Why the lots were removed.
        reason: CancelReason,
    },
}

/// Where the book sends its events. `()` drops them (the fastest choice);
/// `Vec<Event>` records them.
pub trait EventSink {
    /// Receives one event, in the order the book made the changes.
    fn event(&mut self, e: Event);
}

impl EventSink for () {
    #[inline(always)]
    fn event(&mut self, _: Event) {}
}

impl EventSink for Vec<Event> {
    #[inline]
    fn event(&mut self, e: Event) {
        self.push(e);
    }
}

/// What happened to an incoming order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecReport {
    /// Lots of the incoming order that traded.
    pub filled: Lots,
    /// Lots left resting in the book.
    pub resting: Lots,
    /// Lots cancelled (unfilled IOC/market rest, or self-trade prevention).
    pub cancelled: Lots,
    /// The sum of price × lots over its fills, in tick-lots: the average
    /// fill price times `filled`.
    pub notional: i128,
}

/// How to handle a taker meeting a resting order of the same owner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelfTradePolicy {
    /// Trade as with anyone else.
    #[default]
    Allow,
    /// Cancel the resting order and keep matching.
    CancelResting,
    /// Cancel the rest of the incoming order.
    CancelIncoming,
}

/// One price level in a depth snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelView {
    /// The level's price, in ticks.
    pub price: Ticks,
    /// Lots resting at this price.
    pub qty: Lots,
    /// Orders resting at this price.
    pub orders: u32,
}

/// A resting order as seen from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestingOrder {
    /// The order's id.
    pub id: OrderId,
    /// Its owner.
    pub owner: Owner,
    /// The side it rests on.
    pub side: Side,
    /// Its price, in ticks.
    pub price: Ticks,
    /// Lots it still holds.
    pub qty: Lots,
}

/// Running totals that must balance: every lot submitted is resting,
/// filled or cancelled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Lots of every accepted order, submitted or seeded (a modify that
    /// re-enters counts again, after cancelling the old size).
    pub submitted: u128,
    /// Lots filled, counted once per order side (a trade of q lots between
    /// two book orders fills 2q; an external execution fills q).
    pub filled: u128,
    /// Lots removed without trading, for any [`CancelReason`].
    pub cancelled: u128,
}
