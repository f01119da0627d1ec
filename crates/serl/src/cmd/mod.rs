//! The subcommands: each file parses its flags into a request or config
//! of `serl_study` (or a lower crate), calls it, and prints what comes
//! back. They share only [`args`]; none imports another.

pub mod args;
pub mod backtest;
pub mod bench;
pub mod data;
pub mod evolve;
pub mod llm;
pub mod lob;
pub mod prompts;
pub mod run;
pub mod simulate;
pub mod task;
pub mod train;
