//! `serl bench team`: how a team's cost grows with its size. For N = 2,
//! 4, 8 and 16 agents: joint steps per second of one team episode in the
//! dynamic market (every member stepped at once), and MAPPO training steps
//! per second with its updates; and the peak memory while the team of 16
//! runs. The measuring is `serl_train::bench::team_figures`; this prints.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use serl_train::bench::TeamFigures;

/// Measures the team figures on the data at `data`, medians of `runs`, and
/// prints them as a table or (`json`) JSON.
pub fn team(data: &Path, runs: usize, json: bool) -> Result<ExitCode> {
    let f = serl_train::bench::team_figures(data, runs)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        print_figures(&f);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_figures(f: &TeamFigures) {
    println!("{}", f.setup);
    println!(
        "{:>7} {:>16} {:>16} {:>18} {:>16}",
        "agents", "joint steps/s", "agent steps/s", "train steps/s", "cost vs linear"
    );
    for r in &f.rows {
        println!(
            "{:>7} {:>16.0} {:>16.0} {:>18.0} {:>16.2}",
            r.agents,
            r.joint_steps_per_second,
            r.agent_steps_per_second,
            r.train_steps_per_second,
            r.cost_vs_linear
        );
    }
    if let Some(m) = f.peak_rss_mb {
        println!("peak memory during the team of 16: {m:.0} MB (the loaded data included)");
    }
    println!(
        "medians of {} runs; one team per thread for the joint steps",
        f.runs
    );
}
