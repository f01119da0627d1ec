//! The event loop and the agents.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal};
use serde::{Deserialize, Serialize};
use serl_lob::{ExecReport, NewOrder, OrderBook, OrderId, OrderKind, SelfTradePolicy, Side, Ticks};

/// Owner id of the external execution agent(s) start here.
pub const EXECUTION_OWNER: u32 = 1_000_000;

const US_PER_MIN: u64 = 60_000_000;

/// What a real session says about the day to simulate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Price of one tick in dollars (0.01).
    pub tick: f64,
    /// The real minute price path, one per session minute, in dollars.
    pub minute_price: Vec<f64>,
    /// The real (or expected) volume per session minute, in shares.
    pub minute_volume: Vec<f64>,
    /// Typical spread in bps.
    pub spread_bps: f64,
}

/// Overrides for imagined days.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    /// Scales the fundamental's deviations from the open.
    pub volatility_mult: f64,
    /// Adds a linear drift over the day, bps.
    pub drift_bps: f64,
    /// Scales arrival rates and market-maker depth.
    pub liquidity_mult: f64,
    /// Jumps in the fundamental: (minute, size in bps).
    pub jumps: Vec<(u32, f64)>,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            volatility_mult: 1.0,
            drift_bps: 0.0,
            liquidity_mult: 1.0,
            jumps: Vec::new(),
        }
    }
}

/// The population and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MarketConfig {
    pub noise_agents: usize,
    pub value_agents: usize,
    pub market_makers: usize,
    /// Share of noise arrivals that are market orders.
    pub market_order_share: f64,
    /// Share of noise arrivals that cancel an own resting order.
    pub cancel_share: f64,
    /// Median order size, shares.
    pub order_size: f64,
    /// Market-maker levels per side and re-quote interval.
    pub mm_levels: usize,
    pub mm_interval_ms: u64,
    /// Market-maker size at the touch as a share of a minute's volume.
    pub mm_depth_share: f64,
    /// Value-trader wake-ups per minute each.
    pub value_rate_per_min: f64,
    /// Per-agent message latency, microseconds.
    pub latency_us: u64,
    pub scenario: Scenario,
}

impl Default for MarketConfig {
    fn default() -> Self {
        MarketConfig {
            noise_agents: 50,
            value_agents: 50,
            market_makers: 2,
            market_order_share: 0.2,
            cancel_share: 0.3,
            order_size: 100.0,
            mm_levels: 5,
            mm_interval_ms: 2_000,
            mm_depth_share: 0.02,
            value_rate_per_min: 0.5,
            latency_us: 200,
            scenario: Scenario::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    Noise,
    Value,
    MarketMaker,
}

struct Agent {
    kind: AgentKind,
    live: VecDeque<OrderId>,
    inventory: i64,
    /// The wake-up is only a minute boundary where the arrival rate
    /// changes: redraw the next arrival without acting.
    redraw: bool,
}

/// Per-minute results of the simulated day.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MinuteStats {
    pub volume: Vec<f64>,
    /// Mid at the end of each minute, dollars.
    pub mid: Vec<f64>,
    /// Volume-weighted trade price per minute (the mid when no trade).
    pub vwap: Vec<f64>,
    /// Quoted spread at the end of each minute, dollars.
    pub spread: Vec<f64>,
    /// Mean resting size per level (1..=5, both sides averaged) at minute
    /// ends over the day.
    pub depth: [f64; 5],
}

pub struct Simulator {
    pub book: OrderBook,
    agents: Vec<Agent>,
    queue: BinaryHeap<Reverse<(u64, u64, u32)>>,
    seq: u64,
    now: u64,
    rng: SmallRng,
    cfg: MarketConfig,
    tick: f64,
    /// Fundamental per minute, ticks.
    fundamental: Vec<f64>,
    /// Noise arrival rate per minute, per agent, per microsecond.
    noise_rate: Vec<f64>,
    mm_size: Vec<f64>,
    spread_ticks: f64,
    next_id: OrderId,
    size_dist: LogNormal<f64>,
    stats: MinuteStats,
    pv: f64,
    minutes: usize,
    events: u64,
}

impl Simulator {
    pub fn new(cal: &Calibration, cfg: &MarketConfig, seed: u64) -> Self {
        let minutes = cal.minute_price.len().max(1);
        let sc = &cfg.scenario;
        let p0 = cal.minute_price.first().copied().unwrap_or(100.0);
        let mut jump = 0.0;
        let fundamental: Vec<f64> = (0..minutes)
            .map(|m| {
                for &(jm, bps) in &sc.jumps {
                    if jm as usize == m {
                        jump += bps;
                    }
                }
                let real = cal.minute_price.get(m).copied().unwrap_or(p0);
                let dev = (real / p0).ln() * sc.volatility_mult
                    + (sc.drift_bps * m as f64 / minutes as f64 + jump) / 1e4;
                p0 * dev.exp() / cal.tick
            })
            .collect();
        let n_noise = cfg.noise_agents.max(1);
        let median = cfg.order_size.max(1.0);
        let size_dist = LogNormal::new(median.ln(), 0.8).expect("valid lognormal");
        let mean_size = median * (0.8f64 * 0.8 / 2.0).exp();
        // Noise market orders carry about 70% of the real volume; value
        // traders most of the rest.
        let noise_rate: Vec<f64> = (0..minutes)
            .map(|m| {
                let v = cal.minute_volume.get(m).copied().unwrap_or(0.0) * sc.liquidity_mult;
                let orders_per_min = 0.7 * v / mean_size / cfg.market_order_share.max(1e-3);
                orders_per_min / n_noise as f64 / US_PER_MIN as f64
            })
            .collect();
        let mm_size: Vec<f64> = (0..minutes)
            .map(|m| {
                (cal.minute_volume.get(m).copied().unwrap_or(0.0)
                    * cfg.mm_depth_share
                    * sc.liquidity_mult)
                    .max(median)
            })
            .collect();
        let mut agents = Vec::new();
        for _ in 0..n_noise {
            agents.push(Agent {
                kind: AgentKind::Noise,
                live: VecDeque::new(),
                inventory: 0,
                redraw: false,
            });
        }
        for _ in 0..cfg.value_agents {
            agents.push(Agent {
                kind: AgentKind::Value,
                live: VecDeque::new(),
                inventory: 0,
                redraw: false,
            });
        }
        for _ in 0..cfg.market_makers.max(1) {
            agents.push(Agent {
                kind: AgentKind::MarketMaker,
                live: VecDeque::new(),
                inventory: 0,
                redraw: false,
            });
        }
        let spread_ticks = (p0 * cal.spread_bps / 1e4 / cal.tick).max(1.0);
        let mut sim = Simulator {
            book: OrderBook::with_capacity(SelfTradePolicy::Allow, 1 << 14),
            agents,
            queue: BinaryHeap::new(),
            seq: 0,
            now: 0,
            rng: SmallRng::seed_from_u64(seed),
            cfg: cfg.clone(),
            tick: cal.tick,
            fundamental,
            noise_rate,
            mm_size,
            spread_ticks,
            next_id: 1,
            size_dist,
            stats: MinuteStats {
                volume: vec![0.0; minutes],
                mid: vec![0.0; minutes],
                vwap: vec![0.0; minutes],
                spread: vec![0.0; minutes],
                depth: [0.0; 5],
            },
            pv: 0.0,
            minutes,
            events: 0,
        };
        for a in 0..sim.agents.len() as u32 {
            let t = sim.first_wake(a);
            sim.schedule(t, a);
        }
        // Market makers quote at once so the book opens two-sided.
        let mms: Vec<u32> = (0..sim.agents.len() as u32)
            .filter(|&a| sim.agents[a as usize].kind == AgentKind::MarketMaker)
            .collect();
        for a in mms {
            sim.wake(a);
        }
        sim
    }

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
        ((t / US_PER_MIN) as usize).min(self.minutes - 1)
    }

