//! Resting orders in the static replay: their limit price, their fills
//! under the [`FillModel`](crate::FillModel) or in a LOBSTER day's real
//! queue, and what the agent sees of them.
//!
//! A step's resting order is cancelled at the next decision unless the
//! next one rests at the same price: then it stays, keeping its place in
//! the queue (and how long it has rested), with its size set to the new
//! step's.

use super::StaticEnv;
use crate::lobster_queue::{LobsterDay, QueueTrack};
use crate::placement::{Placement, PlacementStats, QueueState};

/// The agent's order resting from one step into the next.
#[derive(Debug, Clone)]
pub(super) struct Rested {
    /// Its price, dollars.
    price: f64,
    /// The mid when it was posted, dollars: its fills' spread captured is
    /// measured from it.
    mid: f64,
    /// The minute it was posted.
    since: u16,
    /// Shares ahead of it: an estimate on minute bars (the touch's size
    /// when it joined, less what traded at its price since).
    ahead: f64,
    /// Its place in the real queue, on a LOBSTER day.
    track: Option<QueueTrack>,
}

impl StaticEnv<'_> {
    /// The limit price of `placement` for a step starting at `from`, and
    /// the mid it was set from: the last bar before the step (its close as
    /// the mid, its half spread), or the real book on a LOBSTER day. `None`
    /// for a crossing order, for a limit at or through the far touch, which
    /// trades as one, and for a step before which the session has no bar
    /// (nothing known to set a price from: the step crosses).
    pub(super) fn limit_price(&self, placement: Placement, from: u16) -> Option<(f64, f64)> {
        let v = &*self.view;
        let i = self.last_bar_before(from)?;
        let (mid, half) = match self.queue {
            Some(day) => day.quote_at(f64::from(from) * 60.0)?,
            None => (*v.close.get(i)?, v.half_spread[i]),
        };
        let p = placement.limit_price(self.sign, mid, half)?;
        let far = mid + self.sign * half;
        (self.sign * (far - p) > 1e-9).then_some((p, mid))
    }

    /// The last bar before `minute`, if the session has one.
    fn last_bar_before(&self, minute: u16) -> Option<usize> {
        let v = &*self.view;
        v.minute.partition_point(|&m| m < minute).checked_sub(1)
    }

    /// The order resting at `price` for the step starting at `from`: the
    /// last step's when it rested at the same price, else a new one at the
    /// back of the queue.
    fn join(&mut self, price: f64, mid: f64, from: u16) -> Rested {
        if let Some(r) = self.rested.take() {
            if (r.price - price).abs() < 1e-9 {
                return r;
            }
        }
        let v = &*self.view;
        let i = self.last_bar_before(from).unwrap_or(0);
        let touch = mid - self.sign * v.half_spread.get(i).copied().unwrap_or(0.0);
        // Inside the spread nobody is ahead; at or behind the touch, the
        // quoted touch size (or the book model's).
        let inside = self.sign * (price - touch) > crate::TICK / 2.0;
        let sizes = if self.sign > 0.0 {
            v.bid_size.as_ref()
        } else {
            v.ask_size.as_ref()
        };
        let model = 0.05 * v.avg_minute_volume;
        let shown = sizes.map_or(model, |s| s.get(i).copied().unwrap_or(model));
        Rested {
            price,
            mid,
            since: from,
            ahead: if inside { 0.0 } else { shown },
            track: self
                .queue
                .map(|day| day.join_queue(self.sign, price, f64::from(from) * 60.0)),
        }
    }

    /// Rests `qty` shares at `price` (set when the mid was `mid`) through
    /// the step starting at `from` (its `bars`), each bar giving at most
    /// what its participation cap has left after `used`. Returns the shares
    /// filled and their notional.
    pub(super) fn rest(
        &mut self,
        from: u16,
        bars: std::ops::Range<usize>,
        (price, mid): (f64, f64),
        qty: f64,
        used: &[f64],
    ) -> (f64, f64) {
        let mut r = self.join(price, mid, from);
        let v = &*self.view;
        // The bar the order was posted in, when it was posted this step.
        let posting_bar = r.since == from && v.minute.get(bars.start) == Some(&from);
        let skip = usize::from(posting_bar && !self.cfg.fills.placement_bar);
        let got = match self.queue {
            Some(day) => self.rest_in_queue(day, &mut r, bars, qty, used),
            None => self.rest_on_bars(&mut r, bars, skip, qty, used),
        };
        self.rested = (got < qty - 1e-9).then_some(r);
        (got, got * price)
    }

    /// [`StaticEnv::rest`] under the fill model of minute bars, the first
    /// `skip` bars giving no fill.
    fn rest_on_bars(
        &mut self,
        r: &mut Rested,
        bars: std::ops::Range<usize>,
        skip: usize,
        qty: f64,
        used: &[f64],
    ) -> f64 {
        let v = &*self.view;
        let model = self.cfg.fills;
        let mut got = 0.0;
        for (k, i) in bars.enumerate() {
            let bar = (v.low[i], v.high[i], v.volume[i]);
            if k >= skip && got < qty - 1e-12 {
                let room = self.cfg.participation_cap * v.volume[i] - used[k];
                let q = model.bar_fill(self.sign, r.price, bar, room, qty - got);
                if q > 0.0 {
                    got += q;
                    let at_fill = (v.minute[i], v.price[i]);
                    self.ledger
                        .fill(self.sign, q, r.price, r.mid, Some(at_fill));
                }
            }
            // The queue ahead thins by what the bar traded at the price,
            // and is gone once the bar traded through it.
            let through = self.sign * (r.price - if self.sign > 0.0 { bar.0 } else { bar.1 });
            if through >= crate::TICK / 2.0 {
                r.ahead = 0.0;
            } else if through > -crate::TICK / 2.0 {
                let levels = ((bar.1 - bar.0) / crate::TICK).round().max(0.0) + 1.0;
                r.ahead = (r.ahead - bar.2 / levels).max(0.0);
            }
        }
        got
    }

    /// [`StaticEnv::rest`] in the day's real queue, through the step's
    /// minutes, within the participation cap of its bars.
    fn rest_in_queue(
        &mut self,
        day: &LobsterDay,
        r: &mut Rested,
        bars: std::ops::Range<usize>,
        qty: f64,
        used: &[f64],
    ) -> f64 {
        let v = &*self.view;
        let (_, to) = self.step_minutes(self.step);
        let volume: f64 = bars.map(|i| v.volume[i]).sum();
        let cap = self.cfg.participation_cap * volume - used.iter().sum::<f64>();
        let Some(track) = r.track.as_mut() else {
            return 0.0;
        };
        let mut got = 0.0;
        for (t, q, mid_then) in day.work_queue(track, qty, f64::from(to) * 60.0, cap) {
            got += q;
            let at_fill = ((t / 60.0).floor() as u16, mid_then);
            self.ledger
                .fill(self.sign, q, r.price, r.mid, Some(at_fill));
        }
        r.ahead = track.ahead as f64;
        got
    }

    /// The order resting from the last step, as the coming decision sees
    /// it.
    pub(super) fn queue_state(&self) -> QueueState {
        match &self.rested {
            Some(r) => {
                let (from, _) = self.step_minutes(self.step.min(self.steps.saturating_sub(1)));
                QueueState {
                    ahead: r.ahead / self.view.avg_minute_volume.max(1.0),
                    minutes: f64::from(from.saturating_sub(r.since)),
                }
            }
            None => QueueState::default(),
        }
    }

    /// The placement figures so far, with the adverse moves measured on the
    /// bars' prices after each passive fill (on a LOBSTER day, on the real
    /// book's mid, as the fills' own mids are).
    pub(super) fn placement_stats(&self) -> PlacementStats {
        let v = &*self.view;
        let mut ledger = self.ledger.clone();
        let bar_price = |m: u16| {
            let i = v.minute.partition_point(|&x| x <= m);
            v.price[i.saturating_sub(1)]
        };
        ledger.settle(self.sign, |m| match self.queue {
            Some(day) => day
                .quote_at(f64::from(m) * 60.0)
                .map_or_else(|| bar_price(m), |(mid, _)| mid),
            None => bar_price(m),
        });
        PlacementStats::of(&ledger, self.order.qty, self.filled, self.bench, self.sign)
    }
}
