//! `serl backtest --team RUN_DIR --agents N`: trained teams and baselines
//! working each parent order with N agents at once
//! (`serl_study::team`), with a progress bar and the tables printed.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use serl_study::team::{TeamBacktest, TeamRequest};
use serl_study::BacktestFile;

use super::super::args::warn;
use super::BacktestArgs;

pub fn run(a: &BacktestArgs, cfg: &BacktestFile) -> Result<ExitCode> {
    if a.lobster.is_some() {
        bail!("--team plays bar data (--data), not LOBSTER days");
    }
    let request = TeamRequest {
        teams: &a.teams,
        strategies: &a.strategies,
        agents: a.agents,
        mode: a.mode,
        env: a.env,
        silence: a.silence,
        held_out: a.held_out,
        configured: a.config.is_some(),
    };
    let data = a.data.as_deref().context("--team needs --data")?;
    let played = TeamBacktest::prepare(&request, cfg, (data, a.split), &warn)?;
    eprintln!(
        "{} parent orders from the {} split, {} agents each ({}), at {} venue(s)",
        played.orders.len(),
        a.split,
        played.agents,
        played.mode.name(),
        played.venues()
    );
    let bar = crate::progress::Meter::new("team backtest", "orders", played.episodes());
    let t0 = std::time::Instant::now();
    let played = played.play(cfg, &a.output.out, &|n| bar.inc(n));
    bar.finish();
    let (report, episodes) = played?;
    let secs = t0.elapsed().as_secs_f64();
    print!("{}", serl_eval::team_table(&report));
    println!(
        "{episodes} team episodes in {secs:.1}s; report: {}",
        a.output.out.join("report.html").display()
    );
    Ok(ExitCode::SUCCESS)
}
