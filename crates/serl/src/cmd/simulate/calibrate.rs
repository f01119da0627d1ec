//! `serl simulate calibrate`: the queue-reactive flow fitted to LOBSTER
//! days, a model file per symbol.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serl_study::calibrate::CalibrateRequest;

use crate::cmd::args::OutDir;

#[derive(Args)]
#[command(
    mut_arg("out", |a| a.help("The directory SYMBOL.json files are written to")),
    mut_arg("force", |a| a.help("Write over model files already there"))
)]
pub struct CalibrateArgs {
    /// A LOBSTER sample zip, or a directory of them (the deepest file of
    /// each symbol is used).
    #[arg(long)]
    pub lobster: PathBuf,
    /// Only these symbols of the directory (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub symbols: Vec<String>,
    /// Fit on the messages before this time of day only (HH:MM), keeping
    /// the rest of the day held out.
    #[arg(long, value_parser = crate::cmd::args::parse_clock)]
    pub until: Option<usize>,
    #[command(flatten)]
    pub output: OutDir,
}

pub fn run(a: CalibrateArgs) -> Result<ExitCode> {
    let request = CalibrateRequest {
        lobster: a.lobster,
        symbols: a.symbols,
        until_minute: a.until,
        out: a.output.out,
        force: a.output.force,
    };
    for f in serl_study::calibrate::calibrate(&request, &super::super::args::warn)? {
        println!("{}", f.summary_line());
    }
    Ok(ExitCode::SUCCESS)
}
