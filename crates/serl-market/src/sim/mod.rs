//! The event loop and the agents.
//!
//! This file holds the simulator's state, its clock and the way an order
//! reaches the book; [`agents`] what each kind of trader does when it
//! wakes, `build` how a calibration becomes a simulator, and `calibration`,
//! `config` and `record` the types a day goes in and comes out as.

mod agents;
mod build;
mod calibration;
mod config;
mod queue_flow;
mod record;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::rngs::SmallRng;
use rand::Rng;
use rand_distr::{Distribution, LogNormal};
use serl_lob::{ExecReport, LobsterRecorder, NewOrder, OrderBook, OrderId, OrderKind, Side};

use agents::Agent;
pub use calibration::{fit_noise_volume, Calibration, FitEffort};
pub use config::{held_out_profiles, AgentKind, Coarsening, MarketConfig, Scenario};
use record::Sinks;
pub use record::{BookSnapshot, MinuteStats, Recording, TapeTrade};

/// Owner id of the external execution agent(s) start here.
pub const EXECUTION_OWNER: u32 = 1_000_000;

const US_PER_MIN: u64 = 60_000_000;

/// One simulated day: the agents of a [`MarketConfig`] trading on one
/// [`OrderBook`] around the fundamental of a [`Calibration`], in event
/// time. Deterministic in its seed. Drive it with
/// [`run_until`](Simulator::run_until) and
/// [`execute_market`](Simulator::execute_market), or run the whole day with
/// [`finish`](Simulator::finish).
pub struct Simulator {
    /// The book the agents trade on, prices in ticks (multiply by
    /// [`tick`](Simulator::tick) for dollars). Read it for depth; orders
    /// sent to it directly bypass the minute statistics.
    pub book: OrderBook,
    agents: Vec<Agent>,
    /// Every clock but the noise stream's: (time, sequence, agent).
    queue: BinaryHeap<Reverse<(u64, u64, u32)>>,
    /// The noise stream's next wake-up (time, sequence), kept out of the
    /// heap: it carries most of a day's events, and comparing it with the
    /// heap's top costs less than a push and a pop each time.
    noise_clock: Option<(u64, u64)>,
    seq: u64,
    now: u64,
    /// The minute `now` is in, and where it starts and ends (the last
    /// minute never ends): most events fall in the minute of the one
    /// before, so this spares a division each time.
    minute_now: usize,
    minute_span: (u64, u64),
    rng: SmallRng,
    cfg: MarketConfig,
    tick: f64,
    /// Fundamental per minute, ticks.
    fundamental: Vec<f64>,
    /// Its moves within each minute off the straight line, ticks, one per
    /// second from each minute's start (`fundamental_bridge`; empty: a
    /// straight line).
    bridge: Vec<f64>,
    /// Where in each minute its whole move happens, as a share of the
    /// minute (`fundamental_steps`; empty: it moves all minute long).
    steps: Vec<f64>,
    /// Noise arrival rate per minute, per agent, per microsecond.
    noise_rate: Vec<f64>,
    /// Noise traders who act: the first `n_noise` agents (all the noise
    /// traders but with a coarser flow, [`NoiseSplit::acting`]).
    n_noise: u32,
    /// How their arrivals divide between cancels, market and limit orders.
    noise_split: NoiseSplit,
    mm_size: Vec<f64>,
    spread_ticks: f64,
    /// Ticks between the price levels agents think in: 1 for most stocks,
    /// more where the tick is tiny against the spread (AMZN at $1,500 has a
    /// spread of about 45 ticks, and real books there are not one tick
    /// apart).
    grid: i64,
    /// Where a market maker's levels sit behind its quote, ticks, and its
    /// deep level, when a real day's depth profile says
    /// ([`MarketConfig::depth_quantiles`]); `None`: on the grid.
    maker_depths: Option<(Box<[serl_lob::Ticks]>, serl_lob::Ticks)>,
    /// Net aggressive volume (buys positive), decayed, and when it was
    /// last brought up to date.
    flow: f64,
    flow_at: u64,
    /// The flow's shift for one second: (its first and past-the-last
    /// microsecond, ticks); an empty span when the flow has changed.
    shift_cache: std::cell::Cell<(u64, u64, f64)>,
    /// Price shift per unit of the flow response, ticks: the day's
    /// volatility times `flow_impact`.
    flow_scale: f64,
    daily_volume: f64,
    /// Each minute's volume over the day's mean minute volume.
    activity: Vec<f64>,
    /// Each minute's real volume (scenario applied), shares.
    minute_volume: Vec<f64>,
    next_id: OrderId,
    sizes: SizeDraw,
    stats: MinuteStats,
    pv: f64,
    minutes: usize,
    events: u64,
    recording: Option<Recording>,
    /// The day as LOBSTER files, for a [`Simulator::recording_lobster`]
    /// simulator.
    lobster: Option<Box<LobsterRecorder>>,
    /// LOBSTER's clock at the simulated day's start, seconds after
    /// midnight (09:30, or later for part of a session).
    lobster_open: f64,
    /// The queue-reactive flow, where it replaces the agents.
    queue_reactive: Option<queue_flow::QrRun>,
}

