//! The static environment: a replay of historical minute bars with no
//! market impact.
//!
//! A child order of q shares is worked evenly over the bars of its
//! decision step. Each bar fills at its minute price plus (buy) or minus
//! (sell) half the spread, up to `participation_cap` of the bar's volume;
//! what a capped bar cannot take goes to the step's bars with room left, and
//! what the step cannot take stays in inventory.

use serde::Serialize;

use crate::config::{Benchmark, EnvConfig, Terminal};
mod resting;

use crate::lobster_queue::LobsterDay;
use crate::obs::{write_obs, BookPicture, LEVELS, OBS_DIM, RETURNS, RETURN_HORIZONS};
use crate::order::{OrderSide, ParentOrder};
use crate::placement::{ChildOrder, FillLedger, PlacementStats, QueueState};
use crate::reward::{Reward, StepInfo};
use crate::venue::{play, Episode};
use crate::view::{SessionView, ViewRef};

/// What a strategy may know at a decision. `view` holds the whole day:
/// a strategy must only read bars before `from_minute`, except the oracle,
/// which is labelled as the upper bound it is.
pub struct Decision<'a> {
    /// The observation for the coming step, in the layout of
    /// [`crate::obs`].
    pub obs: &'a [f32],
    /// Index of the coming step, from 0.
    pub step: usize,
    /// Decision steps in the episode.
    pub steps: usize,
    /// The order's size, shares.
    pub qty: f64,
    /// Shares still to trade.
    pub remaining: f64,
    /// First minute of the coming step, minutes after midnight.
    pub from_minute: u16,
    /// End of the coming step (exclusive), minutes after midnight.
    pub to_minute: u16,
    /// Market volume traded in the previous step (0 at the first).
    pub last_step_volume: f64,
    /// The agent's resting order from the last step, if any.
    pub queue: QueueState,
    /// The whole session (read only bars before `from_minute`).
    pub view: &'a SessionView,
    /// The parent order being worked.
    pub order: &'a ParentOrder,
}

/// Where an episode stands before a decision.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    pub step: usize,
    pub steps: usize,
    pub remaining: f64,
    pub last_step_volume: f64,
    pub queue: QueueState,
}

impl<'a> Decision<'a> {
    /// What an even pace over the steps left trades now, as a share of
    /// the order.
    pub fn even_share(&self) -> f64 {
        even_share(self.remaining / self.qty, self.steps, self.step)
    }

    /// The decision at `p` for an order, in any environment.
    pub(crate) fn new(
        obs: &'a [f32],
        view: &'a SessionView,
        order: &'a ParentOrder,
        cfg: &EnvConfig,
        p: Progress,
    ) -> Self {
        let (from_minute, to_minute) = step_minutes(order, cfg, p.step);
        Decision {
            obs,
            step: p.step,
            steps: p.steps,
            qty: order.qty,
            remaining: p.remaining,
            from_minute,
            to_minute,
            last_step_volume: p.last_step_volume,
            queue: p.queue,
            view,
            order,
        }
    }
}

/// An execution strategy: a baseline or a trained policy.
pub trait Strategy: Send {
    /// The strategy's name in reports (`twap`, `pov(0.05)`).
    fn name(&self) -> String;
    /// Called before each episode.
    fn reset(&mut self, _view: &SessionView, _order: &ParentOrder, _env: &EnvConfig) {}
    /// The action for this step (see [`EnvConfig::fraction`]).
    fn act(&mut self, d: &Decision) -> f64;
    /// The child order for this step: by default [`Strategy::act`]'s
    /// share, crossing the spread. Strategies that place orders override
    /// it.
    fn order(&mut self, d: &Decision) -> ChildOrder {
        ChildOrder::cross(self.act(d))
    }
}

/// Time-weighted execution: the same share of what is left in every
/// remaining step. The reference schedule every other strategy is compared
/// with.
#[derive(Debug, Clone, Copy, Default)]
pub struct Twap;

impl Strategy for Twap {
    fn name(&self) -> String {
        "twap".into()
    }
    fn act(&mut self, d: &Decision) -> f64 {
        d.even_share()
    }
}

/// The share of an order that trading what is left (`remaining_share` of
/// it) evenly over the steps from `step` to `steps` trades now: what TWAP
/// trades.
pub fn even_share(remaining_share: f64, steps: usize, step: usize) -> f64 {
    remaining_share / steps.saturating_sub(step).max(1) as f64
}

/// Minutes `[from, to)` of decision step `j` of an order.
pub(crate) fn step_minutes(order: &ParentOrder, cfg: &EnvConfig, j: usize) -> (u16, u16) {
    let k = cfg.decision_minutes.max(1);
    let from = order.start_minute + j as u16 * k;
    (from, (from + k).min(order.end_minute))
}

/// What one decision step filled, for [`step_info`].
pub(crate) struct StepFills {
    pub got: f64,
    pub cost: f64,
    /// The step's benchmark price.
    pub bench: f64,
    /// The price when the order arrived.
    pub arrival: f64,
    /// The previous step's benchmark (the arrival price at the first).
    pub prev_bench: f64,
    /// Market volume during the step.
    pub volume: f64,
    pub minutes: f64,
}

