//! `serl evolve study`: the equal-budget study of designers.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serl_study::search_study::{StudyFile, StudyRunner};

use super::shown;
use crate::cmd::args::{warn, OutDir};

#[derive(Args)]
#[command(mut_arg("out", |a| a.help("The study's directory")))]
pub struct StudyArgs {
    /// A study file: `base` (an evolve config), `seeds` and `[[arms]]`
    /// (configs/study.toml).
    #[arg(long)]
    pub config: PathBuf,
    #[command(flatten)]
    pub output: OutDir,
    /// Go on with the study in --out: runs that finished are read back,
    /// the one under way resumes, the rest run.
    #[arg(long, conflicts_with = "force")]
    pub resume: bool,
}

/// Each run's progress bar, as `serl evolve` shows it.
fn study_shown(cfg: &serl_evolve::EvolveConfig) -> serl_evolve::OnEvent<'static> {
    shown(cfg)
}

pub fn run(a: StudyArgs) -> Result<ExitCode> {
    let file = StudyFile::load(&a.config)?;
    let (config, out) = (a.config.clone(), a.output.out.clone());
    serl_study::process::on_signal(move || StudyFile::resume_hint(&config, &out))?;
    a.output
        .claim(serl_study::rundir::RunKind::Study, a.resume)?;
    let out = &a.output.out;
    eprintln!("{}", file.plan_line(out));
    let starting = |arm: &str, seed: u64, resuming: bool| {
        eprintln!(
            "{} arm {arm}, seed {seed}",
            if resuming { "resuming" } else { "running" }
        )
    };
    let runner = StudyRunner {
        file: &file,
        out,
        shown: study_shown,
        warn: &warn,
        starting: &starting,
        data: None,
    };
    if let Some(sweep) = &file.plant {
        return planted(&runner, sweep, out);
    }
    let result = runner.run()?;
    println!("{}", result.lockbox.line());
    println!("report: {}", out.join("report.html").display());
    Ok(ExitCode::SUCCESS)
}

/// The planted study: every run, then its table.
fn planted(
    runner: &StudyRunner,
    sweep: &serl_study::planted_study::PlantSweep,
    out: &std::path::Path,
) -> Result<ExitCode> {
    use serl_study::planted_study as planted;
    let runs = planted::run_planted(runner, sweep)?;
    let summaries = planted::write_report(out, &runs)?;
    print!("{}", planted::markdown(&summaries));
    println!("report: {}", out.join("report.md").display());
    Ok(ExitCode::SUCCESS)
}