/// How the noise stream's arrivals divide between cancels, market orders
/// and limit orders, and how much larger its limit orders are
/// ([`MarketConfig::noise_limit_mult`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct NoiseSplit {
    /// An arrival whose uniform draw is below this cancels.
    pub(super) cancel_below: f64,
    /// Else, below this it sends a market order; above, a limit order.
    pub(super) market_below: f64,
    /// The stream's rate against the calibrated flow's.
    pub(super) rate_mult: f64,
    /// A limit order's size against a drawn size.
    pub(super) limit_mult: f64,
}

impl NoiseSplit {
    /// The split for `cfg`: cancels `cfg.cancel_share` of arrivals, market
    /// orders `market_order_share` of the rest, limit orders the others;
    /// with `noise_limit_mult` k > 1, the cancels and limit orders k times
    /// rarer and the market orders as frequent as at k = 1.
    pub(super) fn new(cfg: &MarketConfig) -> Self {
        let (c, m) = (cfg.cancel_share, cfg.market_order_share);
        let k = cfg.noise_limit_mult.max(1.0);
        if k == 1.0 {
            // The calibrated flow, to the bit.
            return NoiseSplit {
                cancel_below: c,
                market_below: c + m * (1.0 - c),
                rate_mult: 1.0,
                limit_mult: 1.0,
            };
        }
        let (cancel, market, limit) = (c / k, m * (1.0 - c), (1.0 - c) * (1.0 - m) / k);
        let all = cancel + market + limit;
        NoiseSplit {
            cancel_below: cancel / all,
            market_below: (cancel + market) / all,
            rate_mult: all,
            limit_mult: k,
        }
    }

    /// How many of `n` noise traders act: with limit orders k times
    /// larger and rarer, n / k of them, so that each trader places and
    /// cancels as often as before and a resting order lives as long (with
    /// all n it would rest k times longer and go stale behind a move).
    pub(super) fn acting(&self, n: usize) -> usize {
        if self.limit_mult == 1.0 {
            n
        } else {
            ((n as f64 / self.limit_mult).round() as usize).max(1)
        }
    }
}

/// Where the traders' order sizes come from.
pub(super) enum SizeDraw {
    /// Around `order_size` (no real sizes known).
    LogNormal(LogNormal<f64>),
    /// A real day's size quantiles, each as likely.
    Quantiles(Box<[u64]>),
}

/// The agent that carries the noise traders' one arrival stream.
const NOISE_CARRIER: u32 = 0;

/// An empty span: the flow shift must be computed again.
const NO_SHIFT: (u64, u64, f64) = (1, 0, 0.0);

/// Where minute `m` of a day of `minutes` starts and ends, microseconds
/// (the last minute runs on: times past the day count in it).
fn minute_span(m: usize, minutes: usize) -> (u64, u64) {
    let start = m as u64 * US_PER_MIN;
    let end = if m + 1 >= minutes {
        u64::MAX
    } else {
        start + US_PER_MIN
    };
    (start, end)
}

