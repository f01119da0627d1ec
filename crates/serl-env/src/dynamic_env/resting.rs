//! The agent's orders in the simulated book: crossing, posting, collecting
//! the fills of resting orders, and what the agent sees of them.
//!
//! At each decision the orders resting from the last step are cancelled,
//! unless the new step rests at the same price: then they stay and keep
//! their places in the queue; the newest are trimmed when the step wants
//! less, and a new order behind them adds what it wants more.

use serl_lob::OrderId;

use super::{DynamicEnv, US_PER_MIN};
use crate::placement::{Placement, PlacementStats, QueueState};

/// One of the agent's limit orders resting in the simulated book.
#[derive(Debug, Clone, Copy)]
pub(super) struct Resting {
    id: OrderId,
    /// Its price, dollars.
    price: f64,
    /// Shares resting at the last look.
    left: u64,
    /// The mid when it was posted, dollars.
    mid: f64,
    /// When it was posted, microseconds since the open.
    posted: u64,
}

impl DynamicEnv<'_> {
    /// The calibrated volume of minutes `range` from the open, shares.
    pub(super) fn minute_volume(&self, range: std::ops::Range<usize>) -> f64 {
        range.filter_map(|k| self.cal.minute_volume.get(k)).sum()
    }

    /// A market order of `qty` shares for desk `k` now; returns shares
    /// filled and their notional, dollars.
    pub(super) fn cross(&mut self, k: usize, qty: u64) -> (f64, f64) {
        let mid = self.sim.mid_price();
        let d = &mut self.desks[k];
        let r = self
            .sim
            .execute_market(d.owner, d.order.side.book_side(), qty);
        let (got, cost) = (r.filled as f64, r.notional as f64 * self.sim.tick());
        if let (Some(mid), true) = (mid, got > 0.0) {
            d.ledger
                .fill(d.order.side.sign(), got, cost / got, mid, None);
        }
        (got, cost)
    }

    /// Desk `k`'s resting order at `minute` this step: `qty` shares at
    /// `placement`'s price off the current book, keeping the last step's
    /// orders where the price is the same and cancelling them otherwise (a
    /// crossing step cancels them). Returns what they filled since the last
    /// look and what trades at once (a limit at or through the far touch),
    /// as shares and notional.
    pub(super) fn replace_resting(
        &mut self,
        k: usize,
        placement: Placement,
        qty: f64,
        minute: u16,
    ) -> (f64, f64) {
        // What the kept orders hold now: the others may have traded with
        // them since the last look.
        let (filled, paid) = self.collect(k, minute, self.sim.mid_price());
        let sign = self.desks[k].order.side.sign();
        let Some((ticks, mid)) = super::limit_ticks(&self.sim, sign, placement) else {
            self.withdraw(k);
            return (filled, paid);
        };
        let price = ticks as f64 * self.sim.tick();
        if self.desks[k]
            .resting
            .first()
            .is_some_and(|r| (r.price - price).abs() > 1e-9)
        {
            self.withdraw(k);
        }
        let mut want = qty.max(0.0).floor() as u64;
        // Keep the oldest orders (the best places) up to what is wanted.
        let mut kept = Vec::new();
        for mut r in std::mem::take(&mut self.desks[k].resting) {
            if r.left > want {
                r.left = self.sim.reduce_resting(r.id, r.left - want);
            }
            want -= r.left;
            if r.left > 0 {
                kept.push(r);
            }
        }
        self.desks[k].resting = kept;
        if want == 0 {
            return (filled, paid);
        }
        let (g, c) = self.post(k, ticks, mid, want);
        (filled + g, paid + c)
    }

    /// Posts `qty` shares for desk `k` at `ticks`, behind the orders kept.
    fn post(&mut self, k: usize, ticks: serl_lob::Ticks, mid: f64, qty: u64) -> (f64, f64) {
        let tick = self.sim.tick();
        let d = &mut self.desks[k];
        let Some((id, r)) = self
            .sim
            .post_limit(d.owner, d.order.side.book_side(), ticks, qty)
        else {
            return (0.0, 0.0);
        };
        let (got, cost) = (r.filled as f64, r.notional as f64 * tick);
        if got > 0.0 {
            d.ledger
                .fill(d.order.side.sign(), got, cost / got, mid, None);
        }
        if r.resting > 0 {
            d.resting.push(Resting {
                id,
                price: ticks as f64 * tick,
                left: r.resting,
                mid,
                posted: self.sim.now(),
            });
        }
        (got, cost)
    }

    /// What desk `k`'s resting orders filled since the last look, at
    /// `minute` (the mid at its start was `mid`): shares and notional.
    pub(super) fn collect(&mut self, k: usize, minute: u16, mid: Option<f64>) -> (f64, f64) {
        let d = &mut self.desks[k];
        let sign = d.order.side.sign();
        let (mut got, mut cost) = (0.0, 0.0);
        for r in &mut d.resting {
            let now = self.sim.book.order(r.id).map_or(0, |o| o.qty);
            let q = r.left.saturating_sub(now) as f64;
            r.left = now;
            if q > 0.0 {
                let at_fill = (minute, mid.unwrap_or(r.price));
                d.ledger.fill(sign, q, r.price, r.mid, Some(at_fill));
                got += q;
                cost += q * r.price;
            }
        }
        d.resting.retain(|r| r.left > 0);
        (got, cost)
    }

    /// Cancels every resting order of desk `k`.
    pub(super) fn withdraw(&mut self, k: usize) {
        for r in std::mem::take(&mut self.desks[k].resting) {
            self.sim.cancel_resting(r.id);
        }
    }

    /// The placement figures so far: adverse moves on the simulated mids
    /// at minute closes (the current mid past the minutes played).
    pub(super) fn placement_stats(&self, k: usize, bench: f64) -> PlacementStats {
        let d = &self.desks[k];
        let mut ledger = d.ledger.clone();
        let (open, stats) = (self.view.open_minute, self.sim.stats());
        let now = self.sim.mid_price().unwrap_or(bench);
        let closed = (self.sim.now() + 1) / US_PER_MIN;
        ledger.settle(d.order.side.sign(), |m| {
            let k = usize::from(m.saturating_sub(open));
            match stats.mid.get(k) {
                Some(&mid) if mid > 0.0 && (k as u64) < closed => mid,
                _ => now,
            }
        });
        let sign = d.order.side.sign();
        PlacementStats::of(&ledger, d.order.qty, d.filled, bench, sign)
    }

    /// Desk `k`'s oldest resting order as the coming decision sees it:
    /// the shares ahead of it (over the session's average minute volume)
    /// and how long it has rested.
    pub(super) fn queue_state(&self, k: usize) -> QueueState {
        let Some(r) = self.desks[k].resting.first() else {
            return QueueState::default();
        };
        let ahead = self
            .sim
            .book
            .queue_position(r.id)
            .map_or(0.0, |q| q.qty_ahead as f64);
        QueueState {
            ahead: ahead / self.view.avg_minute_volume.max(1.0),
            minutes: self.sim.now().saturating_sub(r.posted) as f64 / US_PER_MIN as f64,
        }
    }
}
