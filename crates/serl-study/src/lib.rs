//! The studies serl runs, as a library: what `serl` does behind its flags.
//!
//! The binary parses flags into the requests and configs here, calls one
//! function, and prints what comes back; everything a run decides, loads,
//! trains, tests or writes is in this crate or below it, so a test (or
//! another front end) reaches all of it without the command line.
//!
//! - [`config`]: the config files (`EvolveFile`, `TrainFile`,
//!   `BacktestFile`, `SimulateFile`), read with errors naming file and line.
//! - [`data`]: bar data and what its load left out, the market views with
//!   their cached noise fits, a run's order splits ([`StudyData`]), and
//!   the provenance of a report; [`catalog`]: a dataset's catalog as
//!   tables (`serl data inspect`).
//! - [`llm`]: the designer and reward-critic backends of the `[llm]` table.
//! - [`evolve`] and [`confirm`]: an evolve run's directory, the loop, its
//!   ablations and report, and the seeds and windows that confirm it.
//! - [`train`], [`train_many`] and [`walk_forward`]: training runs (one,
//!   several seeds, or one per rolling window) and a run's policy as a strategy.
//! - [`backtest`], [`backtest_run`] and [`team`]: strategies and teams
//!   over parent orders; a backtest's config with the command line's
//!   overrides, its checks, and its orders played here or as shards.
//! - [`simulate`], [`realism`] and [`fills`]: the calibrated market
//!   checked against a real day, the impact study, the realism study on
//!   LOBSTER days, and the passive-fill study of every venue against the
//!   real queue.
//! - [`search_study`] and [`search_study_report`]: the equal-budget study
//!   of designers (`serl evolve study`), its lockbox and report.
//! - `finetune` (with the embedded model): the designer fine-tuned on its
//!   runs' pairs into a LoRA adapter (`serl llm finetune`).
//! - [`paths`]: portable runs: every path made absolute when a run starts.
//! - [`rundir`]: what every run directory shares: one coordinator at a
//!   time (its lock); [`process`]: what a command's process holds while
//!   it runs (its logs and trace, its run, its signals).
//! - [`cluster`] and [`tasks`]: the cluster of a run directory, and the
//!   registry of task kinds that `serl task run` dispatches through.

#![deny(missing_docs)]

mod arm_run;
pub mod backtest;
pub mod backtest_run;
pub mod bench;
pub mod calibrate;
pub mod catalog;
pub mod cluster;
pub mod config;
pub mod confirm;
pub mod data;
mod error;
pub mod evolve;
pub mod evolve_overrides;
pub mod evolve_words;
pub mod fills;
pub mod fills_report;
#[cfg(feature = "local")]
pub mod finetune;
pub mod llm;
pub mod lob_export;
pub mod paths;
mod plant_sweep;
pub mod planted_study;
#[cfg(feature = "local")]
pub mod probe;
pub mod process;
pub mod realism;
pub mod rundir;
pub mod search_study;
pub mod search_study_report;
pub mod simulate;
pub mod tasks;
pub mod team;
pub mod train;
pub mod train_many;
pub mod train_overrides;
pub mod train_words;
pub mod venues;
pub mod walk_forward;

pub use config::{read_toml, BacktestFile, EvolveFile, LlmChoice, LlmSection, TrainFile};
pub use data::StudyData;
pub use error::{Context, Result, StudyError};