/// `x` rounded half away from zero, exactly as [`f64::round`]; without
/// SSE4.1 in the baseline target, `f64::round` is a call into libm, and
/// the agents round on every order.
#[inline]
pub(super) fn round(x: f64) -> f64 {
    // From 2^52 on every f64 is whole (infinities and NaN stay as well).
    const WHOLE: f64 = 4_503_599_627_370_496.0;
    let a = x.abs();
    // NaN fails every comparison, so test it by name.
    if a >= WHOLE || a.is_nan() {
        return x;
    }
    let t = (a as u64) as f64;
    let r = if a - t >= 0.5 { t + 1.0 } else { t };
    r.copysign(x)
}

impl Simulator {
    /// A simulator that also keeps the trade tape and a book snapshot of
    /// `levels` levels per side at every minute's end.
    pub fn recording(cal: &Calibration, cfg: &MarketConfig, seed: u64, levels: usize) -> Self {
        Self::build(
            cal,
            cfg,
            seed,
            Some(Recording {
                levels: levels.max(1),
                ..Recording::default()
            }),
            None,
        )
    }

    /// A simulator that also writes its day as a level-`levels` LOBSTER
    /// message and order-book stream (the clock from 09:30, 34,200 s after
    /// midnight): read it with [`Simulator::finish_lobster`].
    pub fn recording_lobster(
        cal: &Calibration,
        cfg: &MarketConfig,
        seed: u64,
        levels: usize,
    ) -> Self {
        Self::recording_lobster_from(cal, cfg, seed, levels, crate::LOBSTER_OPEN_SECONDS)
    }

    /// [`Simulator::recording_lobster`] for a day that starts `open`
    /// seconds after midnight on LOBSTER's clock: part of a session (the
    /// afternoon from 12:45 is 45,900), `cal` describing its minutes.
    pub fn recording_lobster_from(
        cal: &Calibration,
        cfg: &MarketConfig,
        seed: u64,
        levels: usize,
        open: f64,
    ) -> Self {
        let scale = (cal.tick * 10_000.0).round().max(1.0) as i64;
        Self::build(
            cal,
            cfg,
            seed,
            None,
            Some((LobsterRecorder::new(levels, scale), open)),
        )
    }

    /// A simulator of the day `cal` describes, with the population of
    /// `cfg`, at the opening: the market makers have quoted and every
    /// agent's first wake-up is scheduled.
    pub fn new(cal: &Calibration, cfg: &MarketConfig, seed: u64) -> Self {
        Self::build(cal, cfg, seed, None, None)
    }

    /// The fundamental at each minute's close, dollars (the real day's
    /// path at the anchors, the scenario applied).
    pub fn fundamental(&self) -> Vec<f64> {
        self.fundamental.iter().map(|f| f * self.tick).collect()
    }

    /// The day's length, minutes: one per calibration minute price (at
    /// least 1).
    pub fn minutes(&self) -> usize {
        self.minutes
    }

    /// Agent wake-ups and order messages processed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Number of agents (the execution agents excluded).
    pub fn agents(&self) -> usize {
        self.agents.len()
    }

    /// Simulated time, microseconds since the open.
    pub fn now(&self) -> u64 {
        self.now
    }

    fn minute_at(&self, t: u64) -> usize {
        if t >= self.minute_span.0 && t < self.minute_span.1 {
            return self.minute_now;
        }
        ((t / US_PER_MIN) as usize).min(self.minutes - 1)
    }

    fn schedule(&mut self, t: u64, agent: u32) {
        self.seq += 1;
        if agent == NOISE_CARRIER {
            self.noise_clock = Some((t, self.seq));
        } else {
            self.queue.push(Reverse((t, self.seq, agent)));
        }
    }

    /// Takes the earliest wake-up at or before `t`, in (time, sequence)
    /// order across the noise clock and the heap.
    fn next_event(&mut self, t: u64) -> Option<(u64, u32)> {
        let heap = self.queue.peek().map(|r| (r.0 .0, r.0 .1));
        let noise_first = match (self.noise_clock, heap) {
            (Some(n), Some(h)) => n < h,
            (noise, _) => noise.is_some(),
        };
        if noise_first {
            let (when, _) = self.noise_clock.filter(|&(when, _)| when <= t)?;
            self.noise_clock = None;
            return Some((when, NOISE_CARRIER));
        }
        let (when, _) = heap.filter(|&(when, _)| when <= t)?;
        let Reverse((_, _, a)) = self.queue.pop()?;
        Some((when, a))
    }