/// The [`StepInfo`] of a step, once the episode's counters (`step` done,
/// `remaining` after it) are updated; the same in every environment.
pub(crate) fn step_info(
    v: &SessionView,
    order: &ParentOrder,
    f: &StepFills,
    step: usize,
    steps: usize,
    remaining: f64,
    done: bool,
) -> StepInfo {
    let fill_price = if f.got > 0.0 { f.cost / f.got } else { 0.0 };
    let fill_frac = f.got / order.qty;
    let sign = order.side.sign();
    // Before this step (`step` counts it already): how far behind an even
    // schedule the order was, and how the benchmark moved into this step.
    let behind = (remaining + f.got) / order.qty - (1.0 - (step - 1) as f64 / steps.max(1) as f64);
    let (timing_bps, move_bps) = if f.arrival > 0.0 {
        (
            sign * (1.0 - f.bench / f.arrival) * 1e4,
            sign * (f.prev_bench - f.bench) / f.arrival * 1e4,
        )
    } else {
        (0.0, 0.0)
    };
    StepInfo {
        fill_frac,
        fill_price,
        step_bench: f.bench,
        timing_bps,
        twap_gain_bps: behind * move_bps,
        step_pa: if f.got > 0.0 {
            -sign * (fill_price / f.bench - 1.0) * 1e4 * fill_frac
        } else {
            0.0
        },
        spread_bps: v.spread_bps,
        spread_captured_bps: 0.0,
        adverse_bps: 0.0,
        time_left: 1.0 - step as f64 / steps.max(1) as f64,
        inventory_left: remaining / order.qty,
        volatility_bps: v.minute_vol_bps,
        volume: f.volume / (v.avg_minute_volume.max(1.0) * f.minutes),
        plan_gap: 0.0,
        subgoal_hit: 0.0,
        steps,
        done,
    }
}

/// How an episode ended.
#[derive(Debug, Clone, Serialize)]
pub struct ExecutionOutcome {
    /// The order's [`ParentOrder::id`].
    pub order_id: u64,
    /// The order's side: what the prices are judged for.
    pub side: OrderSide,
    /// The parent order's size, shares: what the whole-order figures are
    /// per share of.
    pub qty: f64,
    /// Shares filled.
    pub filled: f64,
    /// Sum of fill price × shares.
    pub notional: f64,
    /// The benchmark price PA is measured against: in the static replay
    /// the window's TWAP or VWAP of minute prices ([`Benchmark`]); in the
    /// dynamic market the mean simulated mid over the minutes played.
    pub bench_price: f64,
    /// The price when the order arrived, for implementation shortfall:
    /// the window's first minute price in the static replay, the simulated
    /// mid at the window's start in the dynamic market.
    pub arrival_price: f64,
    /// The price a share left at the horizon is charged at: the horizon's
    /// last price crossed with the half spread (what the forced
    /// liquidation pays), plus the task's `unfilled_cost_bps`.
    pub horizon_price: f64,
    /// The episode's reward, summed over its steps.
    pub reward: f64,
    /// Decision steps in the episode.
    pub steps: usize,
    /// Inventory left (fraction of the order) after each step.
    pub inventory_path: Vec<f32>,
    /// What placement earned and cost.
    pub placement: PlacementStats,
}

impl ExecutionOutcome {
    /// Average fill price (notional ÷ shares filled); `None` when nothing
    /// filled.
    pub fn avg_price(&self) -> Option<f64> {
        (self.filled > 0.0).then(|| self.notional / self.filled)
    }

    /// Shares of the order left at the horizon.
    pub fn unfilled(&self) -> f64 {
        (self.qty - self.filled).max(0.0)
    }

    /// The average price of the whole parent order: the fills, and every
    /// share left at the horizon at [`Self::horizon_price`] (Perold's
    /// opportunity cost); `None` for an empty order.
    pub fn whole_order_price(&self) -> Option<f64> {
        let left = self.unfilled();
        let shares = self.filled + left;
        (shares > 0.0).then(|| (self.notional + left * self.horizon_price) / shares)
    }

    /// Price advantage of the whole parent order over the benchmark, bps:
    /// positive when the order's average price, unfilled shares charged at
    /// the horizon, beat it for the order's side. The headline PA.
    pub fn pa_bps(&self) -> f64 {
        self.whole_order_price()
            .map_or(0.0, |p| self.advantage_bps(p, self.bench_price))
    }

    /// Price advantage of the filled shares alone, bps (0 when nothing
    /// filled): the paper's PA, which a strategy can win by not trading.
    pub fn filled_pa_bps(&self) -> f64 {
        self.avg_price()
            .map_or(0.0, |p| self.advantage_bps(p, self.bench_price))
    }

    /// Implementation shortfall of the whole order against the arrival
    /// price, bps (Perold: execution cost plus the opportunity cost of the
    /// shares left): positive when the order's price was worse for its
    /// side.
    pub fn is_bps(&self) -> f64 {
        self.whole_order_price()
            .map_or(0.0, |p| -self.advantage_bps(p, self.arrival_price))
    }

    fn advantage_bps(&self, price: f64, reference: f64) -> f64 {
        -self.side.sign() * (price / reference - 1.0) * 1e4
    }
}

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
        write_obs(
            out,
            time_left,
            self.remaining / self.order.qty,
            &book,
            &rets,
            last.map_or(0.0, |i| v.volume[i]),
            spread,
            v.avg_minute_volume,
        );
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
    /// rest resting at its limit price under the [`FillModel`].
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

/// The price a share left at the horizon is charged at: `cross` (the
/// horizon's price with the half spread, for the order's side `sign`) made
/// dearer by the task's opportunity cost.
pub(crate) fn unfilled_charge(cross: f64, sign: f64, cfg: &EnvConfig) -> f64 {
    cross * (1.0 + sign * cfg.unfilled_cost_bps * 1e-4)
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
