//! `serl llm finetune`: a LoRA adapter for the embedded model, trained on
//! the pairs of one or more evolve runs.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::progress::Meter;
use anyhow::{Context, Result};
use clap::Args;
use serl_study::finetune::{
    finetune, settings, write_report, FinetuneRequest, Objective, TuneDevice, TuneOverrides,
};

use crate::cmd::args::{named, OutDir};

#[derive(Args)]
#[command(mut_arg("out", |a| a.help("The adapter's directory")))]
pub struct FinetuneArgs {
    /// Evolve run directories whose pairs are the data.
    #[arg(long = "from", required = true, num_args = 1..)]
    pub from: Vec<PathBuf>,
    /// The GGUF model the adapter is for (the one the runs designed with,
    /// or another of the same tokenizer).
    #[arg(long)]
    pub model: PathBuf,
    #[command(flatten)]
    pub output: OutDir,
    /// Go on from the checkpoint in --out (of the same settings and
    /// pairs).
    #[arg(long, conflicts_with = "force")]
    pub resume: bool,
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

pub fn run(a: FinetuneArgs) -> Result<ExitCode> {
    let overrides = TuneOverrides {
        objective: a.objective,
        epochs: a.epochs,
        seed: a.seed,
        device: a.device,
    };
    let req = FinetuneRequest {
        runs: a.from.clone(),
        model: a.model.clone(),
        out: a.output.out.clone(),
        config: settings(a.config.as_deref(), &overrides)?,
    };
    let resume = req.resume_hint();
    serl_study::process::on_signal(move || resume.clone())?;
    a.output
        .claim(serl_study::rundir::RunKind::Finetune, a.resume)?;
    let meter = Meter::new("finetune", "steps", 0);
    let outcome = finetune(&req, &mut |p| {
        meter.set_length(p.steps);
        meter.set_message(p.describe());
        meter.set_position(p.step);
    })
    .context("serl llm finetune")?;
    meter.finish();
    for line in outcome.lines() {
        eprintln!("{line}");
    }
    let html = write_report(&a.output.out, &a.from, &outcome)?;
    println!(
        "adapter: {} (use it with `--adapter {}` or [llm.local] adapter)",
        a.output.out.display(),
        a.output.out.display()
    );
    println!("report: {}", html.display());
    Ok(ExitCode::SUCCESS)
}
