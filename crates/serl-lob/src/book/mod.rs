//! The order book: price levels per side, FIFO queues per level, and the
//! matching loop.
//!
//! Layout, chosen for the hot path:
//! - orders live in a slab (`Vec<Node>`) and form an intrusive doubly
//!   linked FIFO per level, so cancels are O(1) once the id is found;
//! - an id → slot index ([`crate::index`]) finds them;
//! - each side holds its levels in an array indexed by price over a window
//!   around the prices in use, linked in price order, with a bitmap of the
//!   occupied prices to place a new level between its neighbours
//!   ([`ladder`]). The key is the price for bids and minus the price for
//!   asks, so "better" is "larger" on both sides.
//!
//! Freed order and level slots are reused, so a book in steady state does
//! not allocate per message.
//!
//! This file holds the book and every message that changes it (the hot
//! path, kept together); [`levels`] the storage types under it, [`ladder`]
//! each side's levels, `queries` the read-only questions and `invariants`
//! the full structural check.

mod invariants;
mod ladder;
mod levels;
mod queries;

use crate::index::{IdIndex, Probe};
use crate::types::*;
use crate::LobError;
use ladder::Ladder;
use levels::{key, side_ix, Level, Node, Placed};

const NIL: u32 = u32::MAX;

/// The taker id on fills of [`OrderBook::execute`], where the counterparty
/// is outside the book (as in a LOBSTER replay).
pub const EXTERNAL: OrderId = OrderId::MAX;
/// The taker owner on fills of [`OrderBook::execute`]; see [`EXTERNAL`].
pub const EXTERNAL_OWNER: Owner = Owner::MAX;

/// Where a resting order stands in its level's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuePosition {
    /// Orders ahead of it at its price.
    pub orders_ahead: u32,
    /// Lots ahead of it at its price.
    pub qty_ahead: Lots,
}

/// A price-time priority limit order book, prices in ticks and sizes in
/// lots.
///
/// Every method that changes the book reports each change to an
/// [`EventSink`]; a refused message returns a [`LobError`] and changes
/// nothing. [`OrderBook::default`] allows self-trades.
#[derive(Debug, Clone)]
pub struct OrderBook {
    nodes: Vec<Node>,
    free_nodes: Vec<u32>,
    levels: Vec<Level>,
    free_levels: Vec<u32>,
    bids: Ladder,
    asks: Ladder,
    index: IdIndex,
    self_trade: SelfTradePolicy,
    resting: [Lots; 2],
    /// Changes to each side's resting lots so far ([`OrderBook::side_changes`]).
    changes: [u64; 2],
    totals: Totals,
}

impl Default for OrderBook {
    fn default() -> Self {
        Self::new(SelfTradePolicy::Allow)
    }
}

impl OrderBook {
    /// An empty book with the given self-trade policy, with room for 1,024
    /// resting orders before it allocates.
    pub fn new(self_trade: SelfTradePolicy) -> Self {
        Self::with_capacity(self_trade, 1024)
    }

    /// A book with room for `orders` resting orders before it allocates.
    pub fn with_capacity(self_trade: SelfTradePolicy, orders: usize) -> Self {
        OrderBook {
            nodes: Vec::with_capacity(orders),
            free_nodes: Vec::new(),
            levels: Vec::with_capacity(256),
            free_levels: Vec::new(),
            bids: Ladder::default(),
            asks: Ladder::default(),
            index: IdIndex::with_capacity(orders),
            self_trade,
            resting: [0; 2],
            changes: [0; 2],
            totals: Totals::default(),
        }
    }

    /// What the book does when a taker meets a resting order of its owner.
    pub fn self_trade_policy(&self) -> SelfTradePolicy {
        self.self_trade
    }

