//! `serl llm finetune`: a LoRA adapter for the embedded model, trained on
//! the pairs of one or more evolve runs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serl_study::finetune::{
    finetune, write_report, FinetuneRequest, Objective, TuneConfig, TuneDevice,
};

use crate::cmd::args::named;
use crate::progress::PlainProgress;

#[derive(Args)]
pub struct FinetuneArgs {
    /// Evolve run directories whose pairs are the data.
    #[arg(long = "from", required = true, num_args = 1..)]
    pub from: Vec<PathBuf>,
    /// The GGUF model the adapter is for (the one the runs designed with,
    /// or another of the same tokenizer).
    #[arg(long)]
    pub model: PathBuf,
    /// The adapter's directory.
    #[arg(long)]
    pub out: PathBuf,
    /// Go on from the checkpoint in --out (of the same settings and
    /// pairs).
    #[arg(long, conflicts_with = "force")]
    pub resume: bool,
    /// Write over the run already in --out: its files are removed first
    /// (a folder serl did not write is refused even so).
    #[arg(long)]
    pub force: bool,
    /// The objective (default: the settings file's, else dpo).
    /// sft: the chosen reply's log-likelihood (the best reply of each
    /// prompt); dpo: preference pairs against the frozen base.
    #[arg(long, value_parser = named::<Objective>(&Objective::NAMES))]
    pub objective: Option<Objective>,
    /// A TOML file of settings (`rank`, `alpha`, `targets`,
    /// `learning_rate`, `epochs`, `batch`, `beta`, `holdout`, `seed`, …:
    /// the fields of `[evolve.finetune.tune]`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Passes over the examples at most.
    #[arg(long)]
    pub epochs: Option<usize>,
    /// The seed of the adapter's start, the split and the order.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where to train: `cpu`, or `cuda` in a build with `--features cuda`
    /// (default: the settings file's, else cpu).
    #[arg(long, value_parser = named::<TuneDevice>(&TuneDevice::NAMES))]
    pub device: Option<TuneDevice>,
}

fn settings(a: &FinetuneArgs) -> Result<TuneConfig> {
    let mut c: TuneConfig = match &a.config {
        Some(p) => serl_study::read_toml(p)?,
        None => TuneConfig::default(),
    };
    if let Some(o) = a.objective {
        c.objective = o;
    }
    if let Some(e) = a.epochs {
        c.epochs = e;
    }
    if let Some(s) = a.seed {
        c.seed = s;
    }
    if let Some(d) = a.device {
        c.device = d;
    }
    Ok(c)
}

pub fn run(a: FinetuneArgs) -> Result<ExitCode> {
    let config = settings(&a)?;
    let resume = format!(
        "resume with: serl llm finetune --from {} --model {} --out {} --resume",
        a.from
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
        a.model.display(),
        a.out.display()
    );
    crate::interrupt::install(move || resume.clone())?;
    crate::interrupt::claim_run(
        &a.out,
        serl_study::rundir::RunKind::Finetune,
        (a.force, a.resume),
    )?;
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("finetune {bar:30} {pos}/{len} steps  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut plain: Option<PlainProgress> = None;
    let req = FinetuneRequest {
        runs: a.from.clone(),
        model: a.model.clone(),
        out: a.out.clone(),
        config,
    };
    let outcome = finetune(&req, &mut |p| {
        if bar.length() != Some(p.steps) {
            bar.set_length(p.steps);
            plain = PlainProgress::for_bar(&bar, "finetune", "steps");
        }
        bar.set_position(p.step);
        let msg = p.describe();
        bar.set_message(msg.clone());
        if let Some(pp) = &plain {
            pp.at(p.step, &msg);
        }
    })
    .context("serl llm finetune")?;
    bar.finish_and_clear();
    for line in outcome.lines() {
        eprintln!("{line}");
    }
    let html = write_report(&a.out, &a.from, &outcome)?;
    println!(
        "adapter: {} (use it with `--adapter {}` or [llm.local] adapter)",
        a.out.display(),
        a.out.display()
    );
    println!("report: {}", html.display());
    Ok(ExitCode::SUCCESS)
}
