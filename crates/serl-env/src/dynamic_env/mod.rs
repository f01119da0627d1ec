//! The dynamic environment: the agent's child orders go into a multi-agent
//! market calibrated to the order's symbol and session, so they move the
//! price.
//!
//! The market is built from the session's real minute prices (the value
//! traders' fundamental), real minute volumes (noise arrival rates and
//! market-maker depth) and estimated spread. Each step's quantity is sent as
//! market orders at the start of each of the step's minutes, evenly, capped
//! at `participation_cap` of the minute's real volume. The benchmark is the
//! TWAP of the simulated mid over the window.

use rand::seq::SliceRandom;
use serl_lob::Side;
use serl_market::{Calibration, MarketConfig, Simulator, EXECUTION_OWNER};

mod resting;

use crate::config::EnvConfig;
use crate::episode::{
    play, step_info, step_minutes, unfilled_charge, Decision, Episode, ExecutionOutcome, Progress,
    StepFills, Strategy,
};
use crate::obs::{write_obs, BookPicture, MarketNow, LEVELS, RETURNS, RETURN_HORIZONS};
use crate::order::{OrderSide, ParentOrder};
use crate::placement::{ChildOrder, FillLedger};
use crate::reward::{Reward, StepInfo};
use std::sync::Arc;

use crate::view::SessionView;

const US_PER_MIN: u64 = 60_000_000;

/// The simulator settings for one session: the configured population with
/// the order size scaled to the stock's volume, so that a day is about
/// 100-200 thousand events whatever the stock; or, where the session has
/// its real order flow ([`SessionView::order_flow`], a LOBSTER day), the
/// day's own order sizes, cancels, limit-order depths (noise orders and
/// makers' levels) and gap between messages ([`serl_market::OrderFlow`]).
pub fn calibrate(view: &SessionView, base: &MarketConfig) -> (Calibration, MarketConfig) {
    let minutes = serl_market::SESSION_MINUTES as usize;
    let open = view.open_minute;
    let mut price = Vec::with_capacity(minutes);
    let mut volume = Vec::with_capacity(minutes);
    let mut last = view.price.first().copied().unwrap_or(1.0);
    let mut j = 0;
    for m in 0..minutes as u16 {
        let minute = open + m;
        while j < view.minute.len() && view.minute[j] < minute {
            j += 1;
        }
        if j < view.minute.len() && view.minute[j] == minute {
            last = view.price[j];
            volume.push(view.volume[j]);
        } else {
            volume.push(0.0);
        }
        price.push(last);
    }
    let daily: f64 = volume.iter().sum();
    let mut cfg = base.clone();
    match &view.order_flow {
        Some(flow) => flow.apply(&mut cfg, daily),
        None => cfg.order_size = (daily / 80_000.0).max(base.order_size),
    }
    let mut cal = Calibration {
        tick: 0.01,
        minute_price: price,
        minute_volume: volume,
        spread_bps: view.spread_bps,
        noise_scale: Vec::new(),
    };
    cal.noise_scale = noise_fit(view, &cal, &cfg);
    (cal, cfg)
}

/// The price in ticks of `placement` off `sim`'s current book for a side
/// of sign `sign` (+1 a buy), and the mid (dollars); `None` for a crossing
/// order or a one-sided book.
pub(crate) fn limit_ticks(
    sim: &Simulator,
    sign: f64,
    placement: crate::Placement,
) -> Option<(serl_lob::Ticks, f64)> {
    let tick = sim.tick();
    let (bid, ask) = (sim.book.best_bid()?, sim.book.best_ask()?);
    let mid = (bid + ask) as f64 / 2.0 * tick;
    let half = (ask - bid) as f64 / 2.0 * tick;
    let price = placement.limit_price(sign, mid, half)?;
    Some(((price / tick).round() as serl_lob::Ticks, mid))
}

