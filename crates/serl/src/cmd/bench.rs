//! `serl bench env`, `sim`, `train` and `team` (in `bench/team.rs`):
//! whole-pipeline throughput figures. The measuring is the library
//! crates' (`serl_env::bench`, `serl_train::bench`); this prints the
//! figures as a table or JSON.
//! Each figure is the median of several runs on one thread unless it says
//! otherwise.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use serl_env::bench::{EnvFigures, SimFigures};
use serl_train::bench::TrainFigures;

mod team;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Static and dynamic environment steps per second, and a full
    /// TWAP + VWAP + AC backtest's wall time with data loading; the dynamic
    /// market on the calibrated flow, or a coarser one.
    Env(FlowArgs),
    /// One simulated day: CPU time, events per second, memory, and how the
    /// cost grows with the number of agents; of the calibrated flow, or of
    /// a coarser one (`[train.hybrid] coarse_flow`).
    Sim(FlowArgs),
    /// PPO training throughput (environment steps per second, updates
    /// included) with the reference setup: MLP [64, 64], 8 static
    /// environments, n_steps 2048, batch 256, 10 epochs; DDQN on the same;
    /// and the same environments stepped without training.
    Train(BenchArgs),
    /// Teams of 2, 4, 8 and 16 agents in the dynamic market: joint steps
    /// per second, MAPPO training steps per second (updates included),
    /// how the cost grows with N, and peak memory.
    Team(BenchArgs),
}

#[derive(Args)]
pub struct BenchArgs {
    /// Bar data (default: the bundled sample).
    #[arg(long, default_value = "data/lean")]
    pub data: PathBuf,
    /// Runs per figure; the median is reported.
    #[arg(long, value_parser = crate::cmd::args::at_least_one::<usize>, default_value_t = 5)]
    pub runs: usize,
    #[arg(long)]
    pub json: bool,
}

/// `serl bench env`'s and `sim`'s options: the common ones and a coarser
/// flow for the simulated market.
#[derive(Args)]
pub struct FlowArgs {
    #[command(flatten)]
    pub common: BenchArgs,
    /// The noise traders' limit orders this many times larger and rarer
    /// (`coarse_flow.noise_limit_mult`).
    #[arg(long, default_value_t = 1.0)]
    pub noise_limit_mult: f64,
    /// The market makers re-quoting this many times less often
    /// (`coarse_flow.mm_interval_mult`).
    #[arg(long, default_value_t = 1.0)]
    pub mm_interval_mult: f64,
    /// One market maker quoting all their depth (`coarse_flow.merge_makers`).
    #[arg(long)]
    pub merge_makers: bool,
    /// Also time this queue-reactive flow (a model file of `serl simulate
    /// calibrate`) in place of the agents: its simulated day (`serl bench
    /// sim`), or the dynamic environment's steps (`serl bench env`).
    #[arg(long)]
    pub queue_reactive: Option<PathBuf>,
}

impl FlowArgs {
    /// The coarsening asked for, checked; `command` names the subcommand
    /// in the error.
    fn coarsening(&self, command: &str) -> Result<serl_env::Coarsening> {
        let flow = serl_env::Coarsening {
            noise_limit_mult: self.noise_limit_mult,
            mm_interval_mult: self.mm_interval_mult,
            merge_makers: self.merge_makers,
        };
        flow.check()
            .map_err(|why| anyhow::anyhow!("serl bench {command}: {why}"))?;
        Ok(flow)
    }
}

pub fn run(cmd: BenchCommand) -> Result<ExitCode> {
    match cmd {
        BenchCommand::Env(a) => env(a),
        BenchCommand::Sim(a) => sim(a),
        BenchCommand::Train(a) => train(a),
        BenchCommand::Team(a) => team::team(&a.data, a.runs, a.json),
    }
}

