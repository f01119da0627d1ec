//! # serl-modules: the designable modules of an RL algorithm
//!
//! SE-RL's designer (an LLM or the built-in search) writes six modules.
//! Each has a typed definition here, a validator, and a runtime that the
//! environment, trainer or simulator uses:
//!
//! | module | form | runtime |
//! |---|---|---|
//! | reward | an expression program over per-step variables ([`reward_vars`]) | [`ProgramReward`], a `serl_env::Reward` |
//! | state | named feature programs over the observation (windows allowed) | `serl_train::features` |
//! | architecture | a `serl_train::NetworkSpec` | the trainer's networks |
//! | imagination | market scenarios | dynamic training days |
//! | profiling | the background population of the market | `serl_market::MarketConfig` |
//! | communication | per-agent broadcast programs and an aggregation | [`Communication::aggregate`] |
//!
//! [`extract`] pulls a module out of a free-form reply (prose, markdown
//! fences), [`Module::parse`] validates it with a precise message, and
//! [`smoke_test`] runs a reward or state design on a short real episode.

mod extract;
mod module;
mod smoke;

pub use extract::extract;
pub use module::{
    reward_vars, reward_vars_doc, Aggregate, Communication, Design, ImaginationModule, Module,
    ModuleError, ModuleKind, ProfilingModule, ProgramReward, RewardModule, StateModule,
};
pub use smoke::{smoke_test, SmokeReport};