/// The session's fitted noise rates for this market config: from the
/// session's cache, else the run's fit cache on disk, else one pilot day.
fn noise_fit(view: &SessionView, cal: &Calibration, cfg: &MarketConfig) -> Vec<f64> {
    let key = format!("{cfg:?}");
    let cached = view
        .noise_fits
        .lock()
        .map(|m| m.get(&key).cloned())
        .unwrap_or(None);
    if let Some(fit) = cached {
        return fit.to_vec();
    }
    let dir = view.fit_dir.as_deref();
    let stored = dir.and_then(|d| crate::fit_cache::load(d, cal, cfg));
    let fit = Arc::new(stored.unwrap_or_else(|| {
        // A fixed pilot seed: the fit is part of the calibration, not of
        // an episode's randomness.
        let fit = serl_market::fit_noise_volume(cal, cfg, 0, serl_market::FitEffort::Quick);
        if let Some(d) = dir {
            crate::fit_cache::store(d, cal, cfg, &fit);
        }
        fit
    }));
    if let Ok(mut m) = view.noise_fits.lock() {
        m.insert(key, fit.clone());
    }
    fit.to_vec()
}

/// One episode in the dynamic market, stepped by the caller: the same
/// interface as [`crate::StaticEnv`]. It holds one execution agent's
/// [`Desk`] or, for a team ([`DynamicEnv::team`], the multi-agent
/// scenario), several, stepped jointly: their child orders meet in the
/// same book.
pub struct DynamicEnv<'a> {
    sim: Simulator,
    cal: Calibration,
    view: &'a SessionView,
    cfg: &'a EnvConfig,
    steps: usize,
    step: usize,
    arrival: f64,
    /// The last step's benchmark, for [`StepInfo::twap_gain_bps`].
    last_bench: f64,
    last_step_volume: f64,
    mids: Vec<f64>,
    peers: Vec<Peer>,
    /// The execution agents stepped here: one, or a team.
    desks: Vec<Desk>,
    /// Each desk's share of the participation cap: 1 for an agent alone
    /// or a competitor, its share of the parent order for a cooperative
    /// team's member (the team together keeps one agent's cap).
    cap_shares: Vec<f64>,
    /// The order the desks trade in this minute, and the generator that
    /// shuffles it (seeded from the episode's seed; unused by one desk).
    turns: Vec<usize>,
    turn_rng: rand::rngs::SmallRng,
}

/// One execution agent's side of a dynamic episode: its parent order, what
/// it has filled so far and what it has resting in the book.
struct Desk {
    order: ParentOrder,
    /// Its owner id in the simulated book.
    owner: u32,
    remaining: f64,
    filled: f64,
    notional: f64,
    /// Its orders resting in the book, oldest first.
    resting: Vec<resting::Resting>,
    /// What placement earned and cost so far.
    ledger: FillLedger,
}

impl Desk {
    fn new(order: &ParentOrder, owner: u32) -> Self {
        Desk {
            order: order.clone(),
            owner,
            remaining: order.qty,
            filled: 0.0,
            notional: 0.0,
            resting: Vec::new(),
            ledger: FillLedger::default(),
        }
    }
}

/// What one desk does over one decision step.
#[derive(Debug, Clone, Copy)]
struct StepPlan {
    want: f64,
    urgent: f64,
    placement: crate::Placement,
    got: f64,
    cost: f64,
    crossed: f64,
}

/// Another execution agent working its own parent order in the same
/// market over the same window, at an even pace (TWAP): the multi-agent
/// scenario, where several executions move one price.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The peer's side.
    pub side: OrderSide,
    /// Its parent order's size, shares.
    pub qty: f64,
    /// Shares it still has to trade.
    pub remaining: f64,
    /// Shares it has filled.
    pub filled: f64,
    /// Dollars paid (buys) or received (sells).
    pub notional: f64,
}

impl<'a> DynamicEnv<'a> {
    /// Builds the session's market, deterministic in `seed`, and runs it to
    /// the start of the order's window.
    pub fn new(
        view: &'a SessionView,
        order: &ParentOrder,
        cfg: &'a EnvConfig,
        market: &MarketConfig,
        seed: u64,
    ) -> Self {
        let one = std::slice::from_ref(order);
        Self::team(view, one, cfg, market, seed, crate::TeamMode::Competitive)
    }

