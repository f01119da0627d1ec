//! # serl-design: what a designer writes
//!
//! SE-RL's designer (a language model or the builtin search) writes seven
//! modules of an RL algorithm. This crate holds each as typed data with its
//! limits and its validator; every crate above it (the trainer, the LLM
//! layer, the outer loop) consumes these types and none defines its own.
//!
//! A module is checked once, when it is built, and holds its compiled form
//! from then on: [`RewardModule`], [`FeatureSet`] (inside [`StateModule`])
//! and [`Communication`] can only be made by compiling their programs
//! (`compile`/`new`, [`Module::parse`], or deserializing their JSON or
//! TOML), so the smoke test, the trainer and the constant-tuning ES use
//! the programs as they are and never compile a designer's text again.
//!
//! | module | type | compiled into |
//! |---|---|---|
//! | reward | [`RewardModule`]: a program over [`REWARD_VARS`] | [`RewardModule::reward`]: a [`ProgramReward`], the environment's `serl_env::Reward` |
//! | state | [`StateModule`]: named [`FeatureDef`] programs over the observation | [`FeatureSet`] |
//! | architecture | [`NetworkSpec`]: blocks, validated against [`MAX_PARAMS`] | the trainer's networks |
//! | imagination | [`ImaginationModule`]: market scenarios and their shares | the trainer's imagined days |
//! | profiling | [`ProfilingModule`]: the market's population | a `serl_market::MarketConfig` |
//! | communication | [`Communication`]: broadcast programs and an [`Aggregate`] | [`Communication::broadcast`], a [`FeatureSet`], and [`Communication::aggregate`] |
//! | plan | [`PlanModule`]: a target inventory curve over checkpoints | two state features ([`PlanModule::features`]), the reward's `plan_gap` and `subgoal_hit` ([`PlannedReward`]), and the tracking controller that behaviour cloning imitates ([`PlanModule::tracking_share`]) |
//!
//! A reply travels: [`extract`] pulls the module's text out of prose and
//! fences, [`Module::parse`] validates it with a message precise enough to
//! send back to the designer ([`ModuleError`]), and [`smoke_test`] plays
//! a reward and state design on one short real episode. A [`Design`] is a
//! whole candidate; [`Design::baseline`] is plain PPO's.
//!
//! ```
//! use serl_design::{Module, ModuleKind};
//!
//! let m = Module::parse(ModuleKind::Reward, "step_pa - 0.5 * remaining_inv^2").unwrap();
//! assert_eq!(m.kind(), ModuleKind::Reward);
//!
//! let e = Module::parse(ModuleKind::Reward, "step_pa + fill_qtty").unwrap_err();
//! assert!(e.to_string().starts_with("reward module:"), "{e}");
//! ```

#![deny(missing_docs)]

mod communication;
mod extract;
mod features;
mod grammar;
mod imagination;
mod kind;
mod modules;
mod network;
mod plan;
mod profiling;
mod reward;
mod schema;
mod smoke;
mod terms;

pub use communication::{Aggregate, Communication, MAX_BROADCAST};
pub use extract::{extract, extract_or_why, well_formed};
pub use features::{
    check_features, column_doc, observation_columns, observation_grammar, FeatureDef, FeatureError,
    FeatureSet, MAX_FEATURES, MAX_FEATURE_NAME,
};
pub use grammar::{module_gbnf, module_grammar_schema, module_lark};
pub use imagination::{ImaginationModule, MAX_JUMPS, MAX_SCENARIOS};
pub use kind::{ModuleError, ModuleKind};
pub use modules::{Design, Module, StateModule};
pub use network::{
    book_index, Activation, BlockSpec, NetworkSpec, Shape, SpecError, BOOK_LEVELS, BOOK_TOKEN,
    HARD_MAX_PARAMS, MAX_BLOCKS, MAX_MACS, MAX_PARAMS, MAX_WIDTH, MAX_WINDOW,
};
pub use plan::{PlanModule, PlanShape, PlannedReward, MAX_CHECKPOINTS, MAX_RATE, MIN_CHECKPOINTS};
pub use profiling::{ProfilingModule, MAX_AGENTS};
pub use reward::{
    default_reward_program, reward_grammar, reward_lark, reward_vars, reward_vars_doc,
    ProgramReward, RewardModule, RewardVar, DEFAULT_REWARD_PROGRAM, REWARD_VARS,
};
pub use schema::module_schema;
pub use smoke::{smoke_test, SmokeReport};
pub use terms::{TermRecorder, TermStats};

/// The observation that feature and broadcast programs read: its width
/// and its column names, as the prompts state them (a placing agent's
/// features may also read its resting order's, [`observation_columns`]).
pub use serl_env::{obs::feature_names as observation_names, OBS_DIM};
/// The market types that the profiling and imagination modules hold.
pub use serl_market::{MarketConfig, Scenario};
