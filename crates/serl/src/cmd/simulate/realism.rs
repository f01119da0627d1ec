//! `serl simulate realism`: the realism study (`serl_study::realism`) with
//! a progress bar and a line per symbol.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serl_study::realism::{Progress, RealismRequest};

use crate::cmd::args::OutDir;
use crate::progress::Meter;

#[derive(Args)]
pub struct RealismArgs {
    /// A LOBSTER sample zip, or a directory of them (the deepest file of
    /// each symbol is used).
    #[arg(long, default_value = "../shared/data/lobster-2012-06-21")]
    pub lobster: PathBuf,
    /// Only these symbols of the directory (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub symbols: Vec<String>,
    /// Simulated days per model and symbol.
    #[arg(long, value_parser = crate::cmd::args::at_least_one::<u64>, default_value_t = 3)]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A TOML with a [market] table (see configs/market.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Also write each model's first simulated day as LOBSTER message and
    /// order-book files under OUT/lobster/.
    #[arg(long)]
    pub export: bool,
    #[command(flatten)]
    pub output: OutDir,
}

pub fn run(a: RealismArgs) -> Result<ExitCode> {
    a.output
        .claim(serl_study::rundir::RunKind::Realism, false)?;
    let request = RealismRequest {
        lobster: a.lobster,
        symbols: a.symbols,
        seeds: a.seeds,
        seed: a.seed,
        config: a.config,
        export: a.export,
        out: a.output.out,
    };
    let bar = days_bar("realism");
    let progress = on_progress(&bar);
    let reports = serl_study::realism::realism(&request, &progress)?;
    bar.finish();
    crate::show::lines(reports.iter().flat_map(|r| r.summary_lines()));
    println!("report: {}", request.out.join("report.html").display());
    Ok(ExitCode::SUCCESS)
}

/// A meter over the simulated days of a LOBSTER study, labelled `label`.
pub(super) fn days_bar(label: &'static str) -> Meter {
    Meter::new(label, "days", 0)
}

/// What `bar` shows of a LOBSTER study's progress: the days in all, the
/// symbol at work, each day done.
pub(super) fn on_progress(bar: &Meter) -> impl Fn(Progress) + Sync + '_ {
    move |p: Progress| match p {
        Progress::Days(n) => bar.set_length(n),
        Progress::Symbol(s) => bar.set_message(s.to_string()),
        Progress::Done => bar.inc(1),
        Progress::Warning(w) => bar.say(&format!("warning: {w}")),
    }
}
