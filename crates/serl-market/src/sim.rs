//! The event loop and the agents.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal};
use serde::{Deserialize, Serialize};
use serl_lob::{
    Event, EventSink, ExecReport, Fill, NewOrder, OrderBook, OrderId, OrderKind, SelfTradePolicy,
    Side, Ticks,
};

use crate::path::PathModel;

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
    /// Per-minute multipliers of the noise traders' arrival rate (empty:
    /// all 1), from [`fit_noise_volume`].
    #[serde(default)]
    pub noise_scale: Vec<f64>,
}

/// How many pilot days [`fit_noise_volume`] spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitEffort {
    /// One pilot day.
    Quick,
    /// Two pilot days, refitted once: four.
    Full,
}

/// Fits the noise traders' per-minute arrival rates so that the simulated
/// volume of each half hour matches the real one. The other traders' volume
/// depends on how much the price moves against the book, which no formula
/// gives in advance, so pilot days measure it: each half hour's noise rate
/// is scaled by real / simulated volume (in all bounded to [1/4, 4]).
///
/// `FitEffort::Full` (four pilot days) is what `serl simulate` checks;
/// training environments use `FitEffort::Quick` (one), since every new
/// session an episode draws pays for its fit once.
pub fn fit_noise_volume(
    cal: &Calibration,
    cfg: &MarketConfig,
    seed: u64,
    effort: FitEffort,
) -> Vec<f64> {
    let minutes = cal.minute_price.len();
    let mut cal = cal.clone();
    // The response is not linear in the rate (more noise orders also mean
    // more resting liquidity to trade against), so the full fit refits
    // once, and averages two days, since a day's volume varies with its
    // path.
    let (rounds, days) = match effort {
        FitEffort::Quick => (1, 1),
        FitEffort::Full => (2, 2),
    };
    for _ in 0..rounds {
        let pilots: Vec<Vec<f64>> = (0..days)
            .map(|k| Simulator::new(&cal, cfg, seed + k).finish().volume)
            .collect();
        let mut scale = vec![1.0; minutes];
        for start in (0..minutes).step_by(30) {
            let end = (start + 30).min(minutes);
            let real: f64 = cal
                .minute_volume
                .get(start..end)
                .map_or(0.0, |v| v.iter().sum());
            let sim: f64 = pilots
                .iter()
                .map(|v| v[start..end].iter().sum::<f64>())
                .sum::<f64>()
                / pilots.len() as f64;
            let old = cal.noise_scale.get(start).copied().unwrap_or(1.0);
            let k = if real > 0.0 && sim > 0.0 {
                (real / sim).clamp(0.5, 2.0)
            } else {
                1.0
            };
            scale[start..end].fill((old * k).clamp(0.25, 4.0));
        }
        cal.noise_scale = scale;
    }
    cal.noise_scale
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

impl Scenario {
    /// The drift and jumps reached by `minute` of a `minutes`-long day, bps.
    pub fn shift_bps(&self, minute: usize, minutes: usize) -> f64 {
        let jumps: f64 = self
            .jumps
            .iter()
            .filter(|&&(m, _)| m as usize <= minute)
            .map(|&(_, bps)| bps)
            .sum();
        self.drift_bps * minute as f64 / minutes.max(1) as f64 + jumps
    }
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
    /// Resting orders a noise trader keeps; the oldest goes first.
    pub noise_max_orders: usize,
    /// Weight of the fundamental (against the book's mid) in the price
    /// noise traders place their limit orders around.
    pub noise_fundamental_weight: f64,
    /// The gap to the fundamental, bps, at which noise traders lean 10
    /// points more to one side (60/40).
    pub noise_tilt_bps: f64,
    /// Median order size, shares.
    pub order_size: f64,
    /// Market-maker levels per side and re-quote interval.
    pub mm_levels: usize,
    pub mm_interval_ms: u64,
    /// Market-maker size at the touch as a share of a minute's volume.
    pub mm_depth_share: f64,
    /// Impact of aggressive flow on what traders believe: a net flow of
    /// a share x of the day's volume shifts beliefs by about
    /// `flow_impact` × daily volatility × √x.
    pub flow_impact: f64,
    /// Minutes over which that flow is forgotten.
    pub flow_memory_min: f64,
    /// Weight of the fundamental (against the book's mid) in the price
    /// market makers quote around: how fast news reaches the quotes.
    pub mm_fundamental_weight: f64,
    /// How much stale liquidity a market maker takes per re-quote, as a
    /// multiple of its touch size (0 turns sniping off).
    pub mm_snipe_mult: f64,
    /// The most a market maker shifts its quotes against its inventory,
    /// ticks.
    pub mm_max_skew_ticks: f64,
    /// Minutes of the day's volume resting deep behind the quotes, split
    /// between the market makers (0 leaves none).
    pub mm_deep_minutes: f64,
    /// Value-trader wake-ups per minute each.
    pub value_rate_per_min: f64,
    /// Per-agent message latency, microseconds.
    pub latency_us: u64,
    /// Trend followers: market orders in the direction of the mid's move
    /// over the last `momentum_lookback_min` minutes, when it exceeds
    /// `momentum_threshold_bps`.
    pub momentum_agents: usize,
    pub momentum_rate_per_min: f64,
    pub momentum_lookback_min: usize,
    pub momentum_threshold_bps: f64,
    /// Informed traders: they see the fundamental `informed_horizon_min`
    /// minutes ahead, blurred by `informed_noise_bps`, and take liquidity
    /// toward it.
    pub informed_agents: usize,
    pub informed_rate_per_min: f64,
    pub informed_horizon_min: f64,
    pub informed_noise_bps: f64,
    /// Informed order size as a multiple of the typical order size.
    pub informed_size_mult: f64,
    /// How the fundamental fills in the real day between anchors.
    pub path: PathModel,
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
            noise_max_orders: 2,
            noise_fundamental_weight: 0.5,
            noise_tilt_bps: 10.0,
            order_size: 10.0,
            mm_levels: 5,
            mm_interval_ms: 1_000,
            mm_depth_share: 0.02,
            flow_impact: 0.7,
            flow_memory_min: 30.0,
            mm_fundamental_weight: 1.0,
            mm_snipe_mult: 2.0,
            mm_max_skew_ticks: 2.0,
            mm_deep_minutes: 2.0,
            value_rate_per_min: 0.5,
            latency_us: 200,
            momentum_agents: 10,
            momentum_rate_per_min: 0.5,
            momentum_lookback_min: 5,
            momentum_threshold_bps: 5.0,
            informed_agents: 10,
            informed_rate_per_min: 1.0,
            informed_horizon_min: 0.25,
            informed_noise_bps: 2.0,
            informed_size_mult: 5.0,
            path: PathModel::default(),
            scenario: Scenario::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    Noise,
    Value,
    MarketMaker,
    Momentum,
    Informed,
}

struct Agent {
    kind: AgentKind,
    live: VecDeque<OrderId>,
    inventory: i64,
    /// The wake-up is only a minute boundary where the arrival rate
    /// changes: redraw the next arrival without acting.
    redraw: bool,
    /// A market maker's standing quote: best bid, best ask, touch size.
    quote: Option<(Ticks, Ticks, u64)>,
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
    /// Noise traders: the first `n_noise` agents.
    n_noise: u32,
    mm_size: Vec<f64>,
    spread_ticks: f64,
    /// Ticks between the price levels agents think in: 1 for most stocks,
    /// more where the tick is tiny against the spread (AMZN at $1,500 has a
    /// spread of about 45 ticks, and real books there are not one tick
    /// apart).
    grid: i64,
    /// Net aggressive volume (buys positive), decayed, and when it was
    /// last brought up to date.
    flow: f64,
    flow_at: u64,
    /// The flow's shift for one second: (second, ticks).
    shift_cache: std::cell::Cell<(u64, f64)>,
    /// Price shift per unit of the flow response, ticks: the day's
    /// volatility times `flow_impact`.
    flow_scale: f64,
    daily_volume: f64,
    /// Each minute's volume over the day's mean minute volume.
    activity: Vec<f64>,
    /// Each minute's real volume (scenario applied), shares.
    minute_volume: Vec<f64>,
    next_id: OrderId,
    size_dist: LogNormal<f64>,
    stats: MinuteStats,
    pv: f64,
    minutes: usize,
    events: u64,
    recording: Option<Recording>,
}

/// One trade on the simulated tape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TapeTrade {
    /// Microseconds since the open.
    pub time_us: u64,
    /// Dollars.
    pub price: f64,
    pub qty: u64,
    /// The aggressor's side.
    pub aggressor: Side,
    pub taker_owner: u32,
    pub maker_owner: u32,
}

