//! The agents: when each kind wakes, and what it does then.
//!
//! Every random draw happens in a fixed order per wake-up, so a day is
//! deterministic in its seed; the helpers below keep that order.

use std::collections::VecDeque;

use rand::Rng;
use rand_distr::{Distribution, Exp};
use serl_lob::{OrderId, OrderKind, Side, Ticks};

use super::{round, AgentKind, MarketConfig, Simulator, US_PER_MIN};

pub(super) struct Agent {
    pub(super) kind: AgentKind,
    pub(super) live: VecDeque<OrderId>,
    pub(super) inventory: i64,
    /// The wake-up is only a minute boundary where the arrival rate
    /// changes: redraw the next arrival without acting.
    pub(super) redraw: bool,
    /// A market maker's standing quote: best bid, best ask, touch size.
    pub(super) quote: Option<(Ticks, Ticks, u64)>,
    /// A market maker's messages of a re-quote not yet sent, when they go
    /// out one by one (`mm_message_gap_us`).
    pub(super) pending: VecDeque<MakerMessage>,
}

/// One message of a market maker's re-quote.
#[derive(Debug, Clone, Copy)]
pub(super) enum MakerMessage {
    Cancel(OrderId),
    Post(Side, Ticks, u64),
}

/// The agents of a day, in the order of their ids: noise traders first
/// (`n_noise` of them), then value, momentum and informed traders, then at
/// least one market maker.
pub(super) fn population(cfg: &MarketConfig, n_noise: usize) -> Vec<Agent> {
    let agent = |kind| Agent {
        kind,
        live: VecDeque::new(),
        inventory: 0,
        redraw: false,
        quote: None,
        pending: VecDeque::new(),
    };
    if cfg.queue_reactive.is_some() {
        return vec![agent(AgentKind::QueueReactive)];
    }
    let population = [
        (AgentKind::Noise, n_noise),
        (AgentKind::Value, cfg.value_agents),
        (AgentKind::Momentum, cfg.momentum_agents),
        (AgentKind::Informed, cfg.informed_agents),
        (AgentKind::MarketMaker, cfg.market_makers.max(1)),
    ];
    population
        .iter()
        .flat_map(|&(kind, n)| (0..n).map(move |_| agent(kind)))
        .collect()
}

/// Where a market maker quotes this time.
struct MakerQuote {
    /// The price the maker believes, skewed against its inventory, ticks.
    center: f64,
    /// The quoted spread in whole ticks.
    width: f64,
    /// Best bid and ask, on the grid.
    bid: Ticks,
    ask: Ticks,
    /// Size at the touch, shares.
    size: f64,
}

impl Simulator {
    pub(super) fn first_wake(&mut self, a: u32) -> u64 {
        self.next_wake(a, 0)
    }

