//! `serl llm`: the designing model learns from its runs. `pairs` counts
//! what a run gives to learn from; `finetune` trains a LoRA adapter on it
//! (with the embedded model).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serl_evolve::{read_run_pairs, PairKind};

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
    let kinds = [PairKind::Better, PairKind::Valid, PairKind::Mutation];
    // module → (count per kind, SFT examples)
    let mut counts: BTreeMap<&'static str, ([usize; 3], usize)> = BTreeMap::new();
    for run in &a.runs {
        let (pairs, sft) =
            read_run_pairs(run).with_context(|| format!("reading {}", run.display()))?;
        for p in &pairs {
            let k = kinds.iter().position(|&k| k == p.kind).unwrap_or(0);
            counts.entry(p.module.name()).or_default().0[k] += 1;
        }
        for s in &sft {
            counts.entry(s.module.name()).or_default().1 += 1;
        }
    }
    let mut total = ([0usize; 3], 0usize);
    for (k, s) in counts.values() {
        for (t, n) in total.0.iter_mut().zip(k) {
            *t += n;
        }
        total.1 += s;
    }
    if a.json {
        let row = |(k, s): &([usize; 3], usize)| serde_json::json!({"better": k[0], "valid": k[1], "mutation": k[2], "sft": s});
        let modules: BTreeMap<&str, serde_json::Value> =
            counts.iter().map(|(m, c)| (*m, row(c))).collect();
        let out = serde_json::json!({"modules": modules, "total": row(&total)});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "module",
        "better",
        "valid",
        "mutation",
        "pairs",
        "SFT examples",
    ]);
    let line = |name: &str, (k, s): &([usize; 3], usize)| {
        vec![
            name.to_string(),
            k[0].to_string(),
            k[1].to_string(),
            k[2].to_string(),
            k.iter().sum::<usize>().to_string(),
            s.to_string(),
        ]
    };
    for (m, c) in &counts {
        t.add_row(line(m, c));
    }
    t.add_row(line("all", &total));
    println!("{t}");
    Ok(ExitCode::SUCCESS)
}
