//! [`ProgressLines`]: progress as plain lines, for a log. A progress bar
//! draws nothing where its output is not a terminal (`serl train … 2>
//! run.log`, a Slurm job), so a long run there would say nothing until it
//! ends; these lines say how far it is, each time another tenth of the
//! work is done and at least once a minute.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest silence between two lines while work goes on.
const AT_LEAST_EVERY: Duration = Duration::from_secs(60);
/// Work of unknown length: its first count after this long, …
const COUNT_FIRST: Duration = Duration::from_secs(2);
/// … then one every this long.
const COUNT_EVERY: Duration = Duration::from_secs(10);

/// When a progress line is due, and what it says (`train: 40%
/// (4096/10240 steps)  …`, or `convert: 12 files` for work of unknown
/// length).
///
/// ```
/// let lines = serl_report::ProgressLines::new("train", "steps", 10240);
/// // The first tenth reached: a line; the same tenth again: none.
/// assert_eq!(lines.at(1024, "").as_deref(), Some("train: 10% (1024/10240 steps)"));
/// assert_eq!(lines.at(1100, ""), None);
/// ```
pub struct ProgressLines {
    label: &'static str,
    unit: &'static str,
    len: u64,
    /// The tenth last written (or the lines written, for work of unknown
    /// length) and when.
    last: Mutex<(u64, Instant)>,
}

impl ProgressLines {
    /// Lines for `len` `unit`s of work named `label` (`len` 0: a count of
    /// work whose length is not known).
    pub fn new(label: &'static str, unit: &'static str, len: u64) -> Self {
        ProgressLines {
            label,
            unit,
            len,
            last: Mutex::new((0, Instant::now())),
        }
    }

    /// `pos` units done, `msg` under way: the line when one is due (a new
    /// tenth reached, the work done, or a minute since the last line);
    /// work of unknown length gets its count once 2 s have passed, then
    /// every 10 s.
    pub fn at(&self, pos: u64, msg: &str) -> Option<String> {
        let mut last = self.last.lock().ok()?;
        if self.len == 0 {
            let wait = if last.0 == 0 {
                COUNT_FIRST
            } else {
                COUNT_EVERY
            };
            if last.1.elapsed() < wait {
                return None;
            }
            *last = (last.0 + 1, Instant::now());
            return Some(self.line(pos, msg));
        }
        let tenth = (pos * 10).checked_div(self.len).unwrap_or(10);
        if tenth <= last.0 && last.1.elapsed() < AT_LEAST_EVERY {
            return None;
        }
        *last = (tenth.max(last.0), Instant::now());
        Some(self.line(pos, msg))
    }

    /// The line for `pos` units done, `msg` under way.
    pub fn line(&self, pos: u64, msg: &str) -> String {
        let mut line = if self.len == 0 {
            format!("{}: {pos} {}", self.label, self.unit)
        } else {
            let pct = (pos * 100).checked_div(self.len).unwrap_or(100);
            format!("{}: {pct}% ({pos}/{} {})", self.label, self.len, self.unit)
        };
        if !msg.is_empty() {
            line.push_str("  ");
            line.push_str(msg);
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_the_share_done_and_the_units() {
        let p = ProgressLines::new("train", "steps", 10240);
        assert_eq!(p.line(4096, ""), "train: 40% (4096/10240 steps)");
        assert_eq!(p.line(0, "loss 1"), "train: 0% (0/10240 steps)  loss 1");
        let files = ProgressLines::new("convert", "files", 0);
        assert_eq!(files.line(12, ""), "convert: 12 files");
    }

    #[test]
    fn a_line_is_due_at_each_new_tenth_and_the_end() {
        let p = ProgressLines::new("backtest", "orders", 100);
        let due: Vec<u64> = (1..=100).filter(|&n| p.at(n, "").is_some()).collect();
        assert_eq!(due, [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]);
        // Work of unknown length waits 2 s before its first count.
        assert_eq!(ProgressLines::new("convert", "files", 0).at(3, ""), None);
    }
}
