//! The replay's engine state: the book, its anonymous liquidity, and the
//! rules for applying a LOBSTER message and reconciling levels as they
//! come into view.

use rustc_hash::FxHashMap;

use super::messages::{LobsterEvent, MessageRow};
use super::window::Window;
use super::{ReplayError, ANON_BASE, REPLAY_OWNER};
use crate::{LobError, OrderBook, OrderId, SelfTradePolicy, Side, Ticks};

pub(super) struct Replayer<'a> {
    pub(super) book: OrderBook,
    tick: i64,
    file: &'a str,
    levels: usize,
    anon: FxHashMap<(Side, Ticks), OrderId>,
    next_anon: OrderId,
    /// What the previous row showed: [asks, bids].
    prev: [Window; 2],
    /// Spare windows, swapped with `prev` so that no row allocates.
    next: [Window; 2],
    /// Ids removed as unrecorded cancels; later messages about them are
    /// about liquidity the replay already took out.
    reconciled: rustc_hash::FxHashSet<OrderId>,
    /// Lots seeded as anonymous liquidity.
    pub(super) seeded: u64,
    /// Lots removed as unrecorded cancels.
    pub(super) removed: u64,
    /// Messages about unknown orders at levels outside the view.
    pub(super) unobserved: u64,
    scratch: Vec<Ticks>,
}

fn side_of(direction: i8) -> Side {
    if direction == 1 {
        Side::Bid
    } else {
        Side::Ask
    }
}

fn window_ix(side: Side) -> usize {
    match side {
        Side::Ask => 0,
        Side::Bid => 1,
    }
}

impl<'a> Replayer<'a> {
    /// An empty book for a replay of `file` showing `levels` levels a side.
    pub(super) fn new(file: &'a str, tick: i64, levels: usize) -> Self {
        Replayer {
            book: OrderBook::with_capacity(SelfTradePolicy::Allow, 1 << 16),
            tick,
            file,
            levels,
            anon: FxHashMap::default(),
            next_anon: ANON_BASE,
            prev: Default::default(),
            next: Default::default(),
            reconciled: Default::default(),
            seeded: 0,
            removed: 0,
            unobserved: 0,
            scratch: Vec::new(),
        }
    }

    pub(super) fn ticks(&self, line: u64, price: i64) -> Result<Ticks, ReplayError> {
        if price % self.tick != 0 {
            return Err(ReplayError::Engine {
                file: self.file.into(),
                line,
                error: LobError::OffTick {
                    raw: price,
                    tick: self.tick,
                },
            });
        }
        Ok(price / self.tick)
    }

