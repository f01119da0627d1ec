//! [`Meter`]: the progress every long command shows. indicatif draws
//! nothing when stderr is not a terminal (`serl train … 2> run.log`, a
//! Slurm job), so there the meter writes `serl_report::ProgressLines`'
//! plain lines instead.

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serl_report::ProgressLines;

/// Progress of one long piece of work: a bar on a terminal, plain lines
/// ([`ProgressLines`]) otherwise, so no command that runs for more than
/// a moment is silent in a log.
pub struct Meter {
    bar: ProgressBar,
    label: &'static str,
    unit: &'static str,
    plain: Mutex<Option<ProgressLines>>,
    message: Mutex<String>,
}

impl Meter {
    /// A meter of `len` `unit`s (0: not known yet, [`Meter::set_length`]):
    /// a bar with the rate and the time left on a terminal.
    pub fn new(label: &'static str, unit: &'static str, len: u64) -> Meter {
        let template = format!(
            "{{spinner}} {label} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{per_sec}}  eta {{eta}}  {{msg}}"
        );
        let style = ProgressStyle::with_template(&template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        Meter::of(ProgressBar::new(len).with_style(style), label, unit, true)
    }

    /// A meter of steps with no count (a confirmation's trainings and
    /// tests): a spinner with the time taken and the step under way on a
    /// terminal; in a log, only the lines it is told to [`Meter::say`].
    pub fn spinner(label: &'static str) -> Meter {
        let template = format!("{{spinner}} {label} {{elapsed}}  {{msg}}");
        let style = ProgressStyle::with_template(&template)
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        let bar = ProgressBar::new_spinner().with_style(style);
        bar.enable_steady_tick(Duration::from_millis(250));
        Meter::of(bar, label, "", false)
    }

    /// A meter of work whose length is not known (files converted): a
    /// spinner with the count on a terminal, the count now and then in a
    /// log.
    pub fn counter(label: &'static str, unit: &'static str) -> Meter {
        let template = format!("{{spinner}} {label} {{pos}} {unit}, {{per_sec}}, {{elapsed}}");
        let style = ProgressStyle::with_template(&template)
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        Meter::of(
            ProgressBar::new_spinner().with_style(style),
            label,
            unit,
            true,
        )
    }

    /// A meter around `bar`, with plain lines where it draws nothing if
    /// `lines`.
    fn of(bar: ProgressBar, label: &'static str, unit: &'static str, lines: bool) -> Meter {
        let plain = plain_lines(&bar, label, unit).filter(|_| lines);
        Meter {
            bar,
            label,
            unit,
            plain: Mutex::new(plain),
            message: Mutex::new(String::new()),
        }
    }

    /// The work is `len` units in all.
    pub fn set_length(&self, len: u64) {
        if self.bar.length() == Some(len) {
            return;
        }
        self.bar.set_length(len);
        // A meter with plain lines (a hidden bar, lines asked for) counts
        // to the new length; one without keeps none.
        if let Ok(mut plain) = self.plain.lock() {
            if let Some(p) = plain.as_mut() {
                *p = ProgressLines::new(self.label, self.unit, len);
            }
        }
    }

    /// What is under way (shown beside the count).
    pub fn set_message(&self, msg: String) {
        if let Ok(mut m) = self.message.lock() {
            m.clone_from(&msg);
        }
        self.bar.set_message(msg);
    }

    /// `n` more units done.
    pub fn inc(&self, n: u64) {
        self.bar.inc(n);
        self.plain_line();
    }

    /// `pos` units done.
    pub fn set_position(&self, pos: u64) {
        self.bar.set_position(pos);
        self.plain_line();
    }

    /// The bar at `pos` at least (work skipped: no line in a log).
    pub fn reach(&self, pos: u64) {
        let len = self.bar.length().unwrap_or(0);
        self.bar.set_position(self.bar.position().max(pos.min(len)));
    }

    /// A plain line for the position now, when one is due.
    fn plain_line(&self) {
        let Ok(plain) = self.plain.lock() else {
            return;
        };
        if let Some(p) = plain.as_ref() {
            let msg = self.message.lock().map(|m| m.clone()).unwrap_or_default();
            if let Some(line) = p.at(self.bar.position(), &msg) {
                eprintln!("{line}");
            }
        }
    }

    /// A line above the bar (the bar is cleared first).
    pub fn say(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    /// The work is over: the bar goes (as it does when the meter drops).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// Plain lines for `bar` when it is hidden (stderr is not a terminal);
/// none when the bar is drawn.
fn plain_lines(
    bar: &ProgressBar,
    label: &'static str,
    unit: &'static str,
) -> Option<ProgressLines> {
    bar.is_hidden()
        .then(|| ProgressLines::new(label, unit, bar.length().unwrap_or(0)))
}
