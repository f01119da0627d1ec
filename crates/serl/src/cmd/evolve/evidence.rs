//! `serl evolve evidence RUN`: what a run's evidence says of its choice.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

#[derive(Args)]
pub struct EvidenceArgs {
    /// The run directory (`serl evolve --out DIR`).
    pub run: PathBuf,
    /// Print `evidence.json`'s figures as JSON instead.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: EvidenceArgs) -> Result<ExitCode> {
    let (e, rows) = serl_evolve::evidence::recompute(&a.run)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&e)?);
        return Ok(ExitCode::SUCCESS);
    }
    let strategies: std::collections::BTreeSet<&str> =
        rows.iter().map(|r| r.name.as_str()).collect();
    println!(
        "{}: {} rows, {} strategies (candidates, plain PPO, baselines) over validation stock-days",
        a.run.join(serl_evolve::evidence::EVIDENCE_FILE).display(),
        rows.len(),
        strategies.len()
    );
    crate::show::lines(e.lines());
    Ok(ExitCode::SUCCESS)
}