/// The top of the book at the end of a minute: (price in dollars, shares)
/// per level, best first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BookSnapshot {
    pub minute: usize,
    pub bids: Vec<(f64, u64)>,
    pub asks: Vec<(f64, u64)>,
}

/// Everything a recorded day leaves behind besides its minute statistics.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Recording {
    pub trades: Vec<TapeTrade>,
    pub snapshots: Vec<BookSnapshot>,
    /// Levels per side in each snapshot.
    pub levels: usize,
}

/// Keeps the trades among the book's events.
struct Trades<'a>(&'a mut Vec<Fill>);

impl EventSink for Trades<'_> {
    fn event(&mut self, e: Event) {
        if let Event::Trade(f) = e {
            self.0.push(f);
        }
    }
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
        )
    }

    pub fn new(cal: &Calibration, cfg: &MarketConfig, seed: u64) -> Self {
        Self::build(cal, cfg, seed, None)
    }

    fn build(
        cal: &Calibration,
        cfg: &MarketConfig,
        seed: u64,
        recording: Option<Recording>,
    ) -> Self {
        let minutes = cal.minute_price.len().max(1);
        let sc = &cfg.scenario;
        let p0 = cal.minute_price.first().copied().unwrap_or(100.0);
        let real: Vec<f64> = (0..minutes)
            .map(|m| cal.minute_price.get(m).copied().unwrap_or(p0))
            .collect();
        // The path has its own random stream so that changing an agent
        // population does not change the day's fundamental.
        let mut path_rng = SmallRng::seed_from_u64(seed ^ 0x005e_ed0f_fa7e_u64);
        let path = cfg.path.log_path(&real, &mut path_rng);
        let fundamental: Vec<f64> = (0..minutes)
            .map(|m| {
                let dev = (path[m] - p0.ln()) * sc.volatility_mult + sc.shift_bps(m, minutes) / 1e4;
                p0 * dev.exp() / cal.tick
            })
            .collect();
        let n_noise = cfg.noise_agents.max(1);
        let median = cfg.order_size.max(1.0);
        let size_dist = LogNormal::new(median.ln(), 0.8).expect("valid lognormal");
        let mean_size = median * (0.8f64 * 0.8 / 2.0).exp();
        // Noise market orders are sized to the real volume; the other
        // takers' trades are largely offset by what the noise traders'
        // limit orders no longer meet (measured: the day's volume lands
        // within about 15% of the real one).
        let noise_rate: Vec<f64> = (0..minutes)
            .map(|m| {
                let v = cal.minute_volume.get(m).copied().unwrap_or(0.0)
                    * sc.liquidity_mult
                    * cal.noise_scale.get(m).copied().unwrap_or(1.0);
                let orders_per_min = v / mean_size / cfg.market_order_share.max(1e-3);
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
        let population = [
            (AgentKind::Noise, n_noise),
            (AgentKind::Value, cfg.value_agents),
            (AgentKind::Momentum, cfg.momentum_agents),
            (AgentKind::Informed, cfg.informed_agents),
            (AgentKind::MarketMaker, cfg.market_makers.max(1)),
        ];
        let agents: Vec<Agent> = population
            .iter()
            .flat_map(|&(kind, n)| {
                (0..n).map(move |_| Agent {
                    kind,
                    live: VecDeque::new(),
                    inventory: 0,
                    redraw: false,
                    quote: None,
                })
            })
            .collect();
        let spread_ticks = (p0 * cal.spread_bps / 1e4 / cal.tick).max(1.0);
        let day_vol: f64 = real
            .windows(2)
            .map(|w| (w[1] / w[0]).ln().powi(2))
            .sum::<f64>()
            .sqrt();
        let daily_volume: f64 = cal.minute_volume.iter().sum::<f64>() * sc.liquidity_mult.max(1e-9);
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
            n_noise: n_noise as u32,
            mm_size,
            spread_ticks,
            grid: (spread_ticks / 4.0).floor().max(1.0) as i64,
            flow: 0.0,
            flow_at: 0,
            shift_cache: std::cell::Cell::new((u64::MAX, 0.0)),
            flow_scale: cfg.flow_impact * day_vol * p0 / cal.tick,
            daily_volume: daily_volume.max(1.0),
            minute_volume: (0..minutes)
                .map(|m| cal.minute_volume.get(m).copied().unwrap_or(0.0) * sc.liquidity_mult)
                .collect(),
            activity: (0..minutes)
                .map(|m| {
                    let v = cal.minute_volume.get(m).copied().unwrap_or(0.0);
                    (v * sc.liquidity_mult.max(1e-9) * minutes as f64 / daily_volume.max(1.0))
                        .clamp(0.05, 20.0)
                })
                .collect(),
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
            recording,
        };
        // The noise traders arrive as one Poisson stream (the sum of theirs),
        // carried by the first of them, each arrival then acting for one of
        // them at random: the same process, with one clock in the queue
        // instead of hundreds that mostly wake only to redraw.
        for a in 0..sim.agents.len() as u32 {
            if sim.agents[a as usize].kind == AgentKind::Noise && a != 0 {
                continue;
            }
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

    /// The fundamental at each minute's close, dollars (the real day's
    /// path at the anchors, the scenario applied).
    pub fn fundamental(&self) -> Vec<f64> {
        self.fundamental.iter().map(|f| f * self.tick).collect()
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
                let rate = self.noise_rate[m] * self.n_noise as f64;
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
            AgentKind::Value | AgentKind::Momentum | AgentKind::Informed => {
                let per_min = match self.agents[a as usize].kind {
                    AgentKind::Value => self.cfg.value_rate_per_min,
                    AgentKind::Momentum => self.cfg.momentum_rate_per_min,
                    _ => self.cfg.informed_rate_per_min,
                };
                // Busy minutes are busy for everyone: the rate follows the
                // day's volume profile, as the noise traders' does.
                let busy = self.activity[self.minute_at(now)];
                let rate = (per_min * busy).max(1e-6) / US_PER_MIN as f64;
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
        let end = self.minutes as u64 * US_PER_MIN;
        self.run_until(end - 1);
        let last = self.minutes - 1;
        self.close_minute(last);
        (self.stats, self.recording.unwrap_or_default())
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
        let second = self.now / 1_000_000;
        let (at, cached) = self.shift_cache.get();
        if at == second {
            return cached;
        }
        let x = self.decayed_flow() / self.daily_volume;
        let shift = self.flow_scale * x / (x.abs() + 1e-4).sqrt();
        self.shift_cache.set((second, shift));
        shift
    }

    fn record(&mut self, r: &ExecReport, side: Side, informative: bool) {
        if r.filled > 0 {
            if informative {
                let signed = if side == Side::Bid { 1.0 } else { -1.0 } * r.filled as f64;
                self.flow = self.decayed_flow() + signed;
                self.flow_at = self.now;
                self.shift_cache.set((u64::MAX, 0.0));
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
        let r = match &mut self.recording {
            None => self.book.submit(order, &mut ()).ok()?,
            Some(rec) => {
                let mut fills = Vec::new();
                let r = self.book.submit(order, &mut Trades(&mut fills)).ok()?;
                rec.trades.extend(fills.iter().map(|f| TapeTrade {
                    time_us: self.now,
                    price: f.price as f64 * self.tick,
                    qty: f.qty,
                    aggressor: f.taker_side,
                    taker_owner: f.taker_owner,
                    maker_owner: f.maker_owner,
                }));
                r
            }
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

    /// The fundamental at time `t`, ticks: it moves linearly within each
    /// minute from the last minute's close to this one's, so that prices
    /// have no reason to jump at minute boundaries.
    fn fundamental_at(&self, t: u64) -> f64 {
        let m = self.minute_at(t);
        let frac = ((t.saturating_sub(m as u64 * US_PER_MIN)) as f64 / US_PER_MIN as f64).min(1.0);
        let prev = self.fundamental[m.saturating_sub(1)];
        prev + (self.fundamental[m] - prev) * frac + self.flow_shift()
    }

    fn wake(&mut self, a: u32) {
        let m = self.minute_at(self.now);
        let fund = self.fundamental_at(self.now);
        match self.agents[a as usize].kind {
            AgentKind::Noise => {
                if self.agents[a as usize].redraw {
                    return;
                }
                let a = self.rng.random_range(0..self.n_noise);
                let u: f64 = self.rng.random();
                if u < self.cfg.cancel_share {
                    if let Some(id) = self.agents[a as usize].live.pop_front() {
                        self.events += 1;
                        let _ = self.book.cancel(id, &mut ());
                    }
                    return;
                }
                // Zero-intelligence traders see a blurred fundamental, as in
                // ABIDES: they price around a mix of it and the book's mid.
                let w = self.cfg.noise_fundamental_weight.clamp(0.0, 1.0);
                let mid = (1.0 - w) * self.reference() + w * fund;
                // A slight pull toward the fundamental, measured in bps so
                // that it is as slight for a one-tick stock as for any
                // other: the noise flow is most of the volume, and a strong
                // pull would trade away every other trader's impact.
                let gap_bps = (fund - mid) / mid.max(1.0) * 1e4;
                let tilt = (0.1 * gap_bps / self.cfg.noise_tilt_bps.max(1e-3)).clamp(-0.2, 0.2);
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
                    // On the grid, so that orders meet at the levels others
                    // quote (for most stocks the grid is the tick).
                    let g = self.grid;
                    let price = match side {
                        Side::Bid => (m0 - half).div_euclid(g) * g - d * g,
                        Side::Ask => -(-(m0 + half)).div_euclid(g) * g + d * g,
                    };
                    if price > 0 {
                        self.submit(a, side, OrderKind::Limit { price }, qty);
                    }
                    let live = &mut self.agents[a as usize].live;
                    if live.len() > self.cfg.noise_max_orders {
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
            AgentKind::Momentum => {
                let k = self.cfg.momentum_lookback_min.max(1);
                if m <= k {
                    return;
                }
                let (now_mid, then_mid) = (self.stats.mid[m - 1], self.stats.mid[m - 1 - k]);
                if now_mid <= 0.0 || then_mid <= 0.0 {
                    return;
                }
                let trend = (now_mid / then_mid).ln() * 1e4;
                if trend.abs() < self.cfg.momentum_threshold_bps {
                    return;
                }
                let side = if trend > 0.0 { Side::Bid } else { Side::Ask };
                let qty = self.size();
                self.submit(a, side, OrderKind::Market, qty);
            }
            AgentKind::Informed => {
                let horizon = (self.cfg.informed_horizon_min.max(0.0) * US_PER_MIN as f64) as u64;
                let noise: f64 = self.rng.sample(rand_distr::StandardNormal);
                let seen = self.fundamental_at(self.now + horizon)
                    * (1.0 + noise * self.cfg.informed_noise_bps / 1e4);
                let gap = seen - self.reference();
                if gap.abs() < self.grid as f64 {
                    return;
                }
                // Take whatever is offered on the wrong side of the value
                // seen, and nothing beyond: an IOC limited at that value.
                let (side, price) = if gap > 0.0 {
                    (Side::Bid, seen.floor() as Ticks)
                } else {
                    (Side::Ask, seen.ceil() as Ticks)
                };
                let qty = self.size() * self.cfg.informed_size_mult.max(1.0) as u64;
                if price > 0 {
                    self.submit(a, side, OrderKind::Ioc { price }, qty);
                }
            }
            AgentKind::MarketMaker => {
                let w = self.cfg.mm_fundamental_weight.clamp(0.0, 1.0);
                let inv = self.agents[a as usize].inventory as f64;
                let size = self.mm_size[m];
                let cap = self.cfg.mm_max_skew_ticks.max(0.0) * self.grid as f64;
                let skew = (inv / (20.0 * size)).clamp(-cap, cap);
                let center = (1.0 - w) * self.reference() + w * fund - skew;
                // The quoted spread is the calibrated one in whole ticks, so
                // a one-tick stock is quoted one tick wide.
                let width = self.spread_ticks.round().max(1.0);
                let g = self.grid;
                let bid0 = ((center - width / 2.0).round() as Ticks).div_euclid(g) * g;
                let ask0 = bid0 + ((width as Ticks + g - 1) / g) * g;
                let quote = (bid0, ask0, size.round() as u64);
                // A quote that would not change stays, keeping its place in
                // the queues (and sparing the book twenty messages).
                let agent = &self.agents[a as usize];
                let standing = agent.quote == Some(quote)
                    && agent.live.iter().all(|&id| self.book.order(id).is_some());
                if !standing {
                    while let Some(id) = self.agents[a as usize].live.pop_front() {
                        self.events += 1;
                        let _ = self.book.cancel(id, &mut ());
                    }
                }
                // Orders left behind by a move, on the wrong side of the
                // price the maker now believes, are picked off first:
                // without this they hold the mid back for many seconds,
                // which shows as return autocorrelation at one minute.
                let snipe = (size * self.cfg.mm_snipe_mult) as u64;
                if snipe > 0 {
                    if self
                        .book
                        .best_ask()
                        .is_some_and(|p| (p as f64) < center - 0.5 * self.grid as f64)
                    {
                        let price = center.floor() as Ticks;
                        self.submit(a, Side::Bid, OrderKind::Ioc { price }, snipe);
                    }
                    if self
                        .book
                        .best_bid()
                        .is_some_and(|p| (p as f64) > center + 0.5 * self.grid as f64)
                    {
                        let price = center.ceil() as Ticks;
                        self.submit(a, Side::Ask, OrderKind::Ioc { price }, snipe);
                    }
                }
                if standing {
                    return;
                }
                self.agents[a as usize].quote = Some(quote);
                for k in 0..self.cfg.mm_levels as i64 {
                    // Depth grows away from the touch, then thins: a hump.
                    let w = 1.0 + 0.6 * k as f64 - 0.12 * (k * k) as f64;
                    let q = (size * w.max(0.3)).round() as u64;
                    let step = k * self.grid;
                    if bid0 - step > 0 {
                        self.submit(a, Side::Bid, OrderKind::Limit { price: bid0 - step }, q);
                    }
                    self.submit(a, Side::Ask, OrderKind::Limit { price: ask0 + step }, q);
                }
                // Real books hold minutes of volume within reach; a deep
                // level well behind the quotes stands for it, so that a
                // large order meets a steep price rather than an empty side.
                let deep = (self.minute_volume[m] * self.cfg.mm_deep_minutes.max(0.0)
                    / self.cfg.market_makers.max(1) as f64)
                    .round() as u64;
                if deep > 0 {
                    let gap = (self.cfg.mm_levels as i64 + 4 * width as i64) * g;
                    if bid0 - gap > 0 {
                        self.submit(a, Side::Bid, OrderKind::Limit { price: bid0 - gap }, deep);
                    }
                    self.submit(a, Side::Ask, OrderKind::Limit { price: ask0 + gap }, deep);
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
