//! The static environment: a replay of historical minute bars with no
//! market impact.
//!
//! A child order of q shares is worked evenly over the bars of its
//! decision step. Each bar fills at its minute price plus (buy) or minus
//! (sell) half the spread, up to `participation_cap` of the bar's volume;
//! what a capped bar cannot take goes to the step's bars with room left, and
//! what the step cannot take stays in inventory.

use crate::config::{Benchmark, EnvConfig, Terminal};
mod resting;

use crate::episode::{
    play, step_info, step_minutes, unfilled_charge, Decision, Episode, ExecutionOutcome, Progress,
    StepFills, Strategy,
};
use crate::lobster_queue::LobsterDay;
use crate::obs::{write_obs, BookPicture, MarketNow, LEVELS, OBS_DIM, RETURNS, RETURN_HORIZONS};
use crate::order::ParentOrder;
use crate::placement::{ChildOrder, FillLedger, QueueState};
use crate::reward::{Reward, StepInfo};
use crate::view::{SessionView, ViewRef};

/// One episode of the static environment.
pub struct StaticEnv<'a> {
    view: ViewRef<'a>,
    /// The order: borrowed, or owned by a team's episode (a member's share
    /// of a parent order).
    order: std::borrow::Cow<'a, ParentOrder>,
    /// The settings: borrowed, or a team member's own (its share of a
    /// cooperative team's participation cap).
    cfg: std::borrow::Cow<'a, EnvConfig>,
    steps: usize,
    step: usize,
    remaining: f64,
    filled: f64,
    notional: f64,
    bench: f64,
    arrival: f64,
    /// The last step's benchmark, for [`StepInfo::twap_gain_bps`].
    last_bench: f64,
    last_step_volume: f64,
    sign: f64,
    /// What placement earned and cost so far.
    ledger: FillLedger,
    /// Scratch: shares taken from each of a step's bars.
    used: Vec<f64>,
    /// The day's message stream, where resting orders fill by their place
    /// in the real queue instead of the [`FillModel`](crate::FillModel).
    queue: Option<&'a LobsterDay>,
    /// The order resting from the last step, if any.
    rested: Option<resting::Rested>,
}

impl<'a> StaticEnv<'a> {
    /// An episode of `order` on `view`: a [`SessionView`] of the market
    /// data, or an imagined day ([`ViewRef::Owned`]).
    pub fn new(view: impl Into<ViewRef<'a>>, order: &'a ParentOrder, cfg: &'a EnvConfig) -> Self {
        Self::with_order(
            view.into(),
            std::borrow::Cow::Borrowed(order),
            std::borrow::Cow::Borrowed(cfg),
        )
    }

    /// An episode of an order and settings the episode keeps (a team
    /// member's share of a parent order, and of the team's cap).
    pub fn owning(view: impl Into<ViewRef<'a>>, order: ParentOrder, cfg: EnvConfig) -> Self {
        Self::with_order(
            view.into(),
            std::borrow::Cow::Owned(order),
            std::borrow::Cow::Owned(cfg),
        )
    }

    fn with_order(
        view: ViewRef<'a>,
        order: std::borrow::Cow<'a, ParentOrder>,
        cfg: std::borrow::Cow<'a, EnvConfig>,
    ) -> Self {
        let k = cfg.decision_minutes.max(1);
        let span = order.end_minute.saturating_sub(order.start_minute);
        let w = view.range(order.start_minute, order.end_minute);
        let (mut sum, mut wsum, mut vsum) = (0.0, 0.0, 0.0);
        for i in w.clone() {
            sum += view.price[i];
            wsum += view.price[i] * view.volume[i];
            vsum += view.volume[i];
        }
        let n = w.len().max(1) as f64;
        let twap = sum / n;
        let bench = match cfg.benchmark {
            Benchmark::Twap => twap,
            Benchmark::Vwap if vsum > 0.0 => wsum / vsum,
            Benchmark::Vwap => twap,
        };
        let arrival = w.clone().next().map_or(twap, |i| view.price[i]);
        let (qty, sign) = (order.qty, order.side.sign());
        StaticEnv {
            view,
            order,
            cfg,
            steps: span.div_ceil(k) as usize,
            step: 0,
            remaining: qty,
            filled: 0.0,
            notional: 0.0,
            bench,
            arrival,
            last_bench: arrival,
            last_step_volume: 0.0,
            sign,
            ledger: FillLedger::default(),
            used: Vec::new(),
            queue: None,
            rested: None,
        }
    }

    /// An episode of `order` on a LOBSTER day (`view` built from its
    /// [`LobsterDay::session`]): resting orders fill by their place in the
    /// day's real queue.
    pub fn on_lobster(
        view: &'a SessionView,
        order: &'a ParentOrder,
        cfg: &'a EnvConfig,
        day: &'a LobsterDay,
    ) -> Self {
        StaticEnv {
            queue: Some(day),
            ..StaticEnv::new(view, order, cfg)
        }
    }

