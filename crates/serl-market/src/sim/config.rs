//! The population and its parameters, and the overrides of an imagined day.

use serde::{Deserialize, Serialize};

use crate::path::PathModel;
use crate::queue_reactive::QueueReactive;

/// Overrides for imagined days: the real session's fundamental and volume
/// reshaped (the default changes nothing). Applied when a [`Simulator`]
/// is built from a [`MarketConfig`] that carries it.
///
/// [`Simulator`]: crate::Simulator
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

/// The population and its parameters: how many traders of each
/// [`AgentKind`], how they trade, and the path model and scenario of the
/// day. The real session's numbers live in [`Calibration`]; this is what
/// the market is made of. Every field is optional when deserialized (the
/// `[market]` table of `configs/market.toml`); [`OrderStats::apply`] sets
/// the order size and cancel share from LOBSTER order flow.
///
/// [`Calibration`]: crate::Calibration
/// [`OrderStats::apply`]: crate::OrderStats::apply
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MarketConfig {
    /// Noise traders (at least 1): they share one Poisson arrival stream
    /// whose rate follows the real day's volume.
    pub noise_agents: usize,
    /// Value traders: market orders toward a noisy view of the
    /// fundamental when it is more than a spread from the mid.
    pub value_agents: usize,
    /// Market makers (at least 1): the book's quotes and depth.
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
    /// The noise traders' limit orders as a multiple of everyone's size,
    /// and those orders and the noise cancels that many times fewer, so
    /// that the resting depth stays the same; only that many times fewer
    /// noise traders act, so that an order rests as long. A coarser flow,
    /// which a day simulates in fewer events; their market orders stay as
    /// they are (1: the calibrated flow; docs/market.md). Written only
    /// when set.
    #[serde(skip_serializing_if = "is_one")]
    pub noise_limit_mult: f64,
    /// Orders are whole multiples of this many shares (1: any size), the
    /// market makers' quotes too. US equities trade in
    /// round lots of 100, and most real orders are exactly that; a LOBSTER
    /// sample sets it when most of its orders are round
    /// ([`crate::OrderStats::apply`]).
    pub round_lot: u64,
    /// Market-maker quote levels per side, one grid step apart.
    pub mm_levels: usize,
    /// Mean time between a market maker's re-quotes, milliseconds (each
    /// wait is uniform in half to one and a half times this).
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
    /// A market maker quotes each level as up to this many orders, sizes
    /// drawn from `size_quantiles` (1, or no quantiles: one order a
    /// level). Real depth is many small orders, not one block.
    pub mm_orders_per_level: usize,
    /// Order sizes, shares, at evenly spaced quantiles of a real day's new
    /// limit orders ([`crate::OrderStats::apply`]): every trader draws its
    /// sizes from them. Empty: a log-normal around `order_size`. A real
    /// day's data, not a design: left out of the written config when
    /// empty, so the profiling module's schema does not offer it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub size_quantiles: Vec<u64>,
    /// Where a real day's new limit orders go, ticks behind their own
    /// side's best price (negative: inside the spread), at evenly spaced
    /// quantiles ([`crate::OrderFlow::apply`] sets them from a LOBSTER
    /// day's messages). The noise traders place their limit orders at
    /// these depths, and the market makers quote their levels at them
    /// (where they reach behind the touch). Empty: noise orders a
    /// geometric number of grid steps behind the touch around the mid,
    /// makers' levels on the grid. Written only when set, as
    /// `size_quantiles`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub depth_quantiles: Vec<i64>,
    /// Mean microseconds between a market maker's messages when it
    /// re-quotes (exponential gaps): its cancels and new orders go out one
    /// by one, as a real maker's do, rather than all in one instant. 0:
    /// all at once. Set from a real day's median gap between messages
    /// ([`crate::OrderFlow::apply`]); written only when set, as
    /// `size_quantiles`.
    #[serde(skip_serializing_if = "is_zero")]
    pub mm_message_gap_us: f64,
    /// The queue-reactive order flow that replaces every agent above
    /// (docs/market.md): in a TOML config, the path of a model written by
    /// `serl simulate calibrate`, read when the config is; written back as
    /// the model itself, so that a run's config needs no other file.
    /// Unset: the agents.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "read_queue_reactive"
    )]
    pub queue_reactive: Option<Box<QueueReactive>>,
    /// How the fundamental moves within a minute: 0 in a straight line
    /// from one minute's value to the next; 1 as a Brownian bridge between
    /// them with the day's mean minute variance, as a random walk known
    /// only at the minutes would (docs/market.md: a straight line makes
    /// every move persist to the minute's end, and a resting order filled
    /// by the move then pays for the rest of it). Written only when set.
    #[serde(skip_serializing_if = "is_zero")]
    pub fundamental_bridge: f64,
    /// The fundamental holds the last minute's close and moves to this
    /// minute's all at once, at a second of the minute drawn at random
    /// (a stream of its own), instead of in a straight line (a bridge, if
    /// set, still adds its moves): a move then has no rest of the minute
    /// to go on for after it fills a resting order (docs/market.md: it
    /// halves the adverse move after a fill, and widens the spread).
    /// Written only when set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fundamental_steps: bool,
    /// Value-trader wake-ups per minute each, in a minute of average
    /// volume (busy minutes wake them more).
    pub value_rate_per_min: f64,
    /// Per-agent message latency, microseconds.
    pub latency_us: u64,
    /// Trend followers: market orders in the direction of the mid's move
    /// over the last `momentum_lookback_min` minutes, when it exceeds
    /// `momentum_threshold_bps`.
    pub momentum_agents: usize,
    /// Momentum-trader wake-ups per minute each, in a minute of average
    /// volume.
    pub momentum_rate_per_min: f64,
    /// Closed minutes over which a momentum trader measures the mid's move.
    pub momentum_lookback_min: usize,
    /// The smallest move over the lookback, bps, that a momentum trader
    /// follows.
    pub momentum_threshold_bps: f64,
    /// Informed traders: they see the fundamental `informed_horizon_min`
    /// minutes ahead, blurred by `informed_noise_bps`, and take liquidity
    /// toward it.
    pub informed_agents: usize,
    /// Informed-trader wake-ups per minute each, in a minute of average
    /// volume.
    pub informed_rate_per_min: f64,
    /// How far ahead informed traders see the fundamental, minutes.
    pub informed_horizon_min: f64,
    /// Standard deviation of the relative error in what informed traders
    /// see, bps.
    pub informed_noise_bps: f64,
    /// Informed order size as a multiple of the typical order size.
    pub informed_size_mult: f64,
    /// How the fundamental fills in the real day between anchors.
    pub path: PathModel,
    /// Overrides for an imagined day (the default: the real day as it was).
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
            noise_limit_mult: 1.0,
            round_lot: 1,
            mm_levels: 5,
            mm_interval_ms: 1_000,
            mm_depth_share: 0.02,
            flow_impact: 0.7,
            flow_memory_min: 30.0,
            mm_fundamental_weight: 1.0,
            mm_snipe_mult: 2.0,
            mm_max_skew_ticks: 2.0,
            mm_deep_minutes: 2.0,
            mm_orders_per_level: 1,
            size_quantiles: Vec::new(),
            depth_quantiles: Vec::new(),
            mm_message_gap_us: 0.0,
            queue_reactive: None,
            fundamental_bridge: 0.0,
            fundamental_steps: false,
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

