//! Order placement: where a child order goes, how a resting order fills in
//! the static replay, and what placement cost or earned.
//!
//! A decision is a [`ChildOrder`]: how much of the parent order to trade
//! over the coming step (the action, as before) and its [`Placement`]:
//! cross the spread, or rest in the book at the touch, some ticks behind
//! it, or at a price relative to the mid. A resting order works through the
//! step and is cancelled at the next decision, where the strategy posts
//! again; what is left at the horizon is crossed when the environment's
//! terminal is `force_liquidate`.
//!
//! The dynamic market rests the order in the simulated book, where it fills
//! with true price-time priority from the other agents' flow. The static
//! replay has only minute bars, so it uses the conservative rule of
//! [`FillModel`] (docs/placement.md says by how much it errs).

use serde::{Deserialize, Serialize};

use crate::EnvError;

/// One cent: the tick of the replayed US equities and of the simulator.
pub const TICK: f64 = 0.01;

/// Where a child order goes. Configs and saved policies write it as its
/// name ([`Placement::parse`]): `cross`, `touch`, `touch+2`, `mid`,
/// `mid+1.5`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(try_from = "String", into = "String")]
pub enum Placement {
    /// A market order: crosses the spread and pays half of it.
    #[default]
    Cross,
    /// A limit order `ticks` behind the touch on the order's own side (0:
    /// joins the best bid for a buy, the best ask for a sell).
    Passive {
        /// Ticks away from the touch, away from the mid.
        ticks: u16,
    },
    /// A limit order `offset_bps` from the mid on the order's own side
    /// (0: at the mid), rounded to the tick away from the mid. A price at or
    /// through the far touch trades at once, as a marketable limit.
    Mid {
        /// Distance from the mid, bps, on the passive side.
        offset_bps: f64,
    },
}

impl Placement {
    /// Whether the order rests in the book.
    pub fn is_passive(&self) -> bool {
        !matches!(self, Placement::Cross)
    }

    /// Parses `cross`, `touch`, `touch+K` (K ticks behind the touch),
    /// `mid` and `mid+B` (B bps from the mid on the passive side).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, arg) = match s.split_once('+') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let bad = || {
            format!(
                "placement `{s}`: expected cross, touch, touch+TICKS, mid or mid+BPS (a non-negative number)"
            )
        };
        match (name, arg) {
            ("cross", None) => Ok(Placement::Cross),
            ("touch", None) => Ok(Placement::Passive { ticks: 0 }),
            ("touch", Some(a)) => a
                .parse()
                .map(|ticks| Placement::Passive { ticks })
                .map_err(|_| bad()),
            ("mid", None) => Ok(Placement::Mid { offset_bps: 0.0 }),
            ("mid", Some(a)) => a
                .parse::<f64>()
                .ok()
                .filter(|b| b.is_finite() && *b >= 0.0)
                .map(|offset_bps| Placement::Mid { offset_bps })
                .ok_or_else(bad),
            _ => Err(bad()),
        }
    }

    /// The name it parses from.
    pub fn label(&self) -> String {
        match *self {
            Placement::Cross => "cross".into(),
            Placement::Passive { ticks: 0 } => "touch".into(),
            Placement::Passive { ticks } => format!("touch+{ticks}"),
            Placement::Mid { offset_bps: 0.0 } => "mid".into(),
            Placement::Mid { offset_bps } => format!("mid+{offset_bps}"),
        }
    }

    /// The limit price, dollars, for a side of sign `sign` (+1 buy) with the
    /// mid at `mid` and half the spread `half`: rounded to the tick away from
    /// the mid. `None` for [`Placement::Cross`].
    pub fn limit_price(&self, sign: f64, mid: f64, half: f64) -> Option<f64> {
        let raw = match *self {
            Placement::Cross => return None,
            Placement::Passive { ticks } => mid - sign * (half + ticks as f64 * TICK),
            Placement::Mid { offset_bps } => mid * (1.0 - sign * offset_bps / 1e4),
        };
        // A hair of slack so that a price already on the grid stays there.
        let ticks = raw / TICK;
        let on_grid = if sign > 0.0 {
            (ticks + 1e-6).floor()
        } else {
            (ticks - 1e-6).ceil()
        };
        Some(on_grid * TICK)
    }
}

impl TryFrom<String> for Placement {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Placement::parse(&s)
    }
}

impl From<Placement> for String {
    fn from(p: Placement) -> String {
        p.label()
    }
}

