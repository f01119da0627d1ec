//! The parametric baseline: Poisson order flow with empirical rates per
//! price level, in the style of Cont, Stoikov & Talreja (2010), fitted to
//! the real LOBSTER day it is compared with.
//!
//! - New limit orders arrive at rate λ(d) per side, `d` ticks behind the
//!   own side's best price (negative: inside the spread), with sizes drawn
//!   from the day's limit orders.
//! - Market orders arrive at rate μ per side, sizes drawn from the day's
//!   market orders (runs of executions at one time).
//! - Each resting order is cancelled at rate θ(d) by its depth; θ(d) is the
//!   day's cancels at depth d over the time-averaged number of orders
//!   resting there (visible size over the mean order size), and orders
//!   deeper than any depth the files show keep the deepest θ.
//!
//! The rates are constant through the day and only what the files show is
//! fitted: a level-1 file gives orders at and inside the touch only. That
//! is the baseline's nature, not a defect to tune away: the agent-based
//! market has to beat a model that knows exactly the day's rates.

use std::collections::HashMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp};
use serl_lob::{
    BookRows, Event, LobsterEvent, LobsterRecorder, MessageRow, NewOrder, OrderBook, OrderId,
    OrderKind, Side, Ticks,
};

use super::features::DayFeatures;

/// Poisson order flow fitted to one LOBSTER day.
#[derive(Debug, Clone, PartialEq)]
pub struct ParametricFlow {
    /// Depth of `limit_rate[0]` and `cancel_rate[0]`, ticks.
    depth_min: i64,
    /// New limit orders per second per side, by depth.
    limit_rate: Vec<f64>,
    /// Cancels per resting order per second, by depth (index 0 is depth
    /// `depth_min.max(0)`).
    cancel_rate: Vec<f64>,
    /// Market orders per second per side.
    market_rate: f64,
    limit_sizes: Vec<u64>,
    market_sizes: Vec<u64>,
    /// The day's first order-book row: the opening book.
    opening: Vec<i64>,
    levels: usize,
    tick: i64,
    open: f64,
    seconds: f64,
    /// The day's median spread, ticks: where a side that emptied quotes
    /// again, measured from the other.
    spread: i64,
}

impl ParametricFlow {
    /// Fits the flow to a real day, `f` being its features as
    /// [`DayFeatures::measure`] gave them (measured once by the caller,
    /// who scores the day with them too); `None` when it holds too little
    /// to fit (no limit order, market order or two-sided book).
    pub fn fit(
        f: &DayFeatures,
        messages: &[MessageRow],
        rows: &BookRows,
        tick: i64,
    ) -> Option<ParametricFlow> {
        let (first, last) = (messages.first()?, messages.last()?);
        let seconds = (last.time - first.time).max(1.0);
        let mut depths: Vec<i64> = f.limit_depth.iter().map(|s| s.1.round() as i64).collect();
        if depths.is_empty() {
            return None;
        }
        depths.sort_unstable();
        let pct = |p: f64| depths[((depths.len() - 1) as f64 * p) as usize];
        let (depth_min, depth_max) = (pct(0.01).min(0), pct(0.99).max(0));
        let span = (depth_max - depth_min + 1) as usize;
        let mut limit_rate = vec![0.0; span];
        for d in &depths {
            limit_rate[(d.clamp(&depth_min, &depth_max) - depth_min) as usize] += 1.0;
        }
        limit_rate.iter_mut().for_each(|r| *r /= 2.0 * seconds);
        let limit_sizes = sizes(messages, |m| m.kind == LobsterEvent::Submit);
        let market_sizes: Vec<u64> = f
            .market_size
            .iter()
            .map(|s| 10f64.powf(s.1).round() as u64)
            .collect();
        let mean_size = limit_sizes.iter().sum::<u64>() as f64 / limit_sizes.len().max(1) as f64;
        let cancel_rate = cancel_rates(messages, rows, tick, depth_max.max(0), mean_size, seconds);
        let mut spreads: Vec<f64> = f.spread.iter().map(|s| s.1).collect();
        spreads.sort_by(f64::total_cmp);
        if limit_sizes.is_empty() || market_sizes.is_empty() || spreads.is_empty() {
            return None;
        }
        Some(ParametricFlow {
            depth_min,
            limit_rate,
            cancel_rate,
            market_rate: market_sizes.len() as f64 / (2.0 * seconds),
            limit_sizes,
            market_sizes,
            opening: rows.row(0).to_vec(),
            levels: rows.levels(),
            tick,
            open: first.time,
            seconds,
            spread: spreads[spreads.len() / 2].round().max(1.0) as i64,
        })
    }

