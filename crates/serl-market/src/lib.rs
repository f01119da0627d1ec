//! # serl-market: a multi-agent market calibrated to a real session
//!
//! An event-driven simulator over the [`serl_lob`] matching engine: agents
//! wake on their own schedules (a time-ordered queue with per-agent
//! latency), send orders to one book, and an external execution agent (the
//! RL environment's hook) can trade at any time through the same interface.
//! Everything is deterministic in the seed.
//!
//! Agent types ([`AgentKind`]):
//! - noise traders: Poisson arrivals whose rate follows the real day's
//!   intraday volume profile (fitted by pilot days, [`fit_noise_volume`]);
//!   limit orders near the touch, market orders and cancellations;
//! - value traders: trade toward a noisy view of the fundamental;
//! - momentum traders: follow the mid's move over the last minutes;
//! - informed traders: see the fundamental a little ahead and take what is
//!   mispriced;
//! - market makers: inventory-aware quotes on several levels around the
//!   fundamental, picking off orders a move left behind.
//!
//! The fundamental ([`PathModel`]) meets the real day four times a day and is
//! a stochastic-volatility process with heavy-tailed shocks in between, so
//! the simulated day has the real open, close and volatility, and the
//! stylized facts of real returns. Order flow shifts what every trader
//! believes the price is (concave in the flow, fading with time), which is
//! how a metaorder's impact arises and decays ([`impact`]).
//!
//! [`Calibration`] carries what a real session says (opening price, minute
//! price path, minute volumes, spread); [`Scenario`] overrides it for
//! imagined days (volatility and liquidity multipliers, drift, jumps).
//! [`Simulator::recording`] also keeps the trade tape and minute-end book
//! snapshots, and [`facts`] measures the stylized facts.

mod calibration_checks;
pub mod facts;
pub mod impact;
mod lobster_stats;
mod path;
mod sim;

pub use calibration_checks::{
    compare_days, mean_depth, minute_returns_bps, DayComparison, PROFILE_MINUTES,
};
pub use lobster_stats::OrderStats;
pub use path::PathModel;
pub use sim::{
    fit_noise_volume, AgentKind, BookSnapshot, Calibration, FitEffort, MarketConfig, MinuteStats,
    Recording, Scenario, Simulator, TapeTrade, EXECUTION_OWNER,
};

/// Minutes in a regular US equity session (09:30 to 16:00): a simulated
/// day's length, and the range of a scenario's jump minutes.
pub const SESSION_MINUTES: u16 = 390;