/// One decision: the share of the order to trade over the coming step and
/// where it goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChildOrder {
    /// The action, as [`crate::EnvConfig::fraction`] reads it: the share of
    /// the whole order to trade over the step (capped at what is left).
    pub action: f64,
    /// Where it goes.
    pub placement: Placement,
    /// Of that share, how much (a share of the whole order) crosses the
    /// spread at once before the rest is placed: how a passive strategy
    /// catches up when it falls behind its schedule. Ignored for
    /// [`Placement::Cross`], which crosses everything.
    pub cross_first: f64,
}

impl ChildOrder {
    /// A child order that crosses the spread: what every strategy sent
    /// before placement existed.
    pub fn cross(action: f64) -> Self {
        ChildOrder {
            action,
            placement: Placement::Cross,
            cross_first: 0.0,
        }
    }
}

/// The agent's own resting order at a decision, before it is kept,
/// re-posted or cancelled: what a policy that places orders observes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QueueState {
    /// Shares ahead of it in the queue at its price (an estimate in the
    /// static replay), over the session's average minute volume.
    pub ahead: f64,
    /// Minutes it has rested (0 without one).
    pub minutes: f64,
}

impl QueueState {
    /// Observation columns it adds to a placing policy's input.
    pub const COLUMNS: usize = 2;

    /// Its columns' names, as designed features read them (after the
    /// market's, [`crate::obs::design_names`]).
    pub const NAMES: [&'static str; Self::COLUMNS] = ["queue_ahead", "minutes_resting"];

    /// What each of [`QueueState::NAMES`] means, as a designer is told.
    pub const DOCS: [&'static str; Self::COLUMNS] = [
        "shares ahead of your resting order at its price, over the average minute volume (0 when nothing rests)",
        "minutes your resting order has waited, over 10 (0 when nothing rests)",
    ];

    /// Its observation columns: queue ahead (as is) and minutes resting
    /// ÷ 10.
    pub fn write(&self, out: &mut [f32]) {
        out[0] = self.ahead as f32;
        out[1] = (self.minutes / 10.0) as f32;
    }
}

/// How a resting order fills in the static replay of minute bars, where
/// nobody knows the queue. Conservative by construction:
///
/// - a resting buy at p fills in a later bar that trades *through* p (its
///   low below p by at least half a tick), up to the participation cap of
///   that bar's volume; a sell symmetrically with the bar's high;
/// - a bar that only *touches* p fills `1 − queue_haircut` of the volume
///   the bar is assumed to trade at p (its volume spread evenly over the
///   ticks between its low and high), the rest going to the queue ahead;
/// - never at a better price than posted;
/// - the bar in which the order was placed (the step's first) gives no
///   fill unless `placement_bar` is set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FillModel {
    /// Share of the volume traded at the posted price that the queue ahead
    /// takes, in [0, 1] (1: a bar that only touches never fills).
    pub queue_haircut: f64,
    /// Whether the bar the order was placed in may fill it.
    pub placement_bar: bool,
}

impl Default for FillModel {
    fn default() -> Self {
        FillModel {
            queue_haircut: 0.5,
            placement_bar: false,
        }
    }
}

impl FillModel {
    /// Checks the settings; the error names the field.
    pub fn validate(&self) -> Result<(), EnvError> {
        if !(0.0..=1.0).contains(&self.queue_haircut) {
            return Err(EnvError::Config {
                field: "env.fills.queue_haircut".into(),
                message: format!("{} is not in [0, 1]", self.queue_haircut),
            });
        }
        Ok(())
    }

    /// Shares a resting order at `price` (side of sign `sign`) fills in a
    /// bar with this `low`, `high` and `volume`, with `room` shares of the
    /// bar's participation cap left; at most `want`.
    pub fn bar_fill(
        &self,
        sign: f64,
        price: f64,
        (low, high, volume): (f64, f64, f64),
        room: f64,
        want: f64,
    ) -> f64 {
        let half_tick = TICK / 2.0;
        // How far the bar went past the posted price, for the order's side:
        // below a buy, above a sell.
        let through = if sign > 0.0 {
            price - low
        } else {
            high - price
        };
        let cap = room.min(want).max(0.0);
        if through >= half_tick {
            cap
        } else if through > -half_tick {
            let levels = ((high - low) / TICK).round().max(0.0) + 1.0;
            ((1.0 - self.queue_haircut) * volume / levels).min(cap)
        } else {
            0.0
        }
    }
}

