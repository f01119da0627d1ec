//! `serl lob replay`: LOBSTER files through the matching engine.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use serl_lob::{replay, LobsterInput, ReplayOptions};

#[derive(Subcommand)]
pub enum LobCommand {
    /// Replay a LOBSTER day (a sample zip, or a message CSV with its
    /// order-book CSV) and compare the book after every message.
    Replay(ReplayArgs),
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
        LobCommand::Replay(a) => {
            let input = LobsterInput::open(&a.file, a.orderbook.as_deref())?;
            let report = replay(
                &input,
                &ReplayOptions {
                    tick: a.tick,
                    keep_mismatches: a.show,
                },
            )?;
            if a.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!("replayed   {}", report.message_file);
                println!(
                    "against    {} ({} levels)",
                    report.orderbook_file, report.levels
                );
                let t = report.by_type;
                println!(
                    "messages   {} (submit {}, partial cancel {}, delete {}, execute {}, hidden {}, cross {}, halt {})",
                    report.messages, t[0], t[1], t[2], t[3], t[4], t[5], t[6]
                );
                println!("mismatched rows  {}", report.mismatched_rows);
                for m in &report.first_mismatches {
                    println!(
                        "  line {}: {} level {}: LOBSTER ({}, {}), engine ({}, {})",
                        m.line, m.side, m.level, m.expected.0, m.expected.1, m.actual.0, m.actual.1
                    );
                }
                println!(
                    "anonymous  {} lots seeded; {} messages beyond the visible depth",
                    report.anonymous_seeded, report.unobserved_messages
                );
                println!(
                    "throughput {:.2} M msg/s end to end (parse {:.1} ms, replay+check {:.1} ms)",
                    report.messages_per_second / 1e6,
                    report.parse_seconds * 1e3,
                    report.replay_seconds * 1e3
                );
            }
            Ok(if report.mismatched_rows == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