    pub(super) fn next_wake(&mut self, a: u32, now: u64) -> u64 {
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
            AgentKind::QueueReactive => self.queue_reactive_wake(a, now),
            AgentKind::MarketMaker if !self.agents[a as usize].pending.is_empty() => {
                // The rest of a re-quote, one message at a time.
                let gap = Exp::new(1.0 / self.cfg.mm_message_gap_us.max(1.0))
                    .map_or(1.0, |e| e.sample(&mut self.rng));
                now + (gap as u64).max(1)
            }
            AgentKind::MarketMaker => {
                let base = self.cfg.mm_interval_ms * 1000;
                now + base / 2 + self.rng.random_range(0..base.max(1)) + lat
            }
        }
    }

    pub(super) fn wake(&mut self, a: u32) {
        let m = self.minute_at(self.now);
        // Read for every kind, even those that do not use it: reading
        // fills the flow-shift cache for this second, which later reads
        // in the same second see.
        let fund = self.fundamental_at(self.now);
        match self.agents[a as usize].kind {
            AgentKind::Noise => self.wake_noise(a, fund),
            AgentKind::Value => self.wake_value(a, fund),
            AgentKind::Momentum => self.wake_momentum(a, m),
            AgentKind::Informed => self.wake_informed(a),
            AgentKind::MarketMaker => self.wake_market_maker(a, m, fund),
            AgentKind::QueueReactive => self.wake_queue_reactive(a),
        }
    }

    /// One arrival of the noise stream (carried by agent `carrier`): a
    /// random noise trader cancels, sends a market order or places a limit
    /// order near the touch.
    #[inline]
    fn wake_noise(&mut self, carrier: u32, fund: f64) {
        if self.agents[carrier as usize].redraw {
            return;
        }
        let a = self.rng.random_range(0..self.n_noise);
        let u: f64 = self.rng.random();
        if u < self.noise_split.cancel_below {
            if let Some(id) = self.agents[a as usize].live.pop_front() {
                self.events += 1;
                self.cancel(id);
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
        if u < self.noise_split.market_below {
            self.submit(a, side, OrderKind::Market, qty);
        } else {
            let qty = self.noise_limit_size(qty);
            self.noise_limit(a, side, mid, qty);
        }
    }

    /// A noise trader's limit order a random number of grid steps behind
    /// the touch around `mid`; its oldest order goes when it holds too many.
    #[inline]
    fn noise_limit(&mut self, a: u32, side: Side, mid: f64, qty: u64) {
        if self.cfg.depth_quantiles.is_empty() {
            self.noise_limit_on_grid(a, side, mid, qty);
        } else {
            self.noise_limit_at_depth(a, side, mid, qty);
        }
        let live = &mut self.agents[a as usize].live;
        if live.len() > self.cfg.noise_max_orders {
            if let Some(old) = live.pop_front() {
                self.cancel(old);
            }
        }
    }

    /// A geometric number of grid steps behind the touch around `mid`.
    #[inline]
    fn noise_limit_on_grid(&mut self, a: u32, side: Side, mid: f64, qty: u64) {
        let mut d = 0i64;
        while d < 20 && self.rng.random_bool(0.6) {
            d += 1;
        }
        let half = (self.spread_ticks / 2.0).ceil() as i64;
        let m0 = round(mid) as Ticks;
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
    }

    /// At a depth drawn from the real day's (`depth_quantiles`), ticks
    /// behind the own side's best price, at tick resolution; never across
    /// the other side (a limit order that would cross rests one tick
    /// inside it).
    #[inline]
    fn noise_limit_at_depth(&mut self, a: u32, side: Side, mid: f64, qty: u64) {
        let q = &self.cfg.depth_quantiles;
        let d = q[self.rng.random_range(0..q.len())];
        let half = (self.spread_ticks / 2.0).ceil() as i64;
        let m0 = round(mid) as Ticks;
        let (bid, ask) = (self.book.best_bid(), self.book.best_ask());
        let price = match side {
            Side::Bid => {
                let p = bid.unwrap_or(m0 - half) - d;
                ask.map_or(p, |x| p.min(x - 1))
            }
            Side::Ask => {
                let p = ask.unwrap_or(m0 + half) + d;
                bid.map_or(p, |x| p.max(x + 1))
            }
        };
        if price > 0 {
            self.submit(a, side, OrderKind::Limit { price }, qty);
        }
    }

    /// A value trader buys or sells at market when its noisy view of the
    /// fundamental is more than a spread away from the mid.
    #[inline]
    fn wake_value(&mut self, a: u32, fund: f64) {
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

    /// A momentum trader follows the mid's move over the last minutes
    /// (closed minutes only, `m` being the current one).
    #[inline]
    fn wake_momentum(&mut self, a: u32, m: usize) {
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

    /// An informed trader sees the fundamental a little ahead, blurred,
    /// and takes what is mispriced against it.
    #[inline]
    fn wake_informed(&mut self, a: u32) {
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

    /// A market maker re-quotes: it withdraws a quote that changed, picks
    /// off stale orders, then posts its levels and a deep one behind them.
    /// With `mm_message_gap_us` set, the withdrawals and new orders go out
    /// one per wake-up, a gap apart; a maker still sending its last
    /// re-quote sends its next message and nothing else.
    #[inline]
    fn wake_market_maker(&mut self, a: u32, m: usize, fund: f64) {
        if let Some(msg) = self.agents[a as usize].pending.pop_front() {
            self.maker_send(a, msg);
            return;
        }
        let q = self.maker_quote(a, m, fund);
        let quote = (q.bid, q.ask, round(q.size) as u64);
        // A quote that would not change stays, keeping its place in
        // the queues (and sparing the book twenty messages).
        let agent = &self.agents[a as usize];
        let standing = agent.quote == Some(quote)
            && agent.live.iter().all(|&id| self.book.order(id).is_some());
        if !standing {
            while let Some(id) = self.agents[a as usize].live.pop_front() {
                self.maker_message(a, MakerMessage::Cancel(id));
            }
        }
        self.maker_snipe(a, &q);
        if standing {
            return;
        }
        self.agents[a as usize].quote = Some(quote);
        self.maker_post(a, m, &q);
        if let Some(msg) = self.agents[a as usize].pending.pop_front() {
            self.maker_send(a, msg);
        }
    }

    /// Sends maker `a`'s message now, or queues it when its messages go
    /// out a gap apart.
    fn maker_message(&mut self, a: u32, msg: MakerMessage) {
        if self.cfg.mm_message_gap_us > 0.0 {
            self.agents[a as usize].pending.push_back(msg);
        } else {
            self.maker_send(a, msg);
        }
    }

    fn maker_send(&mut self, a: u32, msg: MakerMessage) {
        match msg {
            MakerMessage::Cancel(id) => {
                self.events += 1;
                self.cancel(id);
            }
            MakerMessage::Post(side, price, qty) => {
                self.submit(a, side, OrderKind::Limit { price }, qty);
            }
        }
    }

    /// Where market maker `a` quotes in minute `m`: around a mix of the
    /// fundamental and the mid, skewed against its inventory.
    #[inline]
    fn maker_quote(&self, a: u32, m: usize, fund: f64) -> MakerQuote {
        let w = self.cfg.mm_fundamental_weight.clamp(0.0, 1.0);
        let inv = self.agents[a as usize].inventory as f64;
        let size = self.mm_size[m];
        let cap = self.cfg.mm_max_skew_ticks.max(0.0) * self.grid as f64;
        let skew = (inv / (20.0 * size)).clamp(-cap, cap);
        let center = (1.0 - w) * self.reference() + w * fund - skew;
        // The quoted spread is the calibrated one in whole ticks, so
        // a one-tick stock is quoted one tick wide.
        let width = round(self.spread_ticks).max(1.0);
        let g = self.grid;
        let bid = (round(center - width / 2.0) as Ticks).div_euclid(g) * g;
        let ask = bid + ((width as Ticks + g - 1) / g) * g;
        MakerQuote {
            center,
            width,
            bid,
            ask,
            size,
        }
    }

    /// Orders left behind by a move, on the wrong side of the price the
    /// maker now believes, are picked off first: without this they hold
    /// the mid back for many seconds, which shows as return
    /// autocorrelation at one minute.
    #[inline]
    fn maker_snipe(&mut self, a: u32, q: &MakerQuote) {
        let snipe = (q.size * self.cfg.mm_snipe_mult) as u64;
        if snipe == 0 {
            return;
        }
        let center = q.center;
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

    /// Posts `qty` at `price` for maker `a`: one order, or with a real
    /// day's sizes up to `mm_orders_per_level` orders of drawn sizes (the
    /// last one the rest), so that depth is many orders as in real books.
    fn post_level(&mut self, a: u32, side: Side, price: Ticks, qty: u64) {
        let mut rest = qty;
        if matches!(self.sizes, super::SizeDraw::Quantiles(_)) {
            for _ in 1..self.cfg.mm_orders_per_level {
                let d = self.size();
                if d >= rest {
                    break;
                }
                self.maker_message(a, MakerMessage::Post(side, price, d));
                rest -= d;
            }
        }
        self.maker_message(a, MakerMessage::Post(side, price, rest));
    }

    /// Posts a market maker's quote: `mm_levels` levels a side from the
    /// touch, then one deep level well behind them.
    #[inline]
    fn maker_post(&mut self, a: u32, m: usize, q: &MakerQuote) {
        let (bid0, ask0, size, g) = (q.bid, q.ask, q.size, self.grid);
        for k in 0..self.cfg.mm_levels {
            // Depth grows away from the touch, then thins: a hump.
            let w = 1.0 + 0.6 * k as f64 - 0.12 * (k * k) as f64;
            let qty = self.in_lots(size * w.max(0.3));
            let step = match &self.maker_depths {
                Some((steps, _)) => steps[k],
                None => k as i64 * g,
            };
            if bid0 - step > 0 {
                self.post_level(a, Side::Bid, bid0 - step, qty);
            }
            self.post_level(a, Side::Ask, ask0 + step, qty);
        }
        // Real books hold minutes of volume within reach; a deep
        // level well behind the quotes stands for it, so that a
        // large order meets a steep price rather than an empty side.
        let deep = (self.minute_volume[m] * self.cfg.mm_deep_minutes.max(0.0)
            / self.cfg.market_makers.max(1) as f64)
            .round() as u64;
        if deep > 0 {
            let gap = match &self.maker_depths {
                Some((_, deep_at)) => *deep_at,
                None => (self.cfg.mm_levels as i64 + 4 * q.width as i64) * g,
            };
            if bid0 - gap > 0 {
                self.maker_message(a, MakerMessage::Post(Side::Bid, bid0 - gap, deep));
            }
            self.maker_message(a, MakerMessage::Post(Side::Ask, ask0 + gap, deep));
        }
    }
}
