//! Progress in a log. indicatif draws nothing when stderr is not a
//! terminal (`serl train … 2> run.log`, a Slurm job), so a long run
//! there would say nothing until it ends; [`PlainProgress`] writes a plain
//! line instead, each time another tenth of the work is done and at least
//! once a minute.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Longest silence between two plain lines while work goes on.
const AT_LEAST_EVERY: Duration = Duration::from_secs(60);
/// Work of unknown length: its first count after this long, …
const COUNT_FIRST: Duration = Duration::from_secs(2);
/// … then one every this long.
const COUNT_EVERY: Duration = Duration::from_secs(10);

/// Plain progress lines on stderr (`train: 40% (4096/10240 steps)  …`).
pub struct PlainProgress {
    label: &'static str,
    unit: &'static str,
    len: u64,
    /// The tenth last written and when.
    last: Mutex<(u64, Instant)>,
}

impl PlainProgress {
    /// Lines for `bar` when it is hidden (stderr is not a terminal); none
    /// when the bar is drawn.
    pub fn for_bar(bar: &ProgressBar, label: &'static str, unit: &'static str) -> Option<Self> {
        bar.is_hidden().then(|| PlainProgress {
            label,
            unit,
            len: bar.length().unwrap_or(0),
            last: Mutex::new((0, Instant::now())),
        })
    }

    /// `pos` units done: a line when a new tenth is reached, the work is
    /// done, or a minute has passed since the last line. Work of unknown
    /// length ([`Meter::counter`]) gets its count once 2 s have passed,
    /// then every 10 s.
    pub fn at(&self, pos: u64, msg: &str) {
        if self.len == 0 {
            return self.count(pos, msg);
        }
        let tenth = (pos * 10).checked_div(self.len).unwrap_or(10);
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        if tenth <= last.0 && last.1.elapsed() < AT_LEAST_EVERY {
            return;
        }
        *last = (tenth.max(last.0), Instant::now());
        eprintln!("{}", self.line(pos, msg));
    }

    /// [`PlainProgress::at`] for work of unknown length; `last.0`
    /// counts the lines written.
    fn count(&self, pos: u64, msg: &str) {
        let Ok(mut last) = self.last.lock() else {
            return;
        };
        let wait = if last.0 == 0 {
            COUNT_FIRST
        } else {
            COUNT_EVERY
        };
        if last.1.elapsed() < wait {
            return;
        }
        *last = (last.0 + 1, Instant::now());
        eprintln!("{}", self.line(pos, msg));
    }

    fn line(&self, pos: u64, msg: &str) -> String {
        if self.len == 0 {
            let mut line = format!("{}: {pos} {}", self.label, self.unit);
            if !msg.is_empty() {
                line.push_str("  ");
                line.push_str(msg);
            }
            return line;
        }
        let pct = (pos * 100).checked_div(self.len).unwrap_or(100);
        let mut line = format!("{}: {pct}% ({pos}/{} {})", self.label, self.len, self.unit);
        if !msg.is_empty() {
            line.push_str("  ");
            line.push_str(msg);
        }
        line
    }
}

/// Progress of one long piece of work: a bar on a terminal, plain lines
/// ([`PlainProgress`]) otherwise, so no command that runs for more than
/// a moment is silent in a log.
pub struct Meter {
    bar: ProgressBar,
    label: &'static str,
    unit: &'static str,
    plain: Mutex<Option<PlainProgress>>,
    message: Mutex<String>,
}

impl Meter {
    /// A meter of `len` `unit`s (0: not known yet, [`Meter::set_length`]).
    pub fn new(label: &'static str, unit: &'static str, len: u64) -> Meter {
        let template = format!("{label} {{bar:30}} {{pos}}/{{len}} {unit}, eta {{eta}}  {{msg}}");
        let style = ProgressStyle::with_template(&template)
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        Meter::of(ProgressBar::new(len).with_style(style), label, unit)
    }

    /// A meter of work whose length is not known (files converted): a
    /// spinner with the count on a terminal, the count now and then in a
    /// log.
    pub fn counter(label: &'static str, unit: &'static str) -> Meter {
        let template = format!("{{spinner}} {label} {{pos}} {unit}, {{per_sec}}, {{elapsed}}");
        let style = ProgressStyle::with_template(&template)
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        Meter::of(ProgressBar::new_spinner().with_style(style), label, unit)
    }

    /// A meter around `bar`, with plain lines where it draws nothing.
    fn of(bar: ProgressBar, label: &'static str, unit: &'static str) -> Meter {
        let plain = PlainProgress::for_bar(&bar, label, unit);
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
        self.bar.set_length(len);
        if let Ok(mut p) = self.plain.lock() {
            *p = PlainProgress::for_bar(&self.bar, self.label, self.unit);
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
        let Ok(plain) = self.plain.lock() else {
            return;
        };
        if let Some(p) = plain.as_ref() {
            let msg = self.message.lock().map(|m| m.clone()).unwrap_or_default();
            p.at(self.bar.position(), &msg);
        }
    }

    /// A line above the bar (the bar is cleared first).
    pub fn say(&self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }

    /// The work is over: the bar goes.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_the_share_done_and_the_units() {
        let p = PlainProgress {
            label: "train",
            unit: "steps",
            len: 10240,
            last: Mutex::new((0, Instant::now())),
        };
        assert_eq!(p.line(4096, ""), "train: 40% (4096/10240 steps)");
        assert_eq!(p.line(0, "loss 1"), "train: 0% (0/10240 steps)  loss 1");
        let files = PlainProgress {
            label: "convert",
            unit: "files",
            len: 0,
            last: Mutex::new((0, Instant::now())),
        };
        assert_eq!(files.line(12, ""), "convert: 12 files");
    }
}
