//! `serl lob replay`: LOBSTER files through the matching engine;
//! `serl lob export`: a LOBSTER day as Databento DBN MBO (and MBP);
//! `serl lob mbp`: a DBN MBP file checked against the book of its MBO file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use serl_lob::{replay, LobsterInput, ReplayOptions};
use serl_study::lob_export::{self, ExportRequest, ExportSource};

use super::args::check_exit;

#[derive(Subcommand)]
pub enum LobCommand {
    /// Replay a LOBSTER day (a sample zip, or a message CSV with its
    /// order-book CSV) and compare the book after every message.
    Replay(ReplayArgs),
    /// Write a LOBSTER day (a sample zip, a message CSV beside its
    /// order-book CSV, or a simulated day `serl simulate realism --export`
    /// wrote) as a Databento DBN MBO file, read it back, and compare its
    /// book with the day's after every message.
    Export(ExportArgs),
    /// Check a Databento DBN MBP file (mbp-1 or mbp-10) against the book
    /// the engine replays from the MBO file of the same symbol and feed,
    /// record by record (matched by receipt time and sequence number).
    Mbp(MbpArgs),
}

#[derive(Args)]
pub struct MbpArgs {
    /// The DBN MBO file.
    pub mbo: PathBuf,
    /// The DBN MBP file (mbp-1 or mbp-10).
    pub mbp: PathBuf,
    /// The symbol to compare (default: the MBO file's only one).
    #[arg(long)]
    pub symbol: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ExportArgs {
    /// LOBSTER_SampleFile_*.zip, or a *_message_*.csv file (or give
    /// --queue-reactive instead).
    #[arg(
        required_unless_present = "queue_reactive",
        conflicts_with = "queue_reactive"
    )]
    pub file: Option<PathBuf>,
    /// Simulate a day of this queue-reactive model (`serl simulate
    /// calibrate` wrote it) from its own opening book, every order
    /// recorded, instead of reading a LOBSTER day.
    #[arg(long)]
    pub queue_reactive: Option<PathBuf>,
    /// The DBN file to write (`.dbn`).
    #[arg(long)]
    pub dbn: PathBuf,
    /// The symbol the file maps (default: the one in the day's or the
    /// model's file name).
    #[arg(long)]
    pub symbol: Option<String>,
    /// The day's date, YYYY-MM-DD (default: the one in the day's file
    /// name, or in the model's source).
    #[arg(long)]
    pub date: Option<chrono::NaiveDate>,
    /// The simulated day's start (HH:MM).
    #[arg(long, value_parser = crate::cmd::args::parse_clock, default_value = "09:30")]
    pub from: usize,
    /// The simulated day's end (HH:MM).
    #[arg(long, value_parser = crate::cmd::args::parse_clock, default_value = "16:00")]
    pub until: usize,
    /// The simulated day's opening mid, dollars.
    #[arg(long, default_value_t = 100.0)]
    pub mid: f64,
    /// Seed of the simulated flow.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also write the day's book as DBN MBP here, and check it against
    /// the book replayed from the MBO file.
    #[arg(long)]
    pub mbp: Option<PathBuf>,
    /// The MBP file's levels: 1 (mbp-1) or 10 (mbp-10).
    #[arg(long, default_value_t = 10, value_parser = mbp_levels)]
    pub mbp_levels: usize,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct ReplayArgs {
    /// LOBSTER_SampleFile_*.zip, or a *_message_*.csv file.
    pub file: PathBuf,
    /// The *_orderbook_*.csv file (found beside the message file if omitted).
    pub orderbook: Option<PathBuf>,
    /// Tick size in LOBSTER price units (1/10000 dollar).
    #[arg(long, default_value_t = 100)]
    pub tick: i64,
    /// Mismatching rows to show.
    #[arg(long, default_value_t = 5)]
    pub show: usize,
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: LobCommand) -> Result<ExitCode> {
    match cmd {
        LobCommand::Export(a) => export(a),
        LobCommand::Mbp(a) => mbp(a),
        LobCommand::Replay(a) => {
            let input = LobsterInput::open(&a.file, a.orderbook.as_deref())?;
            let report = replay(
                &input,
                &ReplayOptions {
                    tick: a.tick,
                    keep_mismatches: a.show,
                },
            )?;
            crate::show::json_or(&report, a.json, || print!("{report}"))?;
            Ok(check_exit(report.matched()))
        }
    }
}

fn export(a: ExportArgs) -> Result<ExitCode> {
    let source = match (a.file.clone(), a.queue_reactive.clone()) {
        (Some(file), _) => ExportSource::Lobster(file),
        (None, Some(model)) => ExportSource::QueueReactive {
            model,
            minutes: a.from..a.until,
            mid: a.mid,
            seed: a.seed,
        },
        (None, None) => anyhow::bail!("give a LOBSTER FILE or --queue-reactive MODEL"),
    };
    let exported = lob_export::export(&ExportRequest {
        source,
        dbn: a.dbn.clone(),
        symbol: a.symbol,
        date: a.date,
        mbp: a.mbp.clone().map(|p| (p, a.mbp_levels)),
    })?;
    let both = serde_json::json!({ "mbo": exported.report, "mbp": exported.mbp });
    let what = a.file.or(a.queue_reactive).unwrap_or_default();
    crate::show::json_or(&both, a.json, || {
        print!("{}", exported.text(&what, &a.dbn, a.mbp.as_deref()))
    })?;
    Ok(check_exit(exported.as_expected()))
}

fn mbp_levels(s: &str) -> std::result::Result<usize, String> {
    match s {
        "1" => Ok(1),
        "10" => Ok(10),
        _ => Err(format!(
            "{s}: an MBP file holds 1 level (mbp-1) or 10 (mbp-10)"
        )),
    }
}

fn mbp(a: MbpArgs) -> Result<ExitCode> {
    let symbol = match a.symbol {
        Some(s) => s,
        None => match serl_lob::mbo_symbols(&a.mbo)?.as_slice() {
            [one] => one.clone(),
            many => anyhow::bail!(
                "{} holds {}; pass --symbol",
                a.mbo.display(),
                many.join(", ")
            ),
        },
    };
    let check = serl_lob::check_mbp(&a.mbo, &a.mbp, &symbol)?;
    crate::show::json_or(&check, a.json, || {
        let (mbp, mbo, depth) = (a.mbp.display(), a.mbo.display(), check.depth);
        let records = check.records;
        println!(
            "checked    {mbp} ({symbol}, mbp-{depth}: {records} records) against the book of {mbo}"
        );
        print!("{check}");
    })?;
    // A book that can be whole must match.
    Ok(check_exit(check.as_expected()))
}