    /// The same flow played from `open` (seconds after midnight) for
    /// `seconds`, starting from the book `opening` (an order-book row of
    /// the fitted day's depth): the rest of a session, from the fitted
    /// part's last book.
    pub fn continued(&self, open: f64, seconds: f64, opening: &[i64]) -> ParametricFlow {
        ParametricFlow {
            open,
            seconds: seconds.max(1.0),
            opening: opening.to_vec(),
            ..self.clone()
        }
    }

    /// The opening mid, ticks; one side's best and half the day's spread
    /// when the opening row quotes one side only.
    fn opening_mid(&self) -> f64 {
        let (ask, qa, bid, qb) = (
            self.opening[0],
            self.opening[1],
            self.opening[2],
            self.opening[3],
        );
        let tick = self.tick as f64;
        let half = self.spread as f64 / 2.0;
        match (qa > 0, qb > 0) {
            (true, true) => (ask + bid) as f64 / 2.0 / tick,
            (true, false) => ask as f64 / tick - half,
            (false, true) => bid as f64 / tick + half,
            (false, false) => 0.0,
        }
    }

    /// Market orders per second per side.
    pub fn market_rate(&self) -> f64 {
        self.market_rate
    }

    /// New limit orders per second per side, all depths.
    pub fn limit_rate(&self) -> f64 {
        self.limit_rate.iter().sum()
    }

    /// Simulates the day with `seed` and records it at the real day's
    /// number of levels.
    pub fn simulate(&self, seed: u64) -> LobsterRecorder {
        let mut day = FlowDay {
            flow: self,
            book: OrderBook::default(),
            rec: LobsterRecorder::new(self.levels, self.tick),
            live: Vec::new(),
            index: HashMap::new(),
            rng: SmallRng::seed_from_u64(seed),
            next_id: 0,
            events: Vec::new(),
            last_mid: self.opening_mid(),
        };
        day.rec.at(self.open);
        for level in self.opening.chunks(4) {
            for (side, price, qty) in [
                (Side::Ask, level[0], level[1]),
                (Side::Bid, level[2], level[3]),
            ] {
                if qty > 0 {
                    day.limit(side, price / self.tick, qty as u64);
                }
            }
        }
        let limits = 2.0 * self.limit_rate();
        let markets = 2.0 * self.market_rate;
        let mut t = 0.0;
        loop {
            let cancels = day.cancel_rate();
            let total = limits + markets + cancels;
            t += Exp::new(total).expect("positive rate").sample(&mut day.rng);
            if t > self.seconds {
                break;
            }
            day.rec.at(self.open + t);
            let u = day.rng.random::<f64>() * total;
            let side = if day.rng.random::<bool>() {
                Side::Bid
            } else {
                Side::Ask
            };
            if u < limits {
                day.new_limit(side);
            } else if u < limits + markets {
                let qty = self.market_sizes[day.rng.random_range(0..self.market_sizes.len())];
                day.send(side, OrderKind::Market, qty);
            } else {
                day.cancel(u - limits - markets);
            }
        }
        day.rec
    }
}