    /// A team's episode: one desk per order in `orders` (which share one
    /// window), stepped jointly by [`DynamicEnv::step_all`]. A cooperative
    /// team's desks split the participation cap in proportion to their
    /// orders (one parent order split across desks); competitors each have
    /// the whole cap (independent orders).
    pub fn team(
        view: &'a SessionView,
        orders: &[ParentOrder],
        cfg: &'a EnvConfig,
        market: &MarketConfig,
        seed: u64,
        mode: crate::TeamMode,
    ) -> Self {
        let first = &orders[0];
        let (cal, mcfg) = calibrate(view, market);
        let mut sim = Simulator::new(&cal, &mcfg, seed);
        sim.run_until(Self::minute_us(view, first.start_minute));
        let arrival = sim.mid_price().unwrap_or(cal.minute_price[0]);
        let k = cfg.decision_minutes.max(1);
        DynamicEnv {
            sim,
            view,
            cfg,
            steps: (first.end_minute - first.start_minute).div_ceil(k) as usize,
            step: 0,
            arrival,
            last_bench: arrival,
            last_step_volume: 0.0,
            mids: Vec::new(),
            cal,
            peers: Vec::new(),
            desks: orders
                .iter()
                .enumerate()
                .map(|(i, o)| Desk::new(o, EXECUTION_OWNER + i as u32))
                .collect(),
            cap_shares: crate::team_mode::cap_shares(orders, mode),
            turns: (0..orders.len()).collect(),
            turn_rng: rand::SeedableRng::seed_from_u64(seed ^ 0x7E57_7EA5),
        }
    }

    /// Adds execution agents with parent orders of `qty` shares on `side`
    /// each, over this order's window.
    pub fn add_peers(&mut self, peers: impl IntoIterator<Item = (OrderSide, f64)>) {
        self.peers.extend(peers.into_iter().map(|(side, qty)| Peer {
            side,
            qty,
            remaining: qty,
            filled: 0.0,
            notional: 0.0,
        }));
    }

    /// The peers trading beside the agent, in the order they were added.
    pub fn peers(&self) -> &[Peer] {
        &self.peers
    }

    /// The desks stepped here (1 for a single agent).
    pub fn desks(&self) -> usize {
        self.desks.len()
    }

    /// The observation peer `k` sees: the market's, with its own inventory.
    pub fn observe_peer(&self, k: usize, out: &mut [f32]) {
        let p = &self.peers[k];
        self.observe_holding(p.side, p.remaining / p.qty.max(1.0), out);
    }

    /// The observation desk `k` sees: the market's, with its own
    /// inventory.
    pub fn observe_desk(&self, k: usize, out: &mut [f32]) {
        let d = &self.desks[k];
        self.observe_holding(d.order.side, d.remaining / d.order.qty, out);
    }

    /// What desk `k` may know at the coming step.
    pub fn desk_decision<'b>(&'b self, k: usize, obs: &'b [f32]) -> Decision<'b> {
        let d = &self.desks[k];
        let p = Progress {
            step: self.step,
            steps: self.steps,
            remaining: d.remaining,
            last_step_volume: self.last_step_volume,
            queue: self.queue_state(k),
        };
        Decision::new(obs, self.view, &d.order, self.cfg, p)
    }

    /// Desk `k`'s resting order as the coming decision sees it.
    pub fn desk_queue(&self, k: usize) -> crate::QueueState {
        self.queue_state(k)
    }

    /// Desk `k`'s share still to trade and the steps left.
    pub fn desk_left(&self, k: usize) -> (f64, usize) {
        let d = &self.desks[k];
        (
            d.remaining / d.order.qty,
            self.steps.saturating_sub(self.step),
        )
    }

    /// How desk `k`'s episode ended (so far).
    pub fn desk_outcome(
        &self,
        k: usize,
        reward: f64,
        inventory_path: Vec<f32>,
    ) -> ExecutionOutcome {
        let d = &self.desks[k];
        let bench_price = self.bench_price();
        let sign = d.order.side.sign();
        ExecutionOutcome {
            order_id: d.order.id,
            side: d.order.side,
            qty: d.order.qty,
            filled: d.filled,
            notional: d.notional,
            bench_price,
            arrival_price: self.arrival,
            horizon_price: unfilled_charge(self.far_touch(sign), sign, self.cfg),
            reward,
            steps: self.steps,
            inventory_path,
            placement: self.placement_stats(k, bench_price),
        }
    }