/// A coarser order flow over the same calibrated day, for training: the
/// noise traders rest their depth in limit orders `noise_limit_mult`
/// times as large (and as many times fewer, their cancels too), the
/// market makers re-quote `mm_interval_mult` times less often, and with
/// `merge_makers` one maker quotes all their depth; the market orders
/// that trade are as before. The simulator then plays a day in a
/// fraction of the events (docs/market.md has the measurements and the
/// realism checks it passes); the default changes nothing.
/// `[train.hybrid] coarse_flow` trains on it while validation and the
/// test play the calibrated flow.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Coarsening {
    /// Multiplies the noise traders' limit order size ([`MarketConfig::noise_limit_mult`]).
    pub noise_limit_mult: f64,
    /// Multiplies the makers' time between re-quotes ([`MarketConfig::mm_interval_ms`]).
    pub mm_interval_mult: f64,
    /// One market maker quotes what all of them did (their depth share
    /// added up; the deep liquidity and the sniping follow the size), so
    /// a re-quote is sent once instead of once per maker.
    pub merge_makers: bool,
}

impl Coarsening {
    /// The largest multiple of either setting a coarsening may ask for.
    pub const MAX_MULT: f64 = 64.0;

    /// `cfg` with its flow made coarser.
    pub fn apply(&self, cfg: &MarketConfig) -> MarketConfig {
        let mut out = cfg.clone();
        out.noise_limit_mult = cfg.noise_limit_mult * self.noise_limit_mult;
        out.mm_interval_ms = (cfg.mm_interval_ms as f64 * self.mm_interval_mult).round() as u64;
        if self.merge_makers && cfg.market_makers > 1 {
            out.mm_depth_share = cfg.mm_depth_share * cfg.market_makers as f64;
            out.market_makers = 1;
        }
        out
    }