    /// Runs every agent event up to time `t` (microseconds since the open).
    pub fn run_until(&mut self, t: u64) {
        while let Some((when, a)) = self.next_event(t) {
            self.events += 1;
            self.advance_clock(when);
            self.wake(a);
            let next = self.next_wake(a, when);
            if next < self.minutes as u64 * US_PER_MIN {
                self.schedule(next, a);
            }
        }
        self.advance_clock(t);
    }

    fn advance_clock(&mut self, t: u64) {
        if t < self.minute_span.1 {
            // Still in the current minute (or before it): nothing closes.
            self.now = self.now.max(t);
            return;
        }
        // Close the minutes passed: record the mid.
        let from = self.minute_at(self.now);
        let to = self.minute_at(t);
        for m in from..to.max(from) {
            self.close_minute(m);
        }
        self.now = self.now.max(t);
        self.minute_now = ((self.now / US_PER_MIN) as usize).min(self.minutes - 1);
        self.minute_span = minute_span(self.minute_now, self.minutes);
    }

    fn close_minute(&mut self, m: usize) {
        // Where a side is empty at the minute's end: the fundamental, which
        // the agents' book follows, or the queue-reactive flow's own last
        // mid (its price is the book's, not the fundamental's).
        let fallback = match &self.queue_reactive {
            Some(run) => run.last_mid,
            None => self.fundamental[m],
        };
        let mid = self.mid_price().unwrap_or(fallback * self.tick);
        self.stats.mid[m] = mid;
        self.stats.vwap[m] = if self.stats.volume[m] > 0.0 {
            self.pv / self.stats.volume[m]
        } else {
            mid
        };
        self.stats.spread[m] = self.book.spread().map_or(0.0, |s| s as f64 * self.tick);
        let n = self.minutes as f64;
        for side in [Side::Bid, Side::Ask] {
            for (k, l) in self.book.levels(side).take(5).enumerate() {
                self.stats.depth[k] += l.qty as f64 / (2.0 * n);
            }
        }
        self.pv = 0.0;
        if let Some(rec) = &mut self.recording {
            let top = |side| {
                self.book
                    .levels(side)
                    .take(rec.levels)
                    .map(|l| (l.price as f64 * self.tick, l.qty))
                    .collect()
            };
            rec.snapshots.push(BookSnapshot {
                minute: m,
                bids: top(Side::Bid),
                asks: top(Side::Ask),
            });
        }
    }

    /// Finishes the day and returns its per-minute statistics.
    pub fn finish(self) -> MinuteStats {
        self.finish_recorded().0
    }

    /// Like [`Simulator::finish`], with the tape and snapshots of a
    /// [`Simulator::recording`] simulator (empty otherwise).
    pub fn finish_recorded(mut self) -> (MinuteStats, Recording) {
        self.run_to_close();
        (self.stats, self.recording.unwrap_or_default())
    }

    /// Like [`Simulator::finish`], with the LOBSTER stream of a
    /// [`Simulator::recording_lobster`] simulator (empty otherwise).
    pub fn finish_lobster(mut self) -> (MinuteStats, LobsterRecorder) {
        self.run_to_close();
        let lobster = self
            .lobster
            .map_or_else(|| LobsterRecorder::new(1, 1), |l| *l);
        (self.stats, lobster)
    }

    /// Runs the rest of the day and closes its last minute.
    fn run_to_close(&mut self) {
        let end = self.minutes as u64 * US_PER_MIN;
        self.run_until(end - 1);
        self.close_minute(self.minutes - 1);
    }

    /// The per-minute statistics so far: the mid, VWAP and spread of a
    /// minute not yet closed are 0, its volume counts up as trades happen,
    /// and the depth sums only the closed minutes.
    pub fn stats(&self) -> &MinuteStats {
        &self.stats
    }

    /// Mid in dollars.
    pub fn mid_price(&self) -> Option<f64> {
        self.book.mid().map(|m| m * self.tick)
    }

    /// The price of one tick, dollars (from the calibration).
    pub fn tick(&self) -> f64 {
        self.tick
    }

    fn id(&mut self) -> OrderId {
        self.next_id += 1;
        self.next_id
    }

    fn decayed_flow(&self) -> f64 {
        let memory = self.cfg.flow_memory_min.max(1e-3) * US_PER_MIN as f64;
        self.flow * (-((self.now - self.flow_at) as f64) / memory).exp()
    }