    /// What crossing one share costs now for side `sign`: the far touch
    /// (the ask for a buy, the bid for a sell), or the last mid and the
    /// session's half spread where that side of the book is empty.
    fn far_touch(&self, sign: f64) -> f64 {
        let touch = if sign > 0.0 {
            self.sim.book.best_ask()
        } else {
            self.sim.book.best_bid()
        };
        match touch {
            Some(t) => t as f64 * self.sim.tick(),
            None => {
                let mid = self.mids.last().copied().unwrap_or(self.arrival);
                mid * (1.0 + sign * self.view.spread_bps / 2.0 * 1e-4)
            }
        }
    }

    /// The window's benchmark so far: the mean simulated mid over the
    /// minutes played (the arrival mid before any).
    fn bench_price(&self) -> f64 {
        if self.mids.is_empty() {
            self.arrival
        } else {
            self.mids.iter().sum::<f64>() / self.mids.len() as f64
        }
    }

    /// Each peer's slice of this minute: what is left over the minutes left
    /// in the window, within the participation cap; sent before the agent's
    /// own child order.
    fn trade_peers(&mut self, minute: u16, cap: f64) {
        let end = self.desks[0].order.end_minute;
        let left = (end.saturating_sub(minute)).max(1) as f64;
        let first_owner = EXECUTION_OWNER + self.desks.len() as u32;
        for (k, p) in self.peers.iter_mut().enumerate() {
            let q = (p.remaining / left).min(cap).floor();
            if q < 1.0 {
                continue;
            }
            let owner = first_owner + k as u32;
            let r = self.sim.execute_market(owner, p.side.book_side(), q as u64);
            p.remaining = (p.remaining - r.filled as f64).max(0.0);
            p.filled += r.filled as f64;
            p.notional += r.notional as f64 * self.sim.tick();
        }
    }

    fn minute_us(view: &SessionView, m: u16) -> u64 {
        m.saturating_sub(view.open_minute) as u64 * US_PER_MIN
    }

    fn step_minutes(&self, j: usize) -> (u16, u16) {
        step_minutes(&self.desks[0].order, self.cfg, j)
    }

    /// The market's observation now, for an agent on `side` with
    /// `inventory_left` of its order still to trade.
    fn observe_holding(&self, side: OrderSide, inventory_left: f64, out: &mut [f32]) {
        let (from, _) = self.step_minutes(self.step.min(self.steps.saturating_sub(1)));
        let tick = self.sim.tick();
        let mid = self
            .sim
            .mid_price()
            .unwrap_or(self.view.price.first().copied().unwrap_or(1.0));
        let mut b = BookPicture::default();
        for (k, l) in self.sim.book.levels(Side::Bid).take(LEVELS).enumerate() {
            b.bid_bps[k] = (l.price as f64 * tick / mid - 1.0) * 1e4;
            b.bid_size[k] = l.qty as f64;
        }
        for (k, l) in self.sim.book.levels(Side::Ask).take(LEVELS).enumerate() {
            b.ask_bps[k] = (l.price as f64 * tick / mid - 1.0) * 1e4;
            b.ask_size[k] = l.qty as f64;
        }
        let stats = self.sim.stats();
        let m = (from - self.view.open_minute) as usize;
        let mut rets = [0.0; RETURNS];
        if m >= 2 {
            let c = stats.mid[m - 1];
            for (r, h) in rets.iter_mut().zip(RETURN_HORIZONS) {
                let a = stats.mid[(m - 1).saturating_sub(h)];
                if a > 0.0 && c > 0.0 {
                    *r = side.sign() * (c / a).ln() * 1e4;
                }
            }
        }
        let spread = self
            .sim
            .book
            .spread()
            .map_or(self.view.spread_bps, |s| s as f64 * tick / mid * 1e4);
        let last_volume = if m >= 1 { stats.volume[m - 1] } else { 0.0 };
        let now = MarketNow {
            time_left: 1.0 - self.step as f64 / self.steps.max(1) as f64,
            inventory_left,
            book: &b,
            returns_bps: &rets,
            last_volume,
            spread_bps: spread,
            avg_minute_volume: self.view.avg_minute_volume,
        };
        write_obs(out, &now);
    }

