//! `serl`: the command-line front of SE-RL for order execution.
//!
//! Each subcommand lives in its own module under `cmd/`: it turns flags
//! into a config or request of `serl_study` (or a lower crate), calls the
//! library, and prints; this file only dispatches and reports errors.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod progress;
mod show;

#[derive(Parser)]
#[command(
    name = "serl",
    version,
    about = "LLM-designed reinforcement learning for order execution (SE-RL)"
)]
struct Cli {
    /// Write a trace of the run to FILE (Chrome trace-event JSON, for
    /// Perfetto or chrome://tracing): its stages, candidates, trainings
    /// and updates on a timeline, a row per thread.
    #[arg(long, global = true, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect and validate historical bar data.
    #[command(subcommand)]
    Data(cmd::data::DataCommand),
    /// The limit order book: replay LOBSTER files through the matching engine.
    #[command(subcommand)]
    Lob(cmd::lob::LobCommand),
    /// Run execution strategies over parent orders and write a report.
    Backtest(cmd::backtest::BacktestArgs),
    /// The SE-RL outer loop: design, train and evaluate execution agents,
    /// improve the designer, and test the best once.
    Evolve(cmd::evolve::EvolveArgs),
    /// The designer's prompt templates: list, render, check.
    #[command(subcommand)]
    Prompts(cmd::prompts::PromptsCommand),
    /// The designing model learns from its runs: count pairs, fine-tune.
    #[command(subcommand)]
    Llm(cmd::llm::LlmCommand),
    /// Train a PPO, DDQN or SAC execution policy in the hybrid environment.
    Train(cmd::train::TrainArgs),
    /// Simulate a real symbol-day in the multi-agent market and check it.
    Simulate(cmd::simulate::SimulateArgs),
    /// Throughput figures for the environments and the market simulator.
    #[command(subcommand)]
    Bench(cmd::bench::BenchCommand),
    /// A run directory: check that it is whole.
    #[command(subcommand)]
    Run(cmd::run::RunCommand),
    /// A run's planned tasks: run one (what a Slurm, HyperQueue or
    /// Kubernetes array runs), list them, write a Kubernetes manifest.
    #[command(subcommand)]
    Task(cmd::task::TaskCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A task whose coordinator traces writes a trace beside its fellow
    // tasks' unless told where; one that cannot runs untraced.
    let own = match (&cli.trace, &cli.command) {
        (None, Command::Task(c)) => cmd::task::own_trace(c),
        _ => None,
    };
    let started = match (&cli.trace, own) {
        (None, Some(own)) => serl_study::process::init_logs(Some(&own)).or_else(|e| {
            eprintln!(
                "warning: {:#}; this task runs untraced",
                anyhow::Error::from(e)
            );
            serl_study::process::init_logs(None)
        }),
        (trace, _) => serl_study::process::init_logs(trace.as_deref()),
    };
    if let Err(e) = started {
        eprintln!("error: {:#}", anyhow::Error::from(e));
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Data(c) => cmd::data::run(c),
        Command::Lob(c) => cmd::lob::run(c),
        Command::Backtest(a) => cmd::backtest::run(a),
        Command::Bench(c) => cmd::bench::run(c),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Train(a) => cmd::train::run(a),
        Command::Evolve(a) => cmd::evolve::run(a),
        Command::Prompts(c) => cmd::prompts::run(c),
        Command::Llm(c) => cmd::llm::run(c),
        Command::Task(c) => cmd::task::run(c),
        Command::Run(c) => cmd::run::run(c),
    };
    serl_study::process::finish();
    serl_study::process::release();
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