    /// How far aggressive flow has moved what traders believe the price
    /// is, ticks. Concave in the flow: linear for small imbalances, then
    /// growing as its square root (the square-root law of impact), and it
    /// fades as the flow is forgotten.
    fn flow_shift(&self) -> f64 {
        // Read on every wake-up; the memory is half an hour, so the value
        // of the current second serves until the flow changes.
        let (from, to, cached) = self.shift_cache.get();
        if self.now >= from && self.now < to {
            return cached;
        }
        let x = self.decayed_flow() / self.daily_volume;
        let shift = self.flow_scale * x / (x.abs() + 1e-4).sqrt();
        let second = self.now / 1_000_000 * 1_000_000;
        self.shift_cache.set((second, second + 1_000_000, shift));
        shift
    }

    fn record(&mut self, r: &ExecReport, side: Side, informative: bool) {
        if r.filled > 0 {
            if informative {
                let signed = if side == Side::Bid { 1.0 } else { -1.0 } * r.filled as f64;
                self.flow = self.decayed_flow() + signed;
                self.flow_at = self.now;
                self.shift_cache.set(NO_SHIFT);
            }
            let m = self.minute_at(self.now);
            self.stats.volume[m] += r.filled as f64;
            self.pv += r.notional as f64 * self.tick;
        }
    }

    /// Sends an order to the book and records its trades.
    fn place(
        &mut self,
        owner: u32,
        side: Side,
        kind: OrderKind,
        qty: u64,
    ) -> Option<(OrderId, ExecReport)> {
        if qty == 0 {
            return None;
        }
        let id = self.id();
        self.events += 1;
        let order = NewOrder {
            id,
            owner,
            side,
            kind,
            qty,
        };
        let r = if self.recording.is_none() && self.lobster.is_none() {
            self.book.submit(order, &mut ()).ok()?
        } else {
            let mut fills = Vec::new();
            let at = self.lobster_seconds();
            let keep = self.recording.is_some();
            let mut sink = Sinks::new(at, keep.then_some(&mut fills), self.lobster.as_deref_mut());
            let r = self.book.submit(order, &mut sink).ok()?;
            if let Some(rec) = &mut self.recording {
                rec.trades.extend(fills.iter().map(|f| TapeTrade {
                    time_us: self.now,
                    price: f.price as f64 * self.tick,
                    qty: f.qty,
                    aggressor: f.taker_side,
                    taker_owner: f.taker_owner,
                    maker_owner: f.maker_owner,
                }));
            }
            r
        };
        // Flow moves beliefs when it carries news the fundamental path does
        // not already hold: the noise and trend traders' and the execution
        // agents'. Value and informed traders trade because the fundamental
        // moved, and the makers' clean-up trades follow their own quotes;
        // counting them would move the price twice for one piece of news.
        let informative = self
            .agents
            .get(owner as usize)
            .is_none_or(|a| matches!(a.kind, AgentKind::Noise | AgentKind::Momentum));
        self.record(&r, side, informative);
        Some((id, r))
    }

    /// Seconds after midnight now, LOBSTER's clock.
    fn lobster_seconds(&self) -> f64 {
        self.lobster_open + self.now as f64 / 1e6
    }

    /// Cancels a resting order (an agent's own), recording it where the
    /// day is recorded.
    fn cancel(&mut self, id: OrderId) {
        if self.lobster.is_none() {
            let _ = self.book.cancel(id, &mut ());
        } else {
            let at = self.lobster_seconds();
            let mut sink = Sinks::new(at, None, self.lobster.as_deref_mut());
            let _ = self.book.cancel(id, &mut sink);
        }
    }

    /// An agent's order, with its inventory and live orders kept.
    fn submit(&mut self, a: u32, side: Side, kind: OrderKind, qty: u64) -> Option<ExecReport> {
        let (id, r) = self.place(a, side, kind, qty)?;
        let agent = &mut self.agents[a as usize];
        let signed = if side == Side::Bid {
            r.filled as i64
        } else {
            -(r.filled as i64)
        };
        agent.inventory += signed;
        if r.resting > 0 {
            agent.live.push_back(id);
        }
        Some(r)
    }