/// Sizes of the messages `keep` selects.
fn sizes(messages: &[MessageRow], keep: impl Fn(&MessageRow) -> bool) -> Vec<u64> {
    messages
        .iter()
        .filter(|m| keep(m) && m.size > 0)
        .map(|m| m.size as u64)
        .collect()
}

/// θ(d) for d in 0..=depth_max: cancels at depth d over the time-averaged
/// orders resting at d (both sides), per second.
fn cancel_rates(
    messages: &[MessageRow],
    rows: &BookRows,
    tick: i64,
    depth_max: i64,
    mean_size: f64,
    seconds: f64,
) -> Vec<f64> {
    let span = depth_max as usize + 1;
    let (mut cancels, mut resting) = (vec![0.0; span], vec![0.0; span]);
    for i in 1..messages.len().min(rows.len()) {
        let (m, before) = (&messages[i], rows.row(i - 1));
        let dt = m.time - messages[i - 1].time;
        let (best_ask, best_bid) = (before[0], before[2]);
        for level in before.chunks(4) {
            for (price, qty, best, sign) in [
                (level[0], level[1], best_ask, 1),
                (level[2], level[3], best_bid, -1),
            ] {
                let d = (sign * (price - best)) / tick;
                if qty > 0 && (0..=depth_max).contains(&d) {
                    resting[d as usize] += dt * qty as f64 / mean_size.max(1.0);
                }
            }
        }
        if matches!(m.kind, LobsterEvent::Cancel | LobsterEvent::Delete) {
            let best = if m.direction == 1 { best_bid } else { best_ask };
            let d = (m.direction as i64 * (best - m.price)) / tick;
            if (0..=depth_max).contains(&d) {
                cancels[d as usize] += 1.0;
            }
        }
    }
    let mut rates: Vec<f64> = cancels
        .iter()
        .zip(&resting)
        .map(|(c, r)| if *r > 0.0 { c / r } else { f64::NAN })
        .collect();
    // A depth never seen resting takes its shallower neighbour's rate.
    super::fill_gaps(&mut rates, 1.0 / seconds);
    rates
}

/// One simulated day of the flow.
struct FlowDay<'a> {
    flow: &'a ParametricFlow,
    book: OrderBook,
    rec: LobsterRecorder,
    /// Resting order ids, for drawing a cancel among the deep ones.
    live: Vec<OrderId>,
    index: HashMap<OrderId, usize>,
    rng: SmallRng,
    next_id: OrderId,
    events: Vec<Event>,
    /// The last two-sided mid, ticks: where orders go when both sides
    /// emptied.
    last_mid: f64,
}