    /// Empties the book, keeping its allocations.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.free_nodes.clear();
        self.levels.clear();
        self.free_levels.clear();
        self.bids.clear();
        self.asks.clear();
        self.index.clear();
        self.resting = [0; 2];
        // Counted on, not reset: the book changed.
        self.changes = self.changes.map(|c| c + 1);
        self.totals = Totals::default();
    }

    #[inline(always)]
    fn placed(&self, oi: u32) -> Placed {
        let n = self.nodes[oi as usize];
        let l = &self.levels[n.level as usize];
        Placed {
            qty: n.qty,
            owner: n.owner,
            level: n.level,
            price: l.price,
            side: l.side,
        }
    }

    /// The slab slot of a resting order.
    #[inline(always)]
    fn slot(&self, id: OrderId) -> Option<u32> {
        self.index.get(id, |s| self.nodes[s as usize].id)
    }

    // ----- messages ------------------------------------------------------

    /// Applies any [`Message`].
    pub fn apply<E: EventSink>(
        &mut self,
        m: &Message,
        sink: &mut E,
    ) -> Result<ExecReport, LobError> {
        match *m {
            Message::New(o) => self.submit(o, sink),
            Message::Cancel { id } => self.cancel(id, sink).map(|q| ExecReport {
                cancelled: q,
                ..Default::default()
            }),
            Message::Reduce { id, by } => self.reduce(id, by, sink).map(|rest| ExecReport {
                cancelled: by,
                resting: rest,
                ..Default::default()
            }),
            Message::Modify { id, price, qty } => self.modify(id, price, qty, sink),
        }
    }

    /// Matches an incoming order against the opposite side, then rests,
    /// cancels or drops the rest according to its kind.
    pub fn submit<E: EventSink>(
        &mut self,
        o: NewOrder,
        sink: &mut E,
    ) -> Result<ExecReport, LobError> {
        if o.qty == 0 {
            return Err(LobError::ZeroQuantity);
        }
        let limit = match o.kind {
            OrderKind::Limit { price } | OrderKind::Ioc { price } => {
                if price <= 0 {
                    return Err(LobError::BadPrice { price });
                }
                Some(price)
            }
            OrderKind::Market => None,
        };
        if let OrderKind::Limit { price } = o.kind {
            if !self.crosses(o.side, price) {
                return self.rest_new(o, price, sink);
            }
        }
        if self.slot(o.id).is_some() {
            return Err(LobError::DuplicateOrder(o.id));
        }
        self.totals.submitted += o.qty as u128;
        let mut report = ExecReport::default();
        let stopped = self.match_incoming(&o, limit, &mut report, sink);
        let rest = o.qty - report.filled;
        if rest > 0 {
            match (o.kind, stopped) {
                (OrderKind::Limit { price }, false) => {
                    let oi = self.rest_order(o.id, o.owner, o.side, price, rest, false);
                    self.index
                        .insert_absent(o.id, oi, |s| self.nodes[s as usize].id);
                    report.resting = rest;
                    sink.event(Event::Added {
                        id: o.id,
                        owner: o.owner,
                        side: o.side,
                        price,
                        qty: rest,
                    });
                }
                _ => {
                    self.totals.cancelled += rest as u128;
                    report.cancelled += rest;
                    sink.event(Event::Cancelled {
                        id: o.id,
                        owner: o.owner,
                        side: o.side,
                        price: limit.unwrap_or(0),
                        qty: rest,
                        remaining: 0,
                        reason: if stopped {
                            CancelReason::SelfTrade
                        } else {
                            CancelReason::Unfilled
                        },
                    });
                }
            }
        }
        Ok(report)
    }

    /// Whether a limit order at `price` would meet the opposite side.
    #[inline(always)]
    fn crosses(&self, side: Side, price: Ticks) -> bool {
        let opp = side.opposite();
        let ladder = match opp {
            Side::Bid => &self.bids,
            Side::Ask => &self.asks,
        };
        ladder
            .best()
            .is_some_and(|(best, _)| best >= key(opp, price))
    }

    /// A limit order that meets nothing: it rests at once. One probe of the
    /// index both checks the id and finds its place.
    #[inline]
    fn rest_new<E: EventSink>(
        &mut self,
        o: NewOrder,
        price: Ticks,
        sink: &mut E,
    ) -> Result<ExecReport, LobError> {
        let (pos, hash) = match self.index.probe(o.id, |s| self.nodes[s as usize].id) {
            Probe::Found(_) => return Err(LobError::DuplicateOrder(o.id)),
            Probe::Vacant { pos, hash } => (pos, hash),
        };
        let oi = self.rest_order(o.id, o.owner, o.side, price, o.qty, false);
        self.index.fill(pos, hash, oi);
        self.totals.submitted += o.qty as u128;
        sink.event(Event::Added {
            id: o.id,
            owner: o.owner,
            side: o.side,
            price,
            qty: o.qty,
        });
        Ok(ExecReport {
            resting: o.qty,
            ..ExecReport::default()
        })
    }

    /// Returns true when self-trade prevention stopped the incoming order.
    #[inline]
    fn match_incoming<E: EventSink>(
        &mut self,
        o: &NewOrder,
        limit: Option<Ticks>,
        report: &mut ExecReport,
        sink: &mut E,
    ) -> bool {
        let opp = o.side.opposite();
        let threshold = match limit {
            Some(p) => key(opp, p),
            None => Ticks::MIN,
        };
        let mut remaining = o.qty;
        while remaining > 0 {
            let ladder = match opp {
                Side::Bid => &self.bids,
                Side::Ask => &self.asks,
            };
            let Some((best, li)) = ladder.best() else {
                break;
            };
            if best < threshold {
                break;
            }
            let li = li as usize;
            let price = self.levels[li].price;
            let mut oi = self.levels[li].head;
            while remaining > 0 && oi != NIL {
                let maker = self.nodes[oi as usize];
                let next = maker.next;
                if maker.owner == o.owner && self.self_trade != SelfTradePolicy::Allow {
                    if self.self_trade == SelfTradePolicy::CancelIncoming {
                        report.filled = o.qty - remaining;
                        self.drop_empty_best(opp, li);
                        return true;
                    }
                    self.remove_node(oi, maker.qty);
                    self.totals.cancelled += maker.qty as u128;
                    sink.event(Event::Cancelled {
                        id: maker.id,
                        owner: maker.owner,
                        side: opp,
                        price,
                        qty: maker.qty,
                        remaining: 0,
                        reason: CancelReason::SelfTrade,
                    });
                    oi = next;
                    continue;
                }
                let q = remaining.min(maker.qty);
                remaining -= q;
                report.notional += price as i128 * q as i128;
                self.totals.filled += 2 * q as u128;
                sink.event(Event::Trade(Fill {
                    taker: o.id,
                    taker_owner: o.owner,
                    maker: maker.id,
                    maker_owner: maker.owner,
                    taker_side: o.side,
                    price,
                    qty: q,
                }));
                if q == maker.qty {
                    self.remove_node(oi, q);
                } else {
                    self.nodes[oi as usize].qty -= q;
                    self.levels[li].qty -= q;
                    self.resting[side_ix(opp)] -= q;
                    self.changes[side_ix(opp)] += 1;
                }
                oi = next;
            }
            self.drop_empty_best(opp, li);
        }
        report.filled = o.qty - remaining;
        false
    }

    /// Removes the best level of `side` if it is level `li` and empty.
    #[inline]
    fn drop_empty_best(&mut self, side: Side, li: usize) {
        if self.levels[li].count == 0 {
            let ladder = match side {
                Side::Bid => &mut self.bids,
                Side::Ask => &mut self.asks,
            };
            if let Some((best, top)) = ladder.best() {
                if top == li as u32 {
                    ladder.remove(best);
                    self.free_levels.push(top);
                }
            }
        }
    }

    /// Unlinks a node holding `qty` lots and frees it and its id. The caller
    /// drops its level if that empties ([`Self::drop_empty_best`] mid-match,
    /// [`Self::drop_level_if_empty`] elsewhere).
    #[inline]
    fn remove_node(&mut self, oi: u32, qty: Lots) {
        let id = self.nodes[oi as usize].id;
        self.index.remove(id, |s| self.nodes[s as usize].id);
        self.unlink_node(oi, qty);
    }

    /// [`Self::remove_node`] for a node whose id the caller already took out
    /// of the index (one hash operation instead of two on a cancel).
    #[inline]
    fn unlink_node(&mut self, oi: u32, qty: Lots) {
        let n = self.nodes[oi as usize];
        let li = n.level as usize;
        let side = {
            let lvl = &mut self.levels[li];
            lvl.qty -= qty;
            lvl.count -= 1;
            if n.prev == NIL {
                lvl.head = n.next;
            }
            if n.next == NIL {
                lvl.tail = n.prev;
            }
            lvl.side
        };
        if n.prev != NIL {
            self.nodes[n.prev as usize].next = n.next;
        }
        if n.next != NIL {
            self.nodes[n.next as usize].prev = n.prev;
        }
        self.resting[side_ix(side)] -= qty;
        self.changes[side_ix(side)] += 1;
        self.free_nodes.push(oi);
    }

    /// Drops level `li` of `side` from its ladder if it is empty.
    fn drop_level_if_empty(&mut self, side: Side, li: usize) {
        if self.levels[li].count != 0 {
            return;
        }
        let k = key(side, self.levels[li].price);
        let ladder = match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
        };
        if let Some(removed) = ladder.remove(k) {
            self.free_levels.push(removed);
        }
    }

    fn level_for(&mut self, side: Side, price: Ticks) -> u32 {
        let k = key(side, price);
        let ladder = match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
        };
        match ladder.get(k) {
            Some(li) => li,
            None => {
                let lvl = Level {
                    price,
                    qty: 0,
                    count: 0,
                    head: NIL,
                    tail: NIL,
                    side,
                };
                let li = alloc(&mut self.levels, &mut self.free_levels, lvl);
                ladder.insert(k, li);
                li
            }
        }
    }

    fn rest_order(
        &mut self,
        id: OrderId,
        owner: Owner,
        side: Side,
        price: Ticks,
        qty: Lots,
        front: bool,
    ) -> u32 {
        let li = self.level_for(side, price);
        let node = Node {
            id,
            qty,
            owner,
            level: li,
            prev: NIL,
            next: NIL,
        };
        let oi = alloc(&mut self.nodes, &mut self.free_nodes, node);
        let lvl = &mut self.levels[li as usize];
        if lvl.head == NIL {
            lvl.head = oi;
            lvl.tail = oi;
        } else if front {
            let old = lvl.head;
            lvl.head = oi;
            self.nodes[oi as usize].next = old;
            self.nodes[old as usize].prev = oi;
        } else {
            let old = lvl.tail;
            lvl.tail = oi;
            self.nodes[oi as usize].prev = old;
            self.nodes[old as usize].next = oi;
        }
        let lvl = &mut self.levels[li as usize];
        lvl.qty += qty;
        lvl.count += 1;
        self.resting[side_ix(side)] += qty;
        self.changes[side_ix(side)] += 1;
        oi
    }

    /// Puts an order at the front of its level's queue without matching.
    ///
    /// This seeds liquidity that was in the book before a recording starts
    /// (a LOBSTER replay's unknown initial orders); everything else goes
    /// through [`Self::submit`].
    pub fn seed_front(
        &mut self,
        id: OrderId,
        owner: Owner,
        side: Side,
        price: Ticks,
        qty: Lots,
    ) -> Result<(), LobError> {
        if qty == 0 {
            return Err(LobError::ZeroQuantity);
        }
        if price <= 0 {
            return Err(LobError::BadPrice { price });
        }
        let (pos, hash) = match self.index.probe(id, |s| self.nodes[s as usize].id) {
            Probe::Found(_) => return Err(LobError::DuplicateOrder(id)),
            Probe::Vacant { pos, hash } => (pos, hash),
        };
        self.totals.submitted += qty as u128;
        let oi = self.rest_order(id, owner, side, price, qty, true);
        self.index.fill(pos, hash, oi);
        Ok(())
    }

    /// Cancels a resting order; returns the lots removed.
    pub fn cancel<E: EventSink>(&mut self, id: OrderId, sink: &mut E) -> Result<Lots, LobError> {
        self.cancel_with(id, CancelReason::Requested, sink)
    }

    fn cancel_with<E: EventSink>(
        &mut self,
        id: OrderId,
        reason: CancelReason,
        sink: &mut E,
    ) -> Result<Lots, LobError> {
        let oi = self
            .index
            .remove(id, |s| self.nodes[s as usize].id)
            .ok_or(LobError::UnknownOrder(id))?;
        let n = self.placed(oi);
        self.unlink_node(oi, n.qty);
        self.drop_level_if_empty(n.side, n.level as usize);
        self.totals.cancelled += n.qty as u128;
        sink.event(Event::Cancelled {
            id,
            owner: n.owner,
            side: n.side,
            price: n.price,
            qty: n.qty,
            remaining: 0,
            reason,
        });
        Ok(n.qty)
    }

    /// Takes `by` lots off a resting order, keeping its queue place. Reducing
    /// by the whole resting size cancels it. Returns the lots left.
    pub fn reduce<E: EventSink>(
        &mut self,
        id: OrderId,
        by: Lots,
        sink: &mut E,
    ) -> Result<Lots, LobError> {
        let (oi, n) = self.take_from(id, by)?;
        if by == n.qty {
            self.cancel(id, sink)?;
            return Ok(0);
        }
        self.shrink(oi, &n, by);
        self.totals.cancelled += by as u128;
        sink.event(Event::Cancelled {
            id,
            owner: n.owner,
            side: n.side,
            price: n.price,
            qty: by,
            remaining: n.qty - by,
            reason: CancelReason::Requested,
        });
        Ok(n.qty - by)
    }

    /// Changes a resting order's price and size. A smaller size at the same
    /// price keeps queue priority; anything else re-enters at the back (and
    /// may trade if the new price crosses).
    pub fn modify<E: EventSink>(
        &mut self,
        id: OrderId,
        price: Ticks,
        qty: Lots,
        sink: &mut E,
    ) -> Result<ExecReport, LobError> {
        if qty == 0 {
            return Err(LobError::ZeroQuantity);
        }
        if price <= 0 {
            return Err(LobError::BadPrice { price });
        }
        let oi = self.slot(id).ok_or(LobError::UnknownOrder(id))?;
        let n = self.placed(oi);
        if price == n.price && qty <= n.qty {
            if qty < n.qty {
                self.reduce(id, n.qty - qty, sink)?;
            }
            return Ok(ExecReport {
                resting: qty,
                cancelled: n.qty - qty,
                ..Default::default()
            });
        }
        self.cancel_with(id, CancelReason::Replaced, sink)?;
        self.submit(
            NewOrder {
                id,
                owner: n.owner,
                side: n.side,
                kind: OrderKind::Limit { price },
                qty,
            },
            sink,
        )
    }

    /// Fills `qty` lots of a resting order against a counterparty outside
    /// the book (a replayed execution). Returns the lots left.
    pub fn execute<E: EventSink>(
        &mut self,
        id: OrderId,
        qty: Lots,
        sink: &mut E,
    ) -> Result<Lots, LobError> {
        let (oi, n) = self.take_from(id, qty)?;
        self.totals.filled += qty as u128;
        sink.event(Event::Trade(Fill {
            taker: EXTERNAL,
            taker_owner: EXTERNAL_OWNER,
            maker: id,
            maker_owner: n.owner,
            taker_side: n.side.opposite(),
            price: n.price,
            qty,
        }));
        if qty == n.qty {
            self.remove_node(oi, qty);
            self.drop_level_if_empty(n.side, n.level as usize);
            Ok(0)
        } else {
            self.shrink(oi, &n, qty);
            Ok(n.qty - qty)
        }
    }

    /// The slot and placement of resting order `id`, checked for taking
    /// `qty` lots off it (a reduction or an outside execution): more than
    /// zero and at most what rests.
    #[inline]
    fn take_from(&self, id: OrderId, qty: Lots) -> Result<(u32, Placed), LobError> {
        if qty == 0 {
            return Err(LobError::ZeroQuantity);
        }
        let oi = self.slot(id).ok_or(LobError::UnknownOrder(id))?;
        let n = self.placed(oi);
        if qty > n.qty {
            return Err(LobError::ReduceTooLarge {
                id,
                by: qty,
                resting: n.qty,
            });
        }
        Ok((oi, n))
    }

    /// Takes `qty` lots (fewer than rest) off the order in slot `oi`,
    /// keeping its queue place: the order, its level and its side.
    #[inline]
    fn shrink(&mut self, oi: u32, n: &Placed, qty: Lots) {
        self.nodes[oi as usize].qty -= qty;
        self.levels[n.level as usize].qty -= qty;
        self.resting[side_ix(n.side)] -= qty;
        self.changes[side_ix(n.side)] += 1;
    }
}

/// Puts `v` in a free slot of `slab` (one `free` lists), or a new one at
/// the end; returns its index.
#[inline]
fn alloc<T>(slab: &mut Vec<T>, free: &mut Vec<u32>, v: T) -> u32 {
    match free.pop() {
        Some(i) => {
            slab[i as usize] = v;
            i
        }
        None => {
            slab.push(v);
            (slab.len() - 1) as u32
        }
    }
}