/// What placement did over an episode: sums over fills, which
/// [`PlacementStats`] turns into per-order figures.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct FillLedger {
    /// Shares filled by resting orders.
    pub passive_qty: f64,
    /// Σ shares × (mid − price) × side ÷ mid, bps, over every fill, with
    /// the mid when the order was sent: the spread earned (positive) or
    /// paid (negative).
    pub captured: f64,
    /// Σ shares × adverse mid move 1 minute after a passive fill, bps.
    pub adverse_1m: f64,
    /// The same 5 minutes after.
    pub adverse_5m: f64,
    /// Shares crossed at the horizon by the forced liquidation.
    pub final_qty: f64,
    /// Their notional, dollars.
    pub final_notional: f64,
    /// Passive fills waiting for the mids after them: (minute, shares, mid
    /// at the fill).
    #[serde(skip)]
    pub(crate) pending: Vec<(u16, f64, f64)>,
    /// `captured` and the length of `pending` when the step began.
    #[serde(skip)]
    step_start: (f64, usize),
}

impl FillLedger {
    /// Records a fill of `qty` at `price` for a side of sign `sign`, with
    /// `mid` the mid when the order was sent (the spread captured is
    /// measured from it). A passive fill also gives the minute it filled
    /// and the mid then, to wait for its adverse move.
    pub(crate) fn fill(
        &mut self,
        sign: f64,
        qty: f64,
        price: f64,
        mid: f64,
        passive: Option<(u16, f64)>,
    ) {
        if qty <= 0.0 || mid <= 0.0 {
            return;
        }
        self.captured += qty * sign * (mid - price) / mid * 1e4;
        if let Some((minute, mid_then)) = passive {
            self.passive_qty += qty;
            self.pending.push((minute, qty, mid_then));
        }
    }

    /// Marks the start of a decision step, for [`FillLedger::step_figures`].
    pub(crate) fn begin_step(&mut self) {
        self.step_start = (self.captured, self.pending.len());
    }

    /// This step's spread captured and adverse move, bps of an order of
    /// `qty` shares (weighted by the share each fill is of it): the move is
    /// the mid's from each passive fill to `mid_end`, the mid at the step's
    /// end, against the order.
    pub(crate) fn step_figures(&self, sign: f64, qty: f64, mid_end: f64) -> (f64, f64) {
        let (captured, first) = self.step_start;
        let adverse: f64 = self.pending[first.min(self.pending.len())..]
            .iter()
            .map(|&(_, q, mid)| q * adverse_bps(sign, mid, mid_end))
            .sum();
        let q = qty.max(1e-12);
        ((self.captured - captured) / q, adverse / q)
    }

    /// Settles the adverse moves of the passive fills, with `mid_at(m)` the
    /// mid at minute `m` (the last one known where `m` is past the data).
    pub(crate) fn settle(&mut self, sign: f64, mid_at: impl Fn(u16) -> f64) {
        for (minute, qty, mid) in std::mem::take(&mut self.pending) {
            let moved = |h: u16| adverse_bps(sign, mid, mid_at(minute + h));
            self.adverse_1m += qty * moved(1);
            self.adverse_5m += qty * moved(5);
        }
    }
}

/// The mid's move from `mid` (at a passive fill) to `later`, bps of `mid`,
/// against a side of sign `sign` (+1 a buy): positive when the fill was
/// adversely selected (a buy's mid fell, a sell's rose).
pub(crate) fn adverse_bps(sign: f64, mid: f64, later: f64) -> f64 {
    sign * (mid - later) / mid * 1e4
}

/// What placement did for one order, per share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PlacementStats {
    /// Share of the filled volume filled by resting orders.
    pub passive_share: f64,
    /// Spread captured per filled share, bps of the mid when the order
    /// was sent: minus half the spread for a strategy that always crosses,
    /// plus half of it for one whose orders at the touch all fill.
    pub spread_captured_bps: f64,
    /// Mean mid move against the order 1 minute after a passive fill, bps
    /// (`None` without passive fills): the adverse selection.
    pub adverse_1m_bps: Option<f64>,
    /// The same 5 minutes after.
    pub adverse_5m_bps: Option<f64>,
    /// Share of the order crossed at the horizon.
    pub final_cross_share: f64,
    /// The final cross's cost against the benchmark, bps of the order
    /// (0 without one).
    pub final_cross_bps: f64,
}

