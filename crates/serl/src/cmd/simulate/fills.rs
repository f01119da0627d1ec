//! `serl simulate fills`: the passive-fill study (`serl_study::fills`)
//! with a progress bar and a line per symbol.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serl_study::fills::FillsRequest;

use crate::cmd::args::OutDir;

#[derive(Args)]
pub struct FillsArgs {
    /// A LOBSTER sample zip, or a directory of them (the deepest file of
    /// each symbol is used).
    #[arg(long, default_value = "../shared/data/lobster-2012-06-21")]
    pub lobster: PathBuf,
    /// Only these symbols of the directory (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub symbols: Vec<String>,
    /// Simulated days per probe in each market.
    #[arg(long, value_parser = crate::cmd::args::at_least_one::<u64>, default_value_t = 2)]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Minutes between probe times, from 09:35 to 15:25.
    #[arg(long, default_value_t = 5)]
    pub every: usize,
    /// Probe sizes, shares (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [100, 500, 2000])]
    pub sizes: Vec<u64>,
    /// A TOML with [data] and [market] tables (see configs/market.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutDir,
}

pub fn run(a: FillsArgs) -> Result<ExitCode> {
    a.output.claim(serl_study::rundir::RunKind::Fills, false)?;
    let request = FillsRequest {
        lobster: a.lobster,
        symbols: a.symbols,
        seeds: a.seeds,
        seed: a.seed,
        every_minutes: a.every,
        sizes: a.sizes,
        config: a.config,
        out: a.output.out,
    };
    let bar = super::realism::days_bar("fills");
    let progress = super::realism::on_progress(&bar);
    let all = serl_study::fills::probe_all(&request, &progress)?;
    serl_study::fills_report::write(&request, &all)?;
    bar.finish();
    crate::show::lines(all.iter().flat_map(|s| s.summary_lines()));
    println!("report: {}", request.out.join("report.html").display());
    Ok(ExitCode::SUCCESS)
}
