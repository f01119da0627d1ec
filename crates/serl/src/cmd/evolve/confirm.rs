//! `serl evolve --seeds N --walk-forward`: the confirmation's steps on a
//! spinner as `serl_study::evolve::run` confirms, and its tables printed
//! after.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serl_evolve::{ConfirmReport, ConfirmStep};

/// The confirmation's spinner, drawn at its first step.
#[derive(Default)]
pub struct Spinner(OnceLock<ProgressBar>);

impl Spinner {
    fn bar(&self) -> &ProgressBar {
        self.0.get_or_init(|| {
            let bar = ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{spinner} confirm {elapsed}  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        })
    }

    /// A line for `step`, kept above the spinner.
    pub fn show(&self, step: ConfirmStep) {
        let line = match step {
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
        let bar = self.bar();
        if bar.is_hidden() {
            eprintln!("{line}");
        } else {
            bar.println(&line);
            bar.set_message(line);
        }
    }

    /// Takes the spinner off the terminal, if it was drawn.
    pub fn clear(&self) {
        if let Some(bar) = self.0.get() {
            bar.finish_and_clear();
        }
    }
}

/// The confirmation's tables and where its report is.
pub fn print(report: &ConfirmReport, run_dir: &Path) {
    print!("{}", serl_evolve::confirm_tables(report));
    println!(
        "confirmation: {}",
        run_dir.join("confirm").join("report.html").display()
    );
}