    fn size(&mut self) -> u64 {
        let shares = match &self.sizes {
            SizeDraw::Quantiles(q) => return q[self.rng.random_range(0..q.len())],
            SizeDraw::LogNormal(d) => d.sample(&mut self.rng),
        };
        self.in_lots(shares)
    }

    /// A noise trader's limit order size from drawn size `qty`.
    fn noise_limit_size(&self, qty: u64) -> u64 {
        let mult = self.noise_split.limit_mult;
        if mult == 1.0 {
            qty
        } else {
            self.in_lots(qty as f64 * mult)
        }
    }

    /// `shares` rounded to whole round lots, at least one.
    fn in_lots(&self, shares: f64) -> u64 {
        let lot = self.cfg.round_lot.max(1) as f64;
        (round(shares / lot).max(1.0) * lot) as u64
    }

    fn reference(&self) -> f64 {
        self.book
            .mid()
            .unwrap_or(self.fundamental[self.minute_at(self.now)])
    }

    /// The fundamental at time `t`, ticks: it moves within each minute
    /// from the last minute's close to this one's (in a straight line, a
    /// Brownian bridge, `fundamental_bridge`, or at once at a random
    /// second, `fundamental_steps`), so that prices have no reason to jump
    /// at minute boundaries.
    fn fundamental_at(&self, t: u64) -> f64 {
        let m = self.minute_at(t);
        let frac = ((t.saturating_sub(m as u64 * US_PER_MIN)) as f64 / US_PER_MIN as f64).min(1.0);
        let prev = self.fundamental[m.saturating_sub(1)];
        // How far from the last close to this one: the share of the
        // minute gone, or all or nothing around the minute's step.
        let moved = match self.steps.get(m) {
            Some(&at) => f64::from(u8::from(frac >= at)),
            None => frac,
        };
        let off_line = if self.bridge.is_empty() {
            0.0
        } else {
            let s = (frac * 60.0) as usize;
            self.bridge.get(m * 60 + s.min(59)).copied().unwrap_or(0.0)
        };
        prev + (self.fundamental[m] - prev) * moved + off_line + self.flow_shift()
    }

    /// The fundamental now, dollars: the value the traders' beliefs
    /// centre on, flow impact included.
    pub fn fundamental_now(&self) -> f64 {
        self.fundamental_at(self.now) * self.tick
    }

    /// An external execution agent's limit order of `qty` shares at
    /// `price` ticks now: it trades what it can at once and rests the rest
    /// with price-time priority. Returns its id and report; `None` for an
    /// empty or refused order.
    pub fn post_limit(
        &mut self,
        owner: u32,
        side: Side,
        price: serl_lob::Ticks,
        qty: u64,
    ) -> Option<(OrderId, ExecReport)> {
        self.place(owner, side, OrderKind::Limit { price }, qty)
    }

    /// Cancels an external agent's resting order; returns the shares that
    /// were still resting (0 when it had filled or is unknown).
    pub fn cancel_resting(&mut self, id: OrderId) -> u64 {
        let left = self.book.order(id).map_or(0, |o| o.qty);
        if left > 0 {
            self.cancel(id);
        }
        left
    }

    /// Takes `by` shares off an external agent's resting order, keeping its
    /// place in the queue; returns the shares still resting (0 when it is
    /// gone: filled, cancelled, or reduced by all it held).
    pub fn reduce_resting(&mut self, id: OrderId, by: u64) -> u64 {
        let left = self.book.order(id).map_or(0, |o| o.qty);
        if by >= left {
            self.cancel_resting(id);
            return 0;
        }
        let r = if self.lobster.is_none() {
            self.book.reduce(id, by, &mut ())
        } else {
            let at = self.lobster_seconds();
            let mut sink = Sinks::new(at, None, self.lobster.as_deref_mut());
            self.book.reduce(id, by, &mut sink)
        };
        r.unwrap_or(0)
    }

    /// An external execution agent's market order of `qty` shares now.
    /// Returns the report (filled shares, notional in ticks × shares).
    pub fn execute_market(&mut self, owner: u32, side: Side, qty: u64) -> ExecReport {
        self.place(owner, side, OrderKind::Market, qty)
            .map(|(_, r)| r)
            .unwrap_or_default()
    }
}
