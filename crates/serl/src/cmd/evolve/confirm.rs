//! `serl evolve --seeds N --walk-forward`: the confirmation's steps on a
//! spinner as `serl_study::evolve::run` confirms, and its tables printed
//! after.

use serl_evolve::{ConfirmReport, ConfirmStep};
use std::path::Path;
use std::sync::OnceLock;

use crate::progress::Meter;

/// The confirmation's spinner, drawn at its first step.
#[derive(Default)]
pub struct Spinner(OnceLock<Meter>);

impl Spinner {
    /// A line for `step`, kept above the spinner.
    pub fn show(&self, step: ConfirmStep) {
        let meter = self.0.get_or_init(|| Meter::spinner("confirm"));
        let line = step.to_string();
        meter.say(&line);
        meter.set_message(line);
    }

    /// Takes the spinner off the terminal, if it was drawn.
    pub fn clear(&self) {
        if let Some(meter) = self.0.get() {
            meter.finish();
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
