//! The `serl` binary from the command line, as a user runs it: one test
//! binary for every command's tests (a module per command or theme), so
//! the test build links the binary's dependencies once rather than once
//! per file. The cluster suite (`cluster`, `slurm_faults`, `rundir`:
//! Slurm, a full disk) keeps binaries of its own, as `.ci/run` runs it as
//! its own step.

#[path = "../common/mod.rs"]
mod common;
#[path = "../../../../tests-support/shared_data.rs"]
mod shared_data;

mod budget;
mod cli;
mod confirm;
mod contract;
mod dbn;
mod evolve;
mod feedback;
mod finetune;
mod golden;
mod hierarchy;
mod learners;
mod llm;
mod placement;
mod planted;
mod realism;
mod search;
mod soak;
mod team;
mod walk_forward;
mod whole_order;
