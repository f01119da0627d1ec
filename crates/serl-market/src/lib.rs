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
//!   intraday volume profile; limit orders near the touch, market orders and
//!   cancellations;
//! - value traders: trade toward a mean-reverting fundamental, which is the
//!   real session's minute price path (scaled by the scenario);
//! - market makers: inventory-aware quotes on several levels around the mid,
//!   re-quoted every few seconds.
//!
//! [`Calibration`] carries what a real session says (opening price, minute
//! price path, minute volumes, spread); [`Scenario`] overrides it for
//! imagined days (volatility and liquidity multipliers, drift, jumps).

pub mod facts;
mod sim;

pub use sim::{
    AgentKind, Calibration, MarketConfig, MinuteStats, Scenario, Simulator, EXECUTION_OWNER,
};
