//! # serl-env: the order-execution MDP
//!
//! The task every agent is judged on, following SE-RL: sell or buy a parent
//! order of Q shares inside a window, deciding every k minutes what fraction
//! of Q to trade now.
//!
//! - [`order`]: [`ParentOrder`]s and [`generate_orders`], which draws them
//!   over a dataset split (default 1% of ADV, both sides, whole session).
//! - [`view`]: [`SessionView`], a session prepared once (minute prices,
//!   spreads, volumes, look-back statistics), and [`MarketData`], all of them.
//! - [`obs`]: the observation layout, the same in every environment.
//! - [`reward`]: the [`Reward`] interface and the [`DefaultReward`] (step PA
//!   minus a quadratic inventory penalty).
//! - [`static_env`]: [`StaticEnv`], the historical replay with no impact,
//!   the [`Strategy`] interface that baselines and policies implement, and
//!   [`run_static`], which plays one episode.
//!
//! - [`dynamic_env`]: [`DynamicEnv`] and [`run_dynamic`], the same
//!   episode with the agent's child orders sent as market orders into a
//!   `serl-market` simulation calibrated to the session, so they move the
//!   price.
//! - [`venue`]: the one interface both implement. An [`Episode`] is a
//!   parent order being worked (observe, decide, step, outcome with its
//!   `pa_bps`); [`play`] runs a strategy through any episode; a [`Venue`]
//!   ([`StaticVenue`], [`DynamicVenue`]) opens episodes for backtests and
//!   validation. Training steps the same episodes one action at a time.

pub mod config;
pub mod dynamic_env;
mod error;
pub mod obs;
pub mod order;
pub mod reward;
pub mod static_env;
pub mod venue;
pub mod view;

pub use config::{ActionSpace, Benchmark, EnvConfig, Terminal};
pub use dynamic_env::{calibrate, run_dynamic, DynamicEnv, Peer};
pub use error::EnvError;
pub use obs::OBS_DIM;
pub use order::{
    check_window, generate_orders, spread_orders, OrderConfig, OrderSide, ParentOrder, Quantity,
    Sides,
};
pub use reward::{DefaultReward, Reward, StepInfo};
pub use serl_market::{MarketConfig, Scenario, SESSION_MINUTES};
pub use static_env::{
    run_static, work_step, Decision, ExecutionOutcome, StaticEnv, Strategy, Twap,
};
pub use venue::{play, DynamicVenue, Episode, StaticVenue, Venue};
pub use view::{MarketData, SessionView, ViewRef};
