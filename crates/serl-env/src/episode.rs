//! What every execution environment shares, below them all: the
//! [`Episode`] interface and the loop that plays a strategy through one
//! ([`play`]), what a strategy sees ([`Decision`]) and is ([`Strategy`]),
//! how an episode ended ([`ExecutionOutcome`]), and the step accounting
//! both the static replay and the dynamic market use. The environments
//! import these; nothing here knows any environment.

use serde::Serialize;

use crate::config::EnvConfig;
use crate::order::{OrderSide, ParentOrder};
use crate::placement::{ChildOrder, PlacementStats, QueueState};
use crate::reward::{Reward, StepInfo};
use crate::view::SessionView;
use crate::OBS_DIM;

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
    /// The planted forecast of the coming return, signed against the
    /// order ([`SessionView::signal_before`]; 0 without one). Designed
    /// features may read it (the design column `signal`); the default
    /// observation does not carry it.
    pub signal: f32,
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
            signal: view.signal_before(from_minute, order.side) as f32,
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
    /// the window's TWAP or VWAP of minute prices ([`Benchmark`](crate::Benchmark)); in the
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

/// The price a share left at the horizon is charged at: `cross` (the
/// horizon's price with the half spread, for the order's side `sign`) made
/// dearer by the task's opportunity cost.
pub(crate) fn unfilled_charge(cross: f64, sign: f64, cfg: &EnvConfig) -> f64 {
    cross * (1.0 + sign * cfg.unfilled_cost_bps * 1e-4)
}

/// One parent order being worked, stepped by the caller.
pub trait Episode: Send {
    /// Decision steps in the episode.
    fn steps(&self) -> usize;
    /// Whether every step has been taken.
    fn done(&self) -> bool;
    /// The share of the order still to trade, and the steps left for it.
    fn left(&self) -> (f64, usize);
    /// Writes the observation for the coming step into `out`.
    fn observe(&self, out: &mut [f32]);
    /// What a strategy may know at the coming step.
    fn decision<'b>(&'b self, obs: &'b [f32]) -> Decision<'b>;
    /// Trades `action` (a fraction of the order, see
    /// [`EnvConfig::fraction`]) over the coming step, crossing the spread.
    fn step(&mut self, action: f64) -> StepInfo {
        self.step_order(ChildOrder::cross(action))
    }
    /// Trades a child order over the coming step: crossed, or resting in
    /// the book until the next decision cancels what is left of it.
    fn step_order(&mut self, order: ChildOrder) -> StepInfo;
    /// How the episode ended (so far): fills, benchmark and the price
    /// advantage ([`ExecutionOutcome::pa_bps`]).
    fn outcome(&self, reward: f64, inventory_path: Vec<f32>) -> ExecutionOutcome;
    /// The agent's resting order from the last step, as it stands before
    /// the coming decision (zeros without one).
    fn queue(&self) -> QueueState {
        QueueState::default()
    }
    /// Execution agents in the episode: the one stepped here (agent 0)
    /// and the peers trading beside it.
    fn agents(&self) -> usize {
        1
    }
    /// The observation agent `k` sees (agent 0: [`Episode::observe`]).
    fn observe_agent(&self, k: usize, out: &mut [f32]) {
        debug_assert_eq!(k, 0, "a single-agent episode");
        self.observe(out)
    }
}

/// Plays one whole episode of `strategy` (already reset for its order),
/// scoring each step with `reward`; with `record_path`, the outcome keeps
/// the inventory left after each step.
pub fn play(
    episode: &mut dyn Episode,
    strategy: &mut dyn Strategy,
    reward: &dyn Reward,
    record_path: bool,
) -> ExecutionOutcome {
    let mut obs = [0f32; OBS_DIM];
    let mut total = 0.0;
    let mut path = Vec::with_capacity(if record_path { episode.steps() } else { 0 });
    while !episode.done() {
        episode.observe(&mut obs);
        let order = strategy.order(&episode.decision(&obs));
        let info = episode.step_order(order);
        total += reward.reward(&info);
        if record_path {
            path.push(info.inventory_left as f32);
        }
    }
    episode.outcome(total, path)
}