    /// What each desk sets out to do this step: the share it wants and
    /// how much of it crosses at once.
    fn plan(&mut self, orders: &[ChildOrder]) -> Vec<StepPlan> {
        assert_eq!(orders.len(), self.desks.len(), "one child order per desk");
        let cfg = self.cfg;
        self.desks
            .iter_mut()
            .zip(orders)
            .map(|(d, o)| {
                let want = (cfg.fraction(o.action) * d.order.qty).min(d.remaining);
                let urgent = if o.placement.is_passive() {
                    (o.cross_first.max(0.0) * d.order.qty).min(want)
                } else {
                    want
                };
                d.ledger.begin_step();
                StepPlan {
                    want,
                    urgent,
                    placement: o.placement,
                    got: 0.0,
                    cost: 0.0,
                    crossed: 0.0,
                }
            })
            .collect()
    }

    /// Steps every desk with its child order (in desk order) and writes
    /// each desk's [`StepInfo`] into `infos`. Within each minute the desks
    /// trade in turn, in an order drawn anew every minute, so no desk is
    /// always first in the queue: the crossed share goes as market orders
    /// at the start of each minute, the rest as one limit order posted at
    /// the step's start, resting until the next decision.
    pub fn step_all(&mut self, orders: &[ChildOrder], infos: &mut Vec<StepInfo>) {
        let (from, to) = self.step_minutes(self.step);
        let open = self.view.open_minute;
        let mut plans = self.plan(orders);
        let desks = plans.len();
        let (mut vol, mut bench) = (0.0, 0.0);
        let n = (to - from) as f64;
        for (i, m) in (from..to).enumerate() {
            self.sim.run_until(Self::minute_us(self.view, m));
            let mi = (m - open) as usize;
            let cap = self.cfg.participation_cap * self.minute_volume(mi..mi + 1);
            if !self.peers.is_empty() {
                self.trade_peers(m, cap);
            }
            if desks > 1 {
                // Who goes first is drawn anew every minute: no desk is
                // favoured by the calendar.
                self.turns.shuffle(&mut self.turn_rng);
            }
            for j in 0..desks {
                let k = self.turns[j];
                let desk_cap = cap * self.cap_shares[k];
                let p = &mut plans[k];
                let q = ((p.urgent - p.crossed) / (n - i as f64))
                    .min(desk_cap)
                    .floor();
                if q >= 1.0 {
                    let (g, c) = self.cross(k, q as u64);
                    let p = &mut plans[k];
                    p.crossed += g;
                    p.got += g;
                    p.cost += c;
                }
                if i == 0 {
                    let step_cap = self.cfg.participation_cap
                        * self.cap_shares[k]
                        * self.minute_volume(mi..mi + n as usize);
                    let p = plans[k];
                    let (g, c) =
                        self.replace_resting(k, p.placement, (p.want - p.urgent).min(step_cap), m);
                    plans[k].got += g;
                    plans[k].cost += c;
                }
            }
            let mid_before = self.sim.mid_price();
            self.sim.run_until(Self::minute_us(self.view, m + 1) - 1);
            for (k, p) in plans.iter_mut().enumerate() {
                let (g, c) = self.collect(k, m, mid_before);
                p.got += g;
                p.cost += c;
            }
            vol += self.sim.stats().volume.get(mi).copied().unwrap_or(0.0);
            let last = self.cal.minute_price.len() - 1;
            let mid = self
                .sim
                .mid_price()
                .unwrap_or(self.cal.minute_price[mi.min(last)]);
            self.mids.push(mid);
            bench += mid;
        }
        self.step += 1;
        let fills_base = StepFills {
            got: 0.0,
            cost: 0.0,
            bench: if n > 0.0 { bench / n } else { self.arrival },
            arrival: self.arrival,
            prev_bench: self.last_bench,
            volume: vol,
            minutes: n.max(1.0),
        };
        if self.step >= self.steps {
            self.close(&mut plans);
        }
        infos.clear();
        for (k, p) in plans.into_iter().enumerate() {
            let fills = self.finish_step(k, p, &fills_base);
            infos.push(fills);
        }
        self.last_step_volume = vol;
        self.last_bench = fills_base.bench;
    }

