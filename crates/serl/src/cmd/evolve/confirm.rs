//! `serl evolve --seeds N --walk-forward`: the confirmation
//! (`serl_study::confirm`) with a line per step, and its tables printed.

use std::time::Duration;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use serl_eval::Provenance;
use serl_evolve::{ConfirmReport, ConfirmStep};
use serl_study::confirm::Confirming;

/// Retrains, tests and reports; prints the tables.
pub fn run(c: Confirming, provenance: Provenance) -> Result<ConfirmReport> {
    let bar = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} confirm {elapsed}  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    let shown = bar.clone();
    let on_step = move |s: ConfirmStep| {
        let line = match s {
            ConfirmStep::TrainingSeeds { seeds, trainings } => format!(
                "{seeds} seeds: {trainings} trainings of the best design and plain PPO to run"
            ),
            ConfirmStep::TrainingWindow {
                index,
                windows,
                test,
            } => format!(
                "walk-forward window {index} (0 to {}; tests {} .. {}): training",
                windows - 1,
                test.0,
                test.1
            ),
            ConfirmStep::Testing { orders } => format!("testing: {orders} episodes"),
        };
        if shown.is_hidden() {
            eprintln!("{line}");
        } else {
            shown.println(&line);
            shown.set_message(line);
        }
    };
    let run_dir = c.run_dir;
    let report = serl_study::confirm::confirm(c, provenance, &on_step);
    bar.finish_and_clear();
    let report = report?;
    print!("{}", serl_evolve::confirm_tables(&report));
    println!(
        "confirmation: {}",
        run_dir.join("confirm").join("report.html").display()
    );
    Ok(report)
}