impl PlacementStats {
    /// The figures of a ledger for an order of `qty` shares with `filled`
    /// filled, benchmark `bench`, side of sign `sign`.
    pub(crate) fn of(l: &FillLedger, qty: f64, filled: f64, bench: f64, sign: f64) -> Self {
        let per = |x: f64, n: f64| if n > 0.0 { x / n } else { 0.0 };
        let passive = (l.passive_qty > 0.0).then_some(l.passive_qty);
        PlacementStats {
            passive_share: per(l.passive_qty, filled),
            spread_captured_bps: per(l.captured, filled),
            adverse_1m_bps: passive.map(|n| l.adverse_1m / n),
            adverse_5m_bps: passive.map(|n| l.adverse_5m / n),
            final_cross_share: per(l.final_qty, qty),
            final_cross_bps: if l.final_qty > 0.0 && bench > 0.0 {
                sign * (l.final_notional / l.final_qty / bench - 1.0) * 1e4 * l.final_qty / qty
            } else {
                0.0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_parse_and_print_back() {
        for s in ["cross", "touch", "touch+2", "mid", "mid+1.5"] {
            assert_eq!(Placement::parse(s).unwrap().label(), s);
        }
        for s in ["touch+x", "mid+-1", "limit", "cross+1"] {
            let e = Placement::parse(s).unwrap_err();
            assert!(e.contains(s), "{e}");
        }
    }

    #[test]
    fn limit_prices_sit_on_the_tick_on_the_passive_side() {
        let touch = Placement::Passive { ticks: 0 };
        // Mid 10.005, half spread 0.005: the touch is 10.00 / 10.01.
        assert!((touch.limit_price(1.0, 10.005, 0.005).unwrap() - 10.00).abs() < 1e-9);
        assert!((touch.limit_price(-1.0, 10.005, 0.005).unwrap() - 10.01).abs() < 1e-9);
        let behind = Placement::Passive { ticks: 2 };
        assert!((behind.limit_price(1.0, 10.005, 0.005).unwrap() - 9.98).abs() < 1e-9);
        // The mid of a one-tick spread rounds to the passive side.
        let mid = Placement::Mid { offset_bps: 0.0 };
        assert!((mid.limit_price(1.0, 10.005, 0.005).unwrap() - 10.00).abs() < 1e-9);
        assert!((mid.limit_price(-1.0, 10.005, 0.005).unwrap() - 10.01).abs() < 1e-9);
        assert_eq!(Placement::Cross.limit_price(1.0, 10.0, 0.01), None);
    }

    #[test]
    fn the_static_fill_rule_needs_a_trade_through_or_a_share_of_the_touch() {
        let m = FillModel::default();
        // A buy at 10.00: a bar down to 9.98 trades through it.
        assert_eq!(
            m.bar_fill(1.0, 10.00, (9.98, 10.03, 1000.0), 100.0, 50.0),
            50.0
        );
        // A bar whose low is 10.00 only touches: half of the volume at
        // 10.00 (1,000 shares over 6 ticks), capped by the room.
        let touch = m.bar_fill(1.0, 10.00, (10.00, 10.05, 1200.0), 500.0, 500.0);
        assert!((touch - 100.0).abs() < 1e-9, "{touch}");
        // Above the price: nothing; and a sell mirrors a buy.
        assert_eq!(m.bar_fill(1.0, 10.00, (10.01, 10.05, 1e6), 1e6, 1e6), 0.0);
        assert_eq!(
            m.bar_fill(-1.0, 10.00, (9.95, 10.02, 1000.0), 100.0, 50.0),
            50.0
        );
        let never = FillModel {
            queue_haircut: 1.0,
            ..m
        };
        assert_eq!(
            never.bar_fill(1.0, 10.00, (10.00, 10.05, 1200.0), 500.0, 500.0),
            0.0
        );
    }

    #[test]
    fn the_ledger_scores_captured_spread_and_adverse_moves() {
        let mut l = FillLedger::default();
        // A buy crossing at 10.01 with the mid at 10.00 pays 10 bps; a
        // passive one at 9.99 earns 10.
        l.fill(1.0, 100.0, 10.01, 10.00, None);
        l.fill(1.0, 100.0, 9.99, 10.00, Some((600, 10.0)));
        // The mid falls 20 bps a minute after the passive fill.
        l.settle(1.0, |m| if m <= 600 { 10.0 } else { 9.98 });
        let s = PlacementStats::of(&l, 400.0, 200.0, 10.0, 1.0);
        assert!((s.passive_share - 0.5).abs() < 1e-12);
        assert!(s.spread_captured_bps.abs() < 1e-9);
        assert!((s.adverse_1m_bps.unwrap() - 20.0).abs() < 1e-9);
        assert_eq!(s.final_cross_share, 0.0);
    }
}