    fn schedule(&mut self, t: u64, agent: u32) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, agent)));
    }

    fn first_wake(&mut self, a: u32) -> u64 {
        self.next_wake(a, 0)
    }

    fn next_wake(&mut self, a: u32, now: u64) -> u64 {
        let lat = self.cfg.latency_us;
        match self.agents[a as usize].kind {
            AgentKind::Noise => {
                // Arrivals are Poisson with a rate that is constant within a
                // minute: draw with this minute's rate, and if the draw
                // leaves the minute, wake at its end to draw again.
                let m = self.minute_at(now);
                let rate = self.noise_rate[m];
                let dt = Exp::new(rate.max(1e-15)).map_or(f64::MAX, |e| e.sample(&mut self.rng));
                let end = (m as u64 + 1) * US_PER_MIN;
                let t = now as f64 + dt;
                let redraw = t >= end as f64;
                self.agents[a as usize].redraw = redraw;
                if redraw {
                    end
                } else {
                    t as u64 + lat
                }
            }
            AgentKind::Value => {
                let rate = self.cfg.value_rate_per_min.max(1e-6) / US_PER_MIN as f64;
                let dt = Exp::new(rate).map_or(1e9, |e| e.sample(&mut self.rng));
                now + dt as u64 + lat
            }
            AgentKind::MarketMaker => {
                let base = self.cfg.mm_interval_ms * 1000;
                now + base / 2 + self.rng.random_range(0..base.max(1)) + lat
            }
        }
    }

    /// Runs every agent event up to time `t` (microseconds since the open).
    pub fn run_until(&mut self, t: u64) {
        while let Some(&Reverse((when, _, a))) = self.queue.peek() {
            if when > t {
                break;
            }
            self.queue.pop();
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
        // Close the minutes passed: record the mid.
        let from = self.minute_at(self.now);
        let to = self.minute_at(t);
        for m in from..to.max(from) {
            self.close_minute(m);
        }
        self.now = self.now.max(t);
    }

    fn close_minute(&mut self, m: usize) {
        let mid = self.mid_price().unwrap_or(self.fundamental[m] * self.tick);
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
    }

    /// Finishes the day and returns its per-minute statistics.
    pub fn finish(mut self) -> MinuteStats {
        let end = self.minutes as u64 * US_PER_MIN;
        self.run_until(end - 1);
        let last = self.minutes - 1;
        self.close_minute(last);
        self.stats
    }

    pub fn stats(&self) -> &MinuteStats {
        &self.stats
    }

    /// Mid in dollars.
    pub fn mid_price(&self) -> Option<f64> {
        self.book.mid().map(|m| m * self.tick)
    }

    pub fn tick(&self) -> f64 {
        self.tick
    }

    fn id(&mut self) -> OrderId {
        self.next_id += 1;
        self.next_id
    }

    fn record(&mut self, r: &ExecReport) {
        if r.filled > 0 {
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
        let r = self
            .book
            .submit(
                NewOrder {
                    id,
                    owner,
                    side,
                    kind,
                    qty,
                },
                &mut (),
            )
            .ok()?;
        self.record(&r);
        Some((id, r))
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
        self.size_dist.sample(&mut self.rng).round().max(1.0) as u64
    }

    fn reference(&self) -> f64 {
        self.book
            .mid()
            .unwrap_or(self.fundamental[self.minute_at(self.now)])
    }

    fn wake(&mut self, a: u32) {
        let m = self.minute_at(self.now);
        let fund = self.fundamental[m];
        match self.agents[a as usize].kind {
            AgentKind::Noise => {
                if self.agents[a as usize].redraw {
                    return;
                }
                let u: f64 = self.rng.random();
                if u < self.cfg.cancel_share {
                    if let Some(id) = self.agents[a as usize].live.pop_front() {
                        self.events += 1;
                        let _ = self.book.cancel(id, &mut ());
                    }
                    return;
                }
                let mid = self.reference();
                // A slight pull toward the fundamental keeps the price on
                // the real day's path without making returns predictable.
                let tilt = ((fund - mid) / (4.0 * self.spread_ticks)).clamp(-0.2, 0.2);
                let side = if self.rng.random::<f64>() < 0.5 + tilt {
                    Side::Bid
                } else {
                    Side::Ask
                };
                let qty = self.size();
                if u < self.cfg.cancel_share
                    + self.cfg.market_order_share * (1.0 - self.cfg.cancel_share)
                {
                    self.submit(a, side, OrderKind::Market, qty);
                } else {
                    let mut d = 0i64;
                    while d < 20 && self.rng.random_bool(0.6) {
                        d += 1;
                    }
                    let half = (self.spread_ticks / 2.0).ceil() as i64;
                    let m0 = mid.round() as Ticks;
                    let price = match side {
                        Side::Bid => m0 - half - d,
                        Side::Ask => m0 + half + d,
                    };
                    if price > 0 {
                        self.submit(a, side, OrderKind::Limit { price }, qty);
                    }
                    let live = &mut self.agents[a as usize].live;
                    if live.len() > 8 {
                        if let Some(old) = live.pop_front() {
                            let _ = self.book.cancel(old, &mut ());
                        }
                    }
                }
            }
            AgentKind::Value => {
                let mid = self.reference();
                let noisy = fund + self.rng.random_range(-1.0..1.0) * self.spread_ticks;
                let gap = noisy - mid;
                if gap.abs() < self.spread_ticks {
                    return;
                }
                let side = if gap > 0.0 { Side::Bid } else { Side::Ask };
                let qty = self.size() * 2;
                self.submit(a, side, OrderKind::Market, qty);
            }
            AgentKind::MarketMaker => {
                while let Some(id) = self.agents[a as usize].live.pop_front() {
                    self.events += 1;
                    let _ = self.book.cancel(id, &mut ());
                }
                let mid = 0.7 * self.reference() + 0.3 * fund;
                let inv = self.agents[a as usize].inventory as f64;
                let size = self.mm_size[m];
                let skew = (inv / (20.0 * size)).clamp(-2.0, 2.0);
                let half = (self.spread_ticks / 2.0).max(0.5);
                let (bid0, ask0) = (
                    (mid - half - skew).floor() as Ticks,
                    (mid + half - skew).ceil() as Ticks,
                );
                let ask0 = ask0.max(bid0 + 1);
                for k in 0..self.cfg.mm_levels as i64 {
                    // Depth grows away from the touch, then thins: a hump.
                    let w = 1.0 + 0.6 * k as f64 - 0.12 * (k * k) as f64;
                    let q = (size * w.max(0.3)).round() as u64;
                    if bid0 - k > 0 {
                        self.submit(a, Side::Bid, OrderKind::Limit { price: bid0 - k }, q);
                    }
                    self.submit(a, Side::Ask, OrderKind::Limit { price: ask0 + k }, q);
                }
            }
        }
    }

    /// An external execution agent's market order of `qty` shares now.
    /// Returns the report (filled shares, notional in ticks × shares).
    pub fn execute_market(&mut self, owner: u32, side: Side, qty: u64) -> ExecReport {
        self.place(owner, side, OrderKind::Market, qty)
            .map(|(_, r)| r)
            .unwrap_or_default()
    }
}