    /// The horizon's bar: the window's last (the session's last before
    /// the window, for a window without one); where the forced
    /// liquidation crosses and unfilled shares are charged.
    fn horizon_bar(&self) -> Option<usize> {
        let v = &*self.view;
        let window = v.range(self.order.start_minute, self.order.end_minute);
        if window.is_empty() {
            window.start.checked_sub(1).or(v.price.len().checked_sub(1))
        } else {
            Some(window.end - 1)
        }
    }

    /// Shares still to trade.
    pub fn remaining(&self) -> f64 {
        self.remaining
    }

    /// The window's benchmark price ([`Benchmark`]).
    pub fn benchmark(&self) -> f64 {
        self.bench
    }

    /// Minutes of step `j`.
    pub fn step_minutes(&self, j: usize) -> (u16, u16) {
        step_minutes(&self.order, &self.cfg, j)
    }

    /// The book features at a bar: quotes where the session has them, else
    /// the spread-and-depth model (levels one tick apart beyond the
    /// estimated spread; sizes a share of the average minute volume growing
    /// away from the touch).
    fn book_at(&self, bar: Option<usize>) -> (BookPicture, f64) {
        let v = &*self.view;
        let mut b = BookPicture::default();
        let (half_bps, touch_bid, touch_ask) = match bar {
            Some(i) => {
                let p = v.price[i].max(1e-9);
                (
                    v.half_spread[i] / p * 1e4,
                    v.bid_size.as_ref().map(|s| s[i]),
                    v.ask_size.as_ref().map(|s| s[i]),
                )
            }
            None => (v.spread_bps / 2.0, None, None),
        };
        let depth = 0.05 * v.avg_minute_volume;
        for k in 0..LEVELS {
            let off = half_bps + k as f64 * v.tick_bps;
            b.bid_bps[k] = -off;
            b.ask_bps[k] = off;
            let model = depth * (1.0 + 0.5 * k as f64);
            b.bid_size[k] = if k == 0 {
                touch_bid.unwrap_or(model)
            } else {
                model
            };
            b.ask_size[k] = if k == 0 {
                touch_ask.unwrap_or(model)
            } else {
                model
            };
        }
        (b, 2.0 * half_bps)
    }
}

impl Episode for StaticEnv<'_> {
    fn queue(&self) -> QueueState {
        self.queue_state()
    }

    fn steps(&self) -> usize {
        self.steps
    }

    fn done(&self) -> bool {
        self.step >= self.steps
    }

    /// The share of the order still to trade, and the steps left for it.
    fn left(&self) -> (f64, usize) {
        (
            self.remaining / self.order.qty,
            self.steps.saturating_sub(self.step),
        )
    }

    /// Writes the observation for the coming step into `out`.
    fn observe(&self, out: &mut [f32]) {
        debug_assert!(out.len() >= OBS_DIM);
        let (from, _) = self.step_minutes(self.step.min(self.steps.saturating_sub(1)));
        let v = &*self.view;
        let next = v.minute.partition_point(|&m| m < from);
        let last = next.checked_sub(1);
        let (book, spread) = self.book_at(last);
        let mut rets = [0.0; RETURNS];
        for (r, h) in rets.iter_mut().zip(RETURN_HORIZONS) {
            // Bars next-h .. next-1; the first bar's return is 0.
            *r = self.sign * v.ret_bps[next.saturating_sub(h)..next].iter().sum::<f64>();
        }
        let time_left = 1.0 - self.step as f64 / self.steps.max(1) as f64;
        let now = MarketNow {
            time_left,
            inventory_left: self.remaining / self.order.qty,
            book: &book,
            returns_bps: &rets,
            last_volume: last.map_or(0.0, |i| v.volume[i]),
            spread_bps: spread,
            avg_minute_volume: v.avg_minute_volume,
        };
        write_obs(out, &now);
    }

    fn decision<'b>(&'b self, obs: &'b [f32]) -> Decision<'b> {
        let p = Progress {
            step: self.step,
            steps: self.steps,
            remaining: self.remaining,
            last_step_volume: self.last_step_volume,
            queue: self.queue_state(),
        };
        Decision::new(obs, &self.view, &self.order, &self.cfg, p)
    }

    /// Trades the child order over the current step and returns what
    /// happened: the crossed share worked evenly over the step's bars, the
    /// rest resting at its limit price under the [`FillModel`](crate::FillModel).
    fn step_order(&mut self, o: ChildOrder) -> StepInfo {
        let (from, to) = self.step_minutes(self.step);
        let bars = self.view.range(from, to);
        let want = (self.cfg.fraction(o.action) * self.order.qty).min(self.remaining);
        let limit = self.limit_price(o.placement, from);
        let urgent = match limit {
            None => want,
            Some(_) => (o.cross_first.max(0.0) * self.order.qty).min(want),
        };
        self.ledger.begin_step();
        let mut used = std::mem::take(&mut self.used);
        used.clear();
        used.resize(bars.len(), 0.0);
        let (mut got, mut notional) = cross_bars(
            &self.view,
            bars.clone(),
            urgent,
            self.cfg.participation_cap,
            self.sign,
            &mut used,
            &mut self.ledger,
        );
        match limit {
            Some((price, mid)) => {
                let (g, n) = self.rest(from, bars.clone(), (price, mid), want - urgent, &used);
                got += g;
                notional += n;
            }
            None => self.rested = None,
        }
        self.used = used;
        let v = &*self.view;
        let nbars = bars.len();
        let bars_end = bars.clone().last();
        let bench_sum: f64 = bars.clone().map(|i| v.price[i]).sum();
        let vol: f64 = bars.map(|i| v.volume[i]).sum();
        self.step += 1;
        let done = self.step >= self.steps;
        if done && self.cfg.terminal == Terminal::ForceLiquidate && self.remaining - got > 0.0 {
            if let Some(i) = self.horizon_bar() {
                let q = self.remaining - got;
                let p = v.price[i] + self.sign * v.half_spread[i];
                notional += q * p;
                got += q;
                self.ledger.fill(self.sign, q, p, v.price[i], None);
                self.ledger.final_qty += q;
                self.ledger.final_notional += q * p;
            }
        }
        self.remaining = (self.remaining - got).max(0.0);
        self.filled += got;
        self.notional += notional;
        self.last_step_volume = vol;
        let fills = StepFills {
            got,
            cost: notional,
            bench: if nbars > 0 {
                bench_sum / nbars as f64
            } else {
                self.bench
            },
            arrival: self.arrival,
            prev_bench: self.last_bench,
            volume: vol,
            minutes: (to - from).max(1) as f64,
        };
        self.last_bench = fills.bench;
        let mut info = step_info(
            v,
            &self.order,
            &fills,
            self.step,
            self.steps,
            self.remaining,
            done,
        );
        let mid_end = bars_end.map_or(self.arrival, |i| v.price[i]);
        (info.spread_captured_bps, info.adverse_bps) =
            self.ledger.step_figures(self.sign, self.order.qty, mid_end);
        info
    }

    fn outcome(&self, reward: f64, inventory_path: Vec<f32>) -> ExecutionOutcome {
        let horizon_price = match self.horizon_bar() {
            Some(i) => self.view.price[i] + self.sign * self.view.half_spread[i],
            None => self.bench,
        };
        ExecutionOutcome {
            order_id: self.order.id,
            side: self.order.side,
            qty: self.order.qty,
            filled: self.filled,
            notional: self.notional,
            bench_price: self.bench,
            arrival_price: self.arrival,
            horizon_price: unfilled_charge(horizon_price, self.sign, &self.cfg),
            reward,
            steps: self.steps,
            inventory_path,
            placement: self.placement_stats(),
        }
    }
}