    /// The horizon: every desk's resting orders are withdrawn, then what is
    /// left is crossed when the config says so. Several desks cross in
    /// turns of a quarter of what each has left, in an order drawn anew
    /// each turn, so that none is always first at the best prices; one
    /// desk crosses all at once.
    fn close(&mut self, plans: &mut [StepPlan]) {
        for k in 0..plans.len() {
            self.withdraw(k);
        }
        if self.cfg.terminal != crate::Terminal::ForceLiquidate {
            return;
        }
        let left: Vec<f64> = (0..plans.len())
            .map(|k| {
                let q = self.desks[k].remaining - plans[k].got;
                if q >= 1.0 {
                    q.round()
                } else {
                    0.0
                }
            })
            .collect();
        let turns = if plans.len() > 1 { 4.0 } else { 1.0 };
        let mut owed = left.clone();
        while owed.iter().any(|&q| q >= 1.0) {
            if plans.len() > 1 {
                self.turns.shuffle(&mut self.turn_rng);
            }
            for j in 0..plans.len() {
                let k = self.turns[j];
                let q = owed[k].min((left[k] / turns).ceil());
                if q < 1.0 {
                    continue;
                }
                owed[k] -= q;
                let (g, c) = self.cross(k, q as u64);
                plans[k].got += g;
                plans[k].cost += c;
                let ledger = &mut self.desks[k].ledger;
                ledger.final_qty += g;
                ledger.final_notional += c;
            }
        }
    }

    /// Desk `k`'s end of a step: its counters move and its [`StepInfo`] is
    /// made.
    fn finish_step(&mut self, k: usize, p: StepPlan, base: &StepFills) -> StepInfo {
        let done = self.step >= self.steps;
        let d = &mut self.desks[k];
        d.remaining = (d.remaining - p.got).max(0.0);
        d.filled += p.got;
        d.notional += p.cost;
        let fills = StepFills {
            got: p.got,
            cost: p.cost,
            ..*base
        };
        let mut info = step_info(
            self.view,
            &d.order,
            &fills,
            self.step,
            self.steps,
            d.remaining,
            done,
        );
        let mid_end = self.mids.last().copied().unwrap_or(self.arrival);
        (info.spread_captured_bps, info.adverse_bps) =
            d.ledger
                .step_figures(d.order.side.sign(), d.order.qty, mid_end);
        info
    }
}

impl Episode for DynamicEnv<'_> {
    fn queue(&self) -> crate::QueueState {
        self.queue_state(0)
    }

    /// The share of the order still to trade, and the steps left for it.
    fn left(&self) -> (f64, usize) {
        self.desk_left(0)
    }

    fn steps(&self) -> usize {
        self.steps
    }

    fn done(&self) -> bool {
        self.step >= self.steps
    }

    fn observe(&self, out: &mut [f32]) {
        self.observe_desk(0, out);
    }

    fn decision<'b>(&'b self, obs: &'b [f32]) -> Decision<'b> {
        self.desk_decision(0, obs)
    }

    /// Sends this step's child orders and runs the market through the
    /// step ([`DynamicEnv::step_all`] for the one desk).
    fn step_order(&mut self, o: ChildOrder) -> StepInfo {
        let mut infos = Vec::with_capacity(1);
        self.step_all(std::slice::from_ref(&o), &mut infos);
        infos.swap_remove(0)
    }

    fn outcome(&self, reward: f64, inventory_path: Vec<f32>) -> ExecutionOutcome {
        self.desk_outcome(0, reward, inventory_path)
    }

    fn agents(&self) -> usize {
        1 + self.peers.len()
    }

    /// Agent `k > 0` is peer `k - 1`: the market's view, with its own
    /// inventory.
    fn observe_agent(&self, k: usize, out: &mut [f32]) {
        match k {
            0 => self.observe(out),
            _ => self.observe_peer(k - 1, out),
        }
    }
}

/// Runs one episode of `strategy` in the dynamic market: `day` is the
/// simulated day, its population and its seed.
pub fn run_dynamic(
    strategy: &mut dyn Strategy,
    view: &SessionView,
    order: &ParentOrder,
    cfg: &EnvConfig,
    (market, seed): (&MarketConfig, u64),
    reward: &dyn Reward,
    record_path: bool,
) -> ExecutionOutcome {
    strategy.reset(view, order, cfg);
    let mut episode = DynamicEnv::new(view, order, cfg, market, seed);
    play(&mut episode, strategy, reward, record_path)
}