fn env(e: FlowArgs) -> Result<ExitCode> {
    let flow = e.coarsening("env")?;
    let model = e.queue_reactive.as_deref().map(read_model).transpose()?;
    let a = e.common;
    let f = serl_study::bench::env_figures(&a.data, a.runs, &flow, model.as_ref())?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        print_env(&f);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_env(f: &EnvFigures) {
    println!("data                                 {}", f.data);
    println!(
        "static env, 1-minute steps, 1 core   {:.2} M steps/s ({} steps a run)",
        f.static_steps_per_second_one_core / 1e6,
        f.static_steps
    );
    println!(
        "  resting at the touch (passive TWAP) {:.2} M steps/s",
        f.static_placing_steps_per_second_one_core / 1e6
    );
    println!(
        "TWAP+VWAP+AC backtest, loading incl. {:.2} s wall ({} orders per strategy, all cores)",
        f.backtest_wall_seconds_with_loading, f.backtest_orders_per_strategy
    );
    println!(
        "dynamic env, 5-minute steps, 1 core  {:.0} steps/s ({} episodes, each a simulated day)",
        f.dynamic_steps_per_second_one_core, f.dynamic_episodes
    );
    if let Some(rate) = f.dynamic_queue_reactive_steps_per_second_one_core {
        println!("  the queue-reactive flow in place    {rate:.0} steps/s");
    }
    print_flow(&f.flow);
    println!("medians of {} runs", f.runs);
}

/// A queue-reactive model file (`serl simulate calibrate`'s), read.
fn read_model(path: &std::path::Path) -> Result<serl_env::QueueReactive> {
    serl_env::QueueReactive::read(path).map_err(anyhow::Error::msg)
}

fn sim(s: FlowArgs) -> Result<ExitCode> {
    let flow = s.coarsening("sim")?;
    let a = s.common;
    let model = s.queue_reactive.as_deref().map(read_model).transpose()?;
    let f = serl_env::bench::sim_figures(&a.data, a.runs, &flow, model.as_ref())?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        print_sim(&f);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_sim(f: &SimFigures) {
    println!(
        "one simulated day of {} (09:30-16:00), one thread, median of {} runs",
        f.session, f.runs
    );
    print_flow(&f.flow);
    println!(
        "{:>7} {:>12} {:>10} {:>14} {:>22}",
        "agents", "s per day", "events", "M events/s", "s to fit (once/session)"
    );
    for r in f.rows.iter().chain(&f.queue_reactive) {
        let who = if r.agents == 0 {
            "QR flow".to_string()
        } else {
            r.agents.to_string()
        };
        println!(
            "{:>7} {:>12.3} {:>10} {:>14.2} {:>22.3}",
            who,
            r.seconds_per_day,
            r.events,
            r.events_per_second / 1e6,
            r.fit_seconds
        );
    }
    if let Some(m) = f.peak_rss_mb {
        println!("peak memory of this process: {m:.0} MB (data loading included)");
    }
}

fn train(a: BenchArgs) -> Result<ExitCode> {
    let f = serl_train::bench::train_figures(&a.data, a.runs)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        print_train(&f);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_train(f: &TrainFigures) {
    println!("{}", f.setup);
    println!(
        "training, updates included: {:.0} env steps/s (fused learner; median of {}, {} steps each)",
        f.train_steps_per_second, f.runs, f.train_steps_per_run
    );
    println!(
        "the same with burn's autodiff learner: {:.0} env steps/s",
        f.burn_autodiff_steps_per_second
    );
    println!(
        "DDQN on the same: {:.0} env steps/s fused, {:.0} with burn's autodiff learner",
        f.ddqn_fused_steps_per_second, f.ddqn_burn_steps_per_second
    );
    println!(
        "the same 8 environments without training: {:.0} env steps/s",
        f.env_only_steps_per_second
    );
}

/// Names a coarser flow (nothing for the calibrated one).
fn print_flow(c: &serl_env::Coarsening) {
    if *c != serl_env::Coarsening::default() {
        println!(
            "coarser flow: noise limit orders x{}, makers' re-quotes every x{} their interval{}",
            c.noise_limit_mult,
            c.mm_interval_mult,
            if c.merge_makers {
                ", makers merged into one"
            } else {
                ""
            }
        );
    }
}