/// Works `want` shares evenly over the bars `bars`, each bar taking at most
/// `cap` of its volume at its minute price plus `sign` times half the spread.
/// What a capped bar cannot take goes to the step's bars with room left, in
/// time order, so a step fills `min(want, its capacity)`. Returns the shares
/// filled and their notional.
pub fn work_step(
    v: &SessionView,
    bars: std::ops::Range<usize>,
    want: f64,
    cap: f64,
    sign: f64,
) -> (f64, f64) {
    let mut used = vec![0.0; bars.len()];
    cross_bars(
        v,
        bars,
        want,
        cap,
        sign,
        &mut used,
        &mut FillLedger::default(),
    )
}

/// [`work_step`], adding each bar's shares to `used` (indexed from the
/// first bar) and each fill to `ledger`.
fn cross_bars(
    v: &SessionView,
    bars: std::ops::Range<usize>,
    want: f64,
    cap: f64,
    sign: f64,
    used: &mut [f64],
    ledger: &mut FillLedger,
) -> (f64, f64) {
    let n = bars.len();
    if n == 0 || want <= 0.0 {
        return (0.0, 0.0);
    }
    let start = bars.start;
    let even = want / n as f64;
    let (mut got, mut notional) = (0.0, 0.0);
    let mut take = |i: usize, q: f64, used: &mut [f64]| {
        let p = v.price[i] + sign * v.half_spread[i];
        notional += q * p;
        got += q;
        used[i - start] += q;
        ledger.fill(sign, q, p, v.price[i], None);
    };
    for i in bars.clone() {
        take(i, even.min(cap * v.volume[i]), used);
    }
    let mut left = want - used.iter().sum::<f64>();
    if left > 1e-12 {
        for i in bars {
            let q = left.min(cap * v.volume[i] - used[i - start]);
            if q > 0.0 {
                take(i, q, used);
                left -= q;
                if left <= 1e-12 {
                    break;
                }
            }
        }
    }
    (got, notional)
}

/// Runs one episode of `strategy` in the static environment.
pub fn run_static(
    strategy: &mut dyn Strategy,
    view: &SessionView,
    order: &ParentOrder,
    cfg: &EnvConfig,
    reward: &dyn Reward,
    record_path: bool,
) -> ExecutionOutcome {
    strategy.reset(view, order, cfg);
    play(
        &mut StaticEnv::new(view, order, cfg),
        strategy,
        reward,
        record_path,
    )
}
