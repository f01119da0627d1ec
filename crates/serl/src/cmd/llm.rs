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

/// Pairs of each kind of [`PairKind::ALL`], in its order.
type Counts = [usize; PairKind::ALL.len()];

fn pairs(a: PairsArgs) -> Result<ExitCode> {
    // module → (count per kind of PairKind::ALL, SFT examples)
    let mut counts: BTreeMap<&'static str, (Counts, usize)> = BTreeMap::new();
    for run in &a.runs {
        let (pairs, sft) =
            read_run_pairs(run).with_context(|| format!("reading {}", run.display()))?;
        for p in &pairs {
            let k = PairKind::ALL.iter().position(|&k| k == p.kind).unwrap_or(0);
            counts.entry(p.module.name()).or_default().0[k] += 1;
        }
        for s in &sft {
            counts.entry(s.module.name()).or_default().1 += 1;
        }
    }
    let mut total = ([0usize; PairKind::ALL.len()], 0usize);
    for (k, s) in counts.values() {
        for (t, n) in total.0.iter_mut().zip(k) {
            *t += n;
        }
        total.1 += s;
    }
    if a.json {
        let row = |(k, s): &(Counts, usize)| {
            let mut r: serde_json::Map<String, serde_json::Value> = PairKind::ALL
                .iter()
                .zip(k)
                .map(|(kind, n)| (kind.name().to_string(), (*n).into()))
                .collect();
            // The table's columns, the same names: every kind, their sum
            // (`pairs`), and the SFT examples.
            r.insert("pairs".into(), k.iter().sum::<usize>().into());
            r.insert("sft".into(), (*s).into());
            serde_json::Value::Object(r)
        };
        let modules: BTreeMap<&str, serde_json::Value> =
            counts.iter().map(|(m, c)| (*m, row(c))).collect();
        let out = serde_json::json!({"modules": modules, "total": row(&total)});
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec!["module"];
    header.extend(PairKind::ALL.map(PairKind::name));
    header.extend(["pairs", "SFT examples"]);
    t.set_header(header);
    let line = |name: &str, (k, s): &(Counts, usize)| {
        let mut cells = vec![name.to_string()];
        cells.extend(k.iter().map(usize::to_string));
        cells.extend([k.iter().sum::<usize>().to_string(), s.to_string()]);
        cells
    };
    for (m, c) in &counts {
        t.add_row(line(m, c));
    }
    t.add_row(line("all", &total));
    println!("{t}");
    Ok(ExitCode::SUCCESS)
}