    /// The first setting outside [1, [`Self::MAX_MULT`]], named, with why.
    pub fn check(&self) -> Result<(), String> {
        for (field, v) in [
            ("noise_limit_mult", self.noise_limit_mult),
            ("mm_interval_mult", self.mm_interval_mult),
        ] {
            if !(1.0..=Self::MAX_MULT).contains(&v) {
                return Err(format!("{field} = {v} is not in [1, {}]", Self::MAX_MULT));
            }
        }
        Ok(())
    }
}

impl Default for Coarsening {
    fn default() -> Self {
        Coarsening {
            noise_limit_mult: 1.0,
            mm_interval_mult: 1.0,
            merge_makers: false,
        }
    }
}

/// Populations no training saw, each a change of `base` in one respect:
/// four times the trend followers, waking twice as often (`momentum`); a
/// book with 40% of the market makers' depth and a third of the deep
/// liquidity (`thin`); four times the informed traders, trading half as
/// large again (`informed`). A strategy trained on one market is judged on
/// these too (`serl backtest --held-out`, the team reports).
pub fn held_out_profiles(base: &MarketConfig) -> Vec<(&'static str, MarketConfig)> {
    vec![
        (
            "momentum",
            MarketConfig {
                momentum_agents: base.momentum_agents.max(5) * 4,
                momentum_rate_per_min: base.momentum_rate_per_min * 2.0,
                ..base.clone()
            },
        ),
        (
            "thin",
            MarketConfig {
                mm_depth_share: base.mm_depth_share * 0.4,
                mm_deep_minutes: base.mm_deep_minutes / 3.0,
                ..base.clone()
            },
        ),
        (
            "informed",
            MarketConfig {
                informed_agents: base.informed_agents.max(5) * 4,
                informed_size_mult: base.informed_size_mult * 1.5,
                ..base.clone()
            },
        ),
    ]
}

/// The kinds of trader in a simulated market; their counts and parameters
/// are in [`MarketConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// Zero-intelligence flow: limit orders near the touch, market orders
    /// and cancellations, at the real day's intraday volume profile.
    Noise,
    /// Market orders toward a noisy view of the fundamental.
    Value,
    /// Inventory-aware quotes on several levels around the fundamental,
    /// picking off orders a move left behind.
    MarketMaker,
    /// Market orders following the mid's recent move.
    Momentum,
    /// Immediate-or-cancel orders toward the fundamental a little ahead.
    Informed,
    /// The whole queue-reactive order flow
    /// ([`MarketConfig::queue_reactive`]), in place of every other kind.
    QueueReactive,
}

/// `queue_reactive` as a config gives it: the path of a model file, or
/// the model itself (a run's written config).
fn read_queue_reactive<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Box<QueueReactive>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Given {
        File(std::path::PathBuf),
        Model(Box<QueueReactive>),
    }
    match Option::<Given>::deserialize(d)? {
        None => Ok(None),
        Some(Given::Model(m)) => {
            m.check().map_err(serde::de::Error::custom)?;
            Ok(Some(m))
        }
        Some(Given::File(path)) => QueueReactive::read(&path)
            .map(|m| Some(Box::new(m)))
            .map_err(serde::de::Error::custom),
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

fn is_one(x: &f64) -> bool {
    *x == 1.0
}