    pub(super) fn engine(&self, line: u64) -> impl Fn(LobError) -> ReplayError + '_ {
        move |error| ReplayError::Engine {
            file: self.file.into(),
            line,
            error,
        }
    }

    /// Adds `qty` anonymous lots at the front of a level.
    fn seed(&mut self, side: Side, p: Ticks, qty: u64) -> Result<(), LobError> {
        if qty == 0 {
            return Ok(());
        }
        self.seeded += qty;
        let mut total = qty;
        if let Some(&id) = self.anon.get(&(side, p)) {
            if let Some(o) = self.book.order(id) {
                // Grow the existing anonymous order, keeping it in front.
                self.book.cancel(id, &mut ())?;
                total += o.qty;
            }
        }
        let id = self.next_anon;
        self.next_anon += 1;
        self.anon.insert((side, p), id);
        self.book.seed_front(id, REPLAY_OWNER, side, p, total)
    }

    /// Removes `qty` lots from a level, newest orders first: the ones that
    /// arrived or were cancelled while the level was out of view are the
    /// most recent. Returns the lots it could not find.
    fn take_from_level(
        &mut self,
        side: Side,
        p: Ticks,
        mut qty: u64,
        execute: bool,
    ) -> Result<u64, LobError> {
        let queue = self.book.queue(side, p);
        for o in queue.iter().rev() {
            if qty == 0 {
                break;
            }
            let take = qty.min(o.qty);
            if execute {
                self.book.execute(o.id, take, &mut ())?;
            } else {
                self.book.reduce(o.id, take, &mut ())?;
            }
            if take == o.qty && self.anon.get(&(side, p)) != Some(&o.id) {
                self.reconciled.insert(o.id);
            }
            qty -= take;
        }
        Ok(qty)
    }

    /// A cancel (types 2, 3) or execution (4) of `size` lots at a level.
    ///
    /// The named order gives what it holds. The order may hold less than the
    /// message says when it rested before the recording, arrived while its
    /// level was out of view, or lost lots to an unrecorded cancel that the
    /// replay had to assign to some order at its level; the rest then comes
    /// from the level's anonymous order, then from its newest orders.
    #[inline]
    fn remove_at_level(&mut self, line: u64, m: &MessageRow, p: Ticks) -> Result<(), ReplayError> {
        let side = side_of(m.direction);
        let execute = m.kind == LobsterEvent::Execute;
        let size = m.size as u64;
        let mut left = size;
        if let Some(o) = self.book.order(m.id) {
            let take = left.min(o.qty);
            let r = match (execute, m.kind == LobsterEvent::Delete && o.qty > size) {
                (true, _) => self.book.execute(m.id, take, &mut ()).map(|_| ()),
                (false, false) => self.book.reduce(m.id, take, &mut ()).map(|_| ()),
                (false, true) => {
                    // Deleted with more left than LOBSTER says it had: the
                    // excess belongs to an order the replay took lots from
                    // by mistake, so it stays as anonymous liquidity.
                    let excess = o.qty - size;
                    self.book
                        .cancel(m.id, &mut ())
                        .and_then(|_| self.seed(side, p, excess))
                }
            };
            r.map_err(self.engine(line))?;
            left -= take;
            if left == 0 {
                return Ok(());
            }
        } else if !self.prev[window_ix(side)].shows(p) {
            self.unobserved += 1;
            return Ok(());
        }
        if let Some(&anon) = self.anon.get(&(side, p)) {
            if let Some(o) = self.book.order(anon) {
                let take = left.min(o.qty);
                let r = if execute {
                    self.book.execute(anon, take, &mut ())
                } else {
                    self.book.reduce(anon, take, &mut ())
                };
                r.map_err(self.engine(line))?;
                left -= take;
            }
        }
        // Then the newest orders: NASDAQ replaces an order under a new id,
        // and a replace that leaves the visible book alone is not in the
        // file, so the lots of a never-seen id can sit under an old one.
        if left > 0 {
            left = self
                .take_from_level(side, p, left, execute)
                .map_err(self.engine(line))?;
        }
        if left > 0 && !self.reconciled.contains(&m.id) {
            return Err(ReplayError::Inconsistent {
                file: self.file.into(),
                line,
                message: format!(
                    "order id {} is unknown and the visible level {} {:?} holds only {} of its {size} lots",
                    m.id,
                    p * self.tick,
                    side,
                    size - left
                ),
            });
        }
        Ok(())
    }

    #[inline]
    pub(super) fn apply(&mut self, line: u64, m: &MessageRow) -> Result<(), ReplayError> {
        let side = side_of(m.direction);
        let size = m.size as u64;
        match m.kind {
            LobsterEvent::Submit => {
                let p = self.ticks(line, m.price)?;
                self.book
                    .submit(
                        crate::NewOrder {
                            id: m.id,
                            owner: REPLAY_OWNER,
                            side,
                            kind: crate::OrderKind::Limit { price: p },
                            qty: size,
                        },
                        &mut (),
                    )
                    .map_err(self.engine(line))?;
            }
            LobsterEvent::Cancel | LobsterEvent::Delete | LobsterEvent::Execute => {
                let p = self.ticks(line, m.price)?;
                self.remove_at_level(line, m, p)?;
            }
            // The visible book is unchanged.
            LobsterEvent::ExecuteHidden | LobsterEvent::Cross | LobsterEvent::Halt => {}
        }
        Ok(())
    }

    /// Brings levels that just came into view to the row's sizes, then makes
    /// this row the previous one. Returns true when the book already agreed
    /// with the row on both sides, so nothing needed checking.
    #[inline]
    pub(super) fn reconcile(&mut self, row: &[i64]) -> Result<bool, LobError> {
        let mut agreed = true;
        for (side, off) in [(Side::Ask, 0usize), (Side::Bid, 2usize)] {
            let wi = window_ix(side);
            let mut now = std::mem::take(&mut self.next[wi]);
            now.fill(row, self.levels, off, self.tick);
            let same = {
                let mut ours = self.book.levels(side).take(self.levels);
                let tick = self.tick;
                now.levels.iter().all(|&(p, q)| {
                    ours.next()
                        .is_some_and(|l| l.price * tick == p && l.qty as i64 == q)
                }) && ours.next().is_none()
            };
            if same {
                self.next[wi] = std::mem::replace(&mut self.prev[wi], now);
                continue;
            }
            agreed = false;
            let mut prices = std::mem::take(&mut self.scratch);
            prices.clear();
            prices.extend(now.levels.iter().map(|l| l.0 / self.tick));
            prices.extend(
                self.book
                    .levels(side)
                    .map(|l| l.price)
                    .take_while(|&p| now.covers(side, p)),
            );
            for &p in &prices {
                if self.prev[wi].shows(p) {
                    continue;
                }
                let ours = self.book.qty_at(side, p) as i64;
                let want = now.size_at(p);
                if want > ours {
                    self.seed(side, p, (want - ours) as u64)?;
                } else if want < ours {
                    self.removed += (ours - want) as u64;
                    self.take_from_level(side, p, (ours - want) as u64, false)?;
                }
            }
            self.scratch = prices;
            self.next[wi] = std::mem::replace(&mut self.prev[wi], now);
        }
        Ok(agreed)
    }
}

/// Builds the book before message 0: row 0 with message 0 taken back out.
pub(super) fn opening_book(
    r: &mut Replayer,
    row0: &[i64],
    m0: &MessageRow,
) -> Result<(), ReplayError> {
    use LobsterEvent::{Cancel, Delete, Execute, Submit};
    let mut book: Vec<(Side, Ticks, i64)> = Vec::new();
    for (side, off) in [(Side::Ask, 0usize), (Side::Bid, 2usize)] {
        let w = Window::from_row(row0, r.levels, off, r.tick);
        for &(raw, size) in &w.levels {
            book.push((side, r.ticks(1, raw)?, size));
        }
        r.prev[window_ix(side)] = w;
    }
    if matches!(m0.kind, Submit | Cancel | Delete | Execute) {
        let (side0, p0) = (side_of(m0.direction), r.ticks(1, m0.price)?);
        let delta = if m0.kind == Submit { -m0.size } else { m0.size };
        match book.iter_mut().find(|(s, p, _)| *s == side0 && *p == p0) {
            Some(l) => l.2 += delta,
            None => book.push((side0, p0, delta)),
        }
    }
    for &(side, p, size) in &book {
        if size < 0 {
            return Err(ReplayError::Inconsistent {
                file: r.file.into(),
                line: 1,
                message: "the first message removes more than the first order-book row holds"
                    .into(),
            });
        }
        r.seed(side, p, size as u64).map_err(r.engine(1))?;
    }
    Ok(())
}