impl FlowDay<'_> {
    fn theta(&self, depth: i64) -> f64 {
        let rates = &self.flow.cancel_rate;
        rates[(depth.max(0) as usize).min(rates.len() - 1)]
    }

    /// The total cancel rate of the resting orders.
    fn cancel_rate(&self) -> f64 {
        let deepest = self.flow.cancel_rate.len() as i64 - 1;
        let mut rate = 0.0;
        let mut counted = 0usize;
        for side in [Side::Bid, Side::Ask] {
            let Some(best) = self.book.best(side) else {
                continue;
            };
            for l in self.book.levels(side) {
                let d = (l.price - best.price).abs();
                if d > deepest {
                    break;
                }
                rate += self.theta(d) * l.orders as f64;
                counted += l.orders as usize;
            }
        }
        rate + self.theta(deepest) * (self.live.len() - counted.min(self.live.len())) as f64
    }

    /// Cancels the order that `u` (below the cancel rate) falls on.
    fn cancel(&mut self, mut u: f64) {
        let deepest = self.flow.cancel_rate.len() as i64 - 1;
        for side in [Side::Bid, Side::Ask] {
            let Some(best) = self.book.best(side) else {
                continue;
            };
            let levels: Vec<_> = self
                .book
                .levels(side)
                .take_while(|l| (l.price - best.price).abs() <= deepest)
                .collect();
            for l in levels {
                let r = self.theta((l.price - best.price).abs()) * l.orders as f64;
                if u < r {
                    let queue = self.book.queue(side, l.price);
                    let id = queue[self.rng.random_range(0..queue.len())].id;
                    return self.remove(id);
                }
                u -= r;
            }
        }
        // A deep order: drawn among all resting ones until a deep one, and
        // where the draws miss, the first deep one in the list, so that no
        // cancel the rate counted is lost.
        let deep = |day: &Self, id: OrderId| {
            day.book.order(id).is_some_and(|o| {
                let best = day.book.best(o.side).map_or(o.price, |l| l.price);
                (o.price - best).abs() > deepest
            })
        };
        if self.live.is_empty() {
            return;
        }
        for _ in 0..64 {
            let id = self.live[self.rng.random_range(0..self.live.len())];
            if deep(self, id) {
                return self.remove(id);
            }
        }
        if let Some(&id) = self.live.iter().find(|&&id| deep(self, id)) {
            self.remove(id);
        }
    }

    fn remove(&mut self, id: OrderId) {
        self.events.clear();
        let _ = self.book.cancel(id, &mut self.events);
        self.settle();
    }

    /// A new limit order at a depth drawn from λ.
    fn new_limit(&mut self, side: Side) {
        let flow = self.flow;
        let mut u = self.rng.random::<f64>() * flow.limit_rate();
        let mut k = 0;
        while k + 1 < flow.limit_rate.len() && u >= flow.limit_rate[k] {
            u -= flow.limit_rate[k];
            k += 1;
        }
        let depth = flow.depth_min + k as i64;
        let (own, other) = (
            self.book.best(side).map(|l| l.price),
            self.book.best(side.opposite()).map(|l| l.price),
        );
        let sign = if side == Side::Bid { 1 } else { -1 };
        let touch = match (own, other) {
            (Some(p), _) => p,
            (None, Some(o)) => o - sign * flow.spread,
            (None, None) => {
                (self.last_mid - sign as f64 * flow.spread as f64 / 2.0).round() as Ticks
            }
        };
        let mut price = touch - sign * depth;
        // Inside the spread but never through it.
        if let Some(o) = other {
            if sign * (price - o) >= 0 {
                price = o - sign;
            }
        }
        let qty = flow.limit_sizes[self.rng.random_range(0..flow.limit_sizes.len())];
        self.limit(side, price, qty);
    }

    fn limit(&mut self, side: Side, price: Ticks, qty: u64) {
        if price > 0 {
            self.send(side, OrderKind::Limit { price }, qty);
        }
    }

    fn send(&mut self, side: Side, kind: OrderKind, qty: u64) {
        self.next_id += 1;
        let order = NewOrder {
            id: self.next_id,
            owner: 1,
            side,
            kind,
            qty,
        };
        self.events.clear();
        let _ = self.book.submit(order, &mut self.events);
        self.settle();
    }

    /// Passes the last call's events to the recorder and keeps the live
    /// orders up to date.
    fn settle(&mut self) {
        if let Some(mid) = self.book.mid() {
            self.last_mid = mid;
        }
        for i in 0..self.events.len() {
            let e = self.events[i];
            serl_lob::EventSink::event(&mut self.rec, e);
            match e {
                Event::Added { id, .. } => {
                    self.index.insert(id, self.live.len());
                    self.live.push(id);
                }
                Event::Trade(f) if self.book.order(f.maker).is_none() => self.forget(f.maker),
                Event::Cancelled {
                    id, remaining: 0, ..
                } => self.forget(id),
                _ => {}
            }
        }
    }

    fn forget(&mut self, id: OrderId) {
        if let Some(i) = self.index.remove(&id) {
            self.live.swap_remove(i);
            if let Some(&moved) = self.live.get(i) {
                self.index.insert(moved, i);
            }
        }
    }
}
