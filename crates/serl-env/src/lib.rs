//! # serl-env: the order-execution MDP
//!
//! The task every agent is judged on, following SE-RL: sell or buy a parent
//! order of Q shares inside a window, deciding every k minutes what fraction
//! of Q to trade now. Prices are judged by the price advantage (PA, in bps)
//! of the average fill over the window's benchmark.
//!
//! How the pieces connect:
//!
//! - Orders: [`generate_orders`] draws [`ParentOrder`]s over a dataset
//!   split as [`OrderConfig`] says (default 1% of ADV, both sides, whole
//!   session).
//! - Market data: [`MarketData`] prepares every session once as a
//!   [`SessionView`] (minute prices, spreads, volumes, look-back
//!   statistics); [`SessionView::imagined`] reshapes a day by a
//!   [`Scenario`].
//! - Episodes: an [`Episode`] is one parent order being worked (observe,
//!   decide, step, [`ExecutionOutcome`] with its `pa_bps`). [`StaticEnv`]
//!   replays the historical day with no impact; [`DynamicEnv`] sends the
//!   agent's child orders as market orders into a `serl-market` simulation
//!   calibrated to the session ([`calibrate`]), so they move the price, and
//!   can add [`Peer`] execution agents. Both are set by an [`EnvConfig`].
//! - Placement: a strategy's decision is a [`ChildOrder`], a share of the
//!   order and its [`Placement`] (cross, rest at or behind the touch, or
//!   at a price from the mid). Resting orders fill in the simulated book by
//!   price-time priority, in the static replay by the conservative
//!   [`FillModel`], and on a real [`LobsterDay`] ([`LobsterVenue`]) by
//!   their place in the real queue, message by message; [`PlacementStats`] says what placement earned
//!   (passive share, spread captured, adverse selection, final cross).
//!   A [`Probe`] rests one order in each of the three ([`LobsterDay::probe`],
//!   [`probe_bars`], [`probe_market`]) to measure how far their fills are
//!   from the real queue's ([`ProbeFill`]).
//! - Observations: [`obs`] fixes one layout ([`OBS_DIM`] columns) for every
//!   environment, so one policy runs in all of them.
//! - Rewards: each step yields a [`StepInfo`]; a [`Reward`] turns it into a
//!   number ([`DefaultReward`]: step PA minus a quadratic inventory
//!   penalty).
//! - Strategies: baselines and trained policies implement [`Strategy`]
//!   (acting on a [`Decision`]; [`Twap`] is the reference). [`play`] runs a
//!   strategy through any episode, and a [`Venue`] ([`StaticVenue`],
//!   [`DynamicVenue`]) opens episodes for backtests and validation;
//!   [`run_static`] and [`run_dynamic`] play one episode directly. Training
//!   steps the same episodes one action at a time.
//! - Teams: several execution agents in one market at once
//!   ([`TeamMode`]: one parent order split across them, or independent
//!   orders competing). A [`TeamEpisode`] steps every member jointly
//!   ([`DynamicTeam`]: their orders meet in one book; [`StaticTeam`] in
//!   the replay), a [`TeamStrategy`] decides for all of them
//!   ([`Independent`]: one strategy each, hearing nothing), [`play_team`]
//!   runs the episode and [`Venue::open_team`] opens one.

#![deny(missing_docs)]

pub mod bench;
mod config;
mod dynamic_env;
mod episode;
mod error;
mod fill_probe;
mod fit_cache;
mod lobster_queue;
pub mod obs;
mod order;
mod placement;
mod reward;
mod static_env;
mod team;
mod team_mode;
mod training;
mod venue;
mod view;

pub use config::{ActionSpace, Benchmark, EnvConfig, Terminal};
pub use dynamic_env::{calibrate, run_dynamic, DynamicEnv, Peer};
pub use episode::{play, Decision, Episode, ExecutionOutcome, Strategy, Twap};
pub use error::EnvError;
pub use fill_probe::{probe_bars, probe_market, Probe, ProbeFill, ADVERSE_AFTER};
pub use lobster_queue::LobsterDay;
pub use obs::OBS_DIM;
pub use order::{
    check_window, generate_orders, spread_orders, OrderConfig, OrderSide, ParentOrder, Quantity,
    Sides,
};
pub use placement::{ChildOrder, FillModel, Placement, PlacementStats, QueueState, TICK};
pub use reward::{DefaultReward, Reward, StepInfo};
pub use serl_market::{
    held_out_profiles, Coarsening, MarketConfig, QueueReactive, Scenario, SESSION_MINUTES,
};
pub use static_env::{run_static, work_step, StaticEnv};
pub use team::{
    play_team, team_outcome, DynamicTeam, Independent, StaticTeam, TeamEpisode, TeamOutcome,
    TeamStrategy, MAX_AGENTS,
};
pub use team_mode::{team_orders, TeamMode};
pub use training::{ImaginedDays, Source, TrainingDraw};
pub use venue::{DynamicVenue, LobsterVenue, StaticVenue, Venue};
pub use view::{MarketData, SessionView, ViewRef};
