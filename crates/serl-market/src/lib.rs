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
//! how a metaorder's impact arises and decays ([`impact_study`]).
//!
//! [`Calibration`] carries what a real session says (opening price, minute
//! price path, minute volumes, spread); [`Scenario`] overrides it for
//! imagined days (volatility and liquidity multipliers, drift, jumps).
//! [`Simulator::recording`] also keeps the trade tape and minute-end book
//! snapshots, and [`stylized_facts`] measures the stylized facts.
//!
//! ## How the pieces connect
//!
//! 1. **Facts of the real session.** A [`Calibration`] holds the day's
//!    minute prices (dollars), minute volumes (shares), tick (dollars) and
//!    typical spread (bps); `serl simulate` takes them from a session's
//!    minute bars. [`OrderStats::from_messages`] measures a LOBSTER message
//!    file's order flow, and [`OrderStats::apply`] carries its order size
//!    and cancel rate into a [`MarketConfig`], the population and its
//!    parameters.
//! 2. **Calibration.** [`fit_noise_volume`] runs pilot days and returns
//!    per-minute multipliers of the noise traders' arrival rate
//!    ([`Calibration::noise_scale`]) so that each half hour trades the real
//!    volume.
//! 3. **Simulation.** [`Simulator::new`] builds the day's fundamental
//!    ([`PathModel`], [`Scenario`]) and the agents; [`Simulator::run_until`]
//!    advances it (microseconds since the open) and
//!    [`Simulator::execute_market`] trades for an outside agent (owner ids
//!    from [`EXECUTION_OWNER`]); [`Simulator::finish`] returns the day's
//!    [`MinuteStats`], and a recording simulator's
//!    [`Simulator::finish_recorded`] its [`Recording`] too.
//! 4. **Calibration checks.** [`compare_days`] scores simulated days against
//!    the real one (open, volume, its half-hourly profile, volatility,
//!    spread) and [`stylized_facts`] the returns
//!    ([`minute_returns_bps`]) and depth ([`mean_depth`]) against what real
//!    markets show, each result a pass/fail [`Check`].
//! 5. **Impact.** [`impact_study`] executes TWAP metaorders of an
//!    [`ImpactSpec`]'s sizes against the same seeds' quiet days and returns
//!    an [`ImpactStudy`]: the impact in bps per size ([`ImpactRow`]), its
//!    decay, and the fitted exponent of the impact law.
//!
//! ```
//! use serl_market::{
//!     compare_days, fit_noise_volume, impact_study, mean_depth, minute_returns_bps,
//!     stylized_facts, Calibration, FitEffort, ImpactSpec, MarketConfig, OrderStats, Simulator,
//! };
//!
//! // 1. A real session (here a made-up hour around $50) and a small population,
//! //    its order size and cancel rate from LOBSTER order statistics (as
//! //    `OrderStats::from_messages` measures them from a message file).
//! let minutes = 60;
//! let mut cal = Calibration {
//!     tick: 0.01,
//!     minute_price: (0..minutes).map(|m| 50.0 + 0.05 * (m as f64 / 9.0).sin()).collect(),
//!     minute_volume: vec![3_000.0; minutes],
//!     spread_bps: 4.0,
//!     noise_scale: Vec::new(),
//! };
//! let mut market = MarketConfig {
//!     noise_agents: 20,
//!     value_agents: 5,
//!     momentum_agents: 2,
//!     informed_agents: 2,
//!     ..MarketConfig::default()
//! };
//! let lobster = OrderStats {
//!     submissions: 1_000,
//!     cancels: 900,
//!     executed_shares: 40_000,
//!     median_size: 100.0,
//!     mean_size: 180.0,
//!     cancel_ratio: 0.9,
//!     round_lot_share: 0.2,
//!     size_quantiles: Vec::new(),
//! };
//! let daily: f64 = cal.minute_volume.iter().sum();
//! lobster.apply(&mut market, daily);
//! assert_eq!(market.order_size, 450.0); // 100 / 40,000 of 180,000 shares
//!
//! // 2. Fit the noise traders' arrival rates to the real volume (one pilot day).
//! cal.noise_scale = fit_noise_volume(&cal, &market, 0, FitEffort::Quick);
//!
//! // 3. Simulate days; the first also records its tape and book snapshots.
//! let (first, recording) = Simulator::recording(&cal, &market, 1, 5).finish_recorded();
//! assert_eq!(recording.snapshots.len(), minutes);
//! let days = vec![first, Simulator::new(&cal, &market, 2).finish()];
//! assert!(days.iter().all(|d| d.mid.len() == minutes));
//!
//! // 4. Score them against the real day and the stylized facts.
//! let calibration = compare_days(&cal, &days, cal.spread_bps);
//! let facts = stylized_facts(&minute_returns_bps(&days), &mean_depth(&days));
//! assert_eq!((calibration.checks.len(), facts.len()), (5, 6));
//!
//! // 5. The impact of buying (and selling) 5% of the day's volume from
//! //    minute 10 to 30, read again 10 minutes later.
//! let spec = ImpactSpec {
//!     fractions: vec![0.05],
//!     seeds: 1,
//!     start_minute: 10,
//!     end_minute: 30,
//!     decay_minutes: vec![10],
//!     ..ImpactSpec::default()
//! };
//! let study = impact_study(&cal, &market, &spec, &|| {}).unwrap();
//! assert_eq!(study.rows[0].samples, 2);
//! ```

#![deny(missing_docs)]

mod calibration_checks;
mod facts;
mod impact;
mod lobster_stats;
mod path;
mod quantiles;
mod queue_reactive;
mod realism;
mod sim;

pub use calibration_checks::{
    compare_days, mean_depth, minute_returns_bps, DayComparison, PROFILE_MINUTES,
};
pub use facts::{stylized_facts, Check};
pub use impact::{
    impact_seed, impact_study, impact_summary, ImpactError, ImpactRow, ImpactSpec, ImpactStudy,
    SeedPaths,
};
pub use lobster_stats::{OrderFlow, OrderStats, DEPTH_QUANTILES};
pub use path::PathModel;
pub use queue_reactive::{row_mid, QrEvent, QrRates, QueueReactive};
pub use realism::{
    forecast_calibration, lobster_calibration, lobster_calibration_window, minute_of_session,
    score as realism_score, DayFeatures, Distances, Interval, ModelScore, ParametricFlow,
    RealismRow, Response, ResponseEvent, Sample, StatKind, Statistic, REPLICATES, RESPONSE_LAGS,
    STATISTICS,
};
pub use sim::{
    fit_noise_volume, held_out_profiles, AgentKind, BookSnapshot, Calibration, Coarsening,
    FitEffort, MarketConfig, MinuteStats, Recording, Scenario, Simulator, TapeTrade,
    EXECUTION_OWNER,
};

/// Minutes in a regular US equity session (09:30 to 16:00): a simulated
/// day's length, and the range of a scenario's jump minutes.
pub const SESSION_MINUTES: u16 = 390;

/// LOBSTER's clock at the regular open (09:30), seconds after midnight:
/// where a session starts and the minute grid of every day.
pub const LOBSTER_OPEN_SECONDS: f64 = 34_200.0;
