//! `serl llm`: the designing model learns from its runs. `pairs` counts
//! what a run gives to learn from; `finetune` trains a LoRA adapter on it
//! (with the embedded model).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serl_evolve::{read_run_pairs, PairCounts};

#[cfg(feature = "local")]
mod finetune;

#[derive(Subcommand)]
pub enum LlmCommand {
    /// Count the preference pairs and SFT examples of evolve runs, per
    /// module and kind (better design, valid reply, mutation over parent).
    Pairs(PairsArgs),
    /// Train a LoRA adapter for the embedded model on evolve runs' pairs.
    #[cfg(feature = "local")]
    Finetune(finetune::FinetuneArgs),
}

#[derive(Args)]
pub struct PairsArgs {
    /// Evolve run directories.
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Print the counts as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(c: LlmCommand) -> Result<ExitCode> {
    match c {
        LlmCommand::Pairs(a) => pairs(a),
        #[cfg(feature = "local")]
        LlmCommand::Finetune(a) => finetune::run(a),
    }
}

fn pairs(a: PairsArgs) -> Result<ExitCode> {
    let mut counts = PairCounts::default();
    for run in &a.runs {
        let (pairs, sft) =
            read_run_pairs(run).with_context(|| format!("reading {}", run.display()))?;
        counts.add(&pairs, &sft);
    }
    let table = || println!("{}", crate::show::boxed(&counts.table()));
    crate::show::json_or(&counts.json(), a.json, table)?;
    Ok(ExitCode::SUCCESS)
}
