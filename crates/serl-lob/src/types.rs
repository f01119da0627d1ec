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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Side {
    Bid,
    Ask,
}

impl Side {
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
    Limit { price: Ticks },
    /// Sweeps the opposite side at any price; the rest is cancelled.
    Market,
    /// Immediate-or-cancel: matches up to `price`; the rest is cancelled.
    Ioc { price: Ticks },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewOrder {
    pub id: OrderId,
    pub owner: Owner,
    pub side: Side,
    pub kind: OrderKind,
    pub qty: Lots,
}

/// One message to the engine. [`crate::OrderBook::apply`] takes any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Message {
    New(NewOrder),
    /// Remove a resting order.
    Cancel {
        id: OrderId,
    },
    /// Partial cancel: take `by` lots off a resting order, keeping its place.
    Reduce {
        id: OrderId,
        by: Lots,
    },
    /// Change price and/or size. A new price (or a larger size) loses queue
    /// priority; a smaller size at the same price keeps it.
    Modify {
        id: OrderId,
        price: Ticks,
        qty: Lots,
    },
}

/// A trade between an incoming (taker) and a resting (maker) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fill {
    pub taker: OrderId,
    pub taker_owner: Owner,
    pub maker: OrderId,
    pub maker_owner: Owner,
    /// The side of the taker (the aggressor).
    pub taker_side: Side,
    /// The maker's price.
    pub price: Ticks,
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
        id: OrderId,
        owner: Owner,
        side: Side,
        price: Ticks,
        qty: Lots,
    },
    Trade(Fill),
    /// Quantity removed without trading. `remaining` is what still rests.
    Cancelled {
        id: OrderId,
        owner: Owner,
        side: Side,
        price: Ticks,
        qty: Lots,
        remaining: Lots,
        reason: CancelReason,
    },
}

/// Where the book sends its events. `()` drops them (the fastest choice);
/// `Vec<Event>` records them.
pub trait EventSink {
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
    pub filled: Lots,
    /// Lots left resting in the book.
    pub resting: Lots,
    /// Lots cancelled (unfilled IOC/market rest, or self-trade prevention).
    pub cancelled: Lots,
    /// The average fill price times filled lots (sum of price*qty).
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
    pub price: Ticks,
    pub qty: Lots,
    pub orders: u32,
}

/// A resting order as seen from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestingOrder {
    pub id: OrderId,
    pub owner: Owner,
    pub side: Side,
    pub price: Ticks,
    pub qty: Lots,
}

/// Running totals that must balance: every lot submitted is resting,
/// filled or cancelled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub submitted: u128,
    /// Lots filled, counted once per order side (a trade of q lots between
    /// two book orders fills 2q; an external execution fills q).
    pub filled: u128,
    pub cancelled: u128,
}
