//! Rolling windows for a walk-forward evaluation: a policy trained on each
//! window and tested on the sessions after it, so that every test day is
//! out of sample for the policy that trades it.
//!
//! Window k trains on `train_days` sessions (the last `validation_days` of
//! them select the checkpoint), then trades the next `test_days`; the next
//! window starts `test_days` later. `serl train --walk-forward` and
//! `serl evolve --resume DIR --walk-forward` both cut their windows here.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serl_env::ParentOrder;

/// `[walk_forward]` of a train or an evolve config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WalkForwardConfig {
    /// Sessions a window trains on, validation included.
    pub train_days: usize,
    /// The last sessions of the window, which select the checkpoint.
    pub validation_days: usize,
    /// Sessions traded after each window (a week), and the step between
    /// windows.
    pub test_days: usize,
    /// Baselines every window's test days are also traded with.
    pub baselines: Vec<String>,
}

impl Default for WalkForwardConfig {
    fn default() -> Self {
        WalkForwardConfig {
            train_days: 12,
            validation_days: 2,
            test_days: 5,
            baselines: vec!["twap".into(), "vwap".into()],
        }
    }
}

/// One rolling window's dates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Its number, from 0.
    pub index: usize,
    /// Training sessions.
    pub train: Vec<NaiveDate>,
    /// Validation sessions (the window's last).
    pub validation: Vec<NaiveDate>,
    /// The sessions after it that its policy trades.
    pub test: Vec<NaiveDate>,
}

impl Window {
    /// Its training sessions, validation included: "first .. last".
    pub fn train_span(&self) -> String {
        span(
            &self.train[0],
            self.validation.last().unwrap_or(&self.train[0]),
        )
    }

    /// The sessions its policy trades: "first .. last".
    pub fn test_span(&self) -> String {
        span(&self.test[0], &self.test[self.test.len() - 1])
    }
}

fn span(first: &NaiveDate, last: &NaiveDate) -> String {
    format!("{first} .. {last}")
}

/// The windows over sorted distinct `dates`: as many as leave at least one
/// test day. The error says which setting is wrong or how few sessions
/// there are; the caller prefixes the table's name.
pub fn windows(dates: &[NaiveDate], cfg: &WalkForwardConfig) -> Result<Vec<Window>, String> {
    if cfg.test_days == 0 || cfg.validation_days == 0 || cfg.train_days <= cfg.validation_days {
        return Err(format!(
            "needs test_days ≥ 1, validation_days ≥ 1 and train_days > validation_days (got {}, {}, {})",
            cfg.test_days, cfg.validation_days, cfg.train_days
        ));
    }
    let mut out = Vec::new();
    let mut start = 0;
    while start + cfg.train_days < dates.len() {
        let fit = start + cfg.train_days - cfg.validation_days;
        let end = start + cfg.train_days;
        out.push(Window {
            index: out.len(),
            train: dates[start..fit].to_vec(),
            validation: dates[fit..end].to_vec(),
            test: dates[end..(end + cfg.test_days).min(dates.len())].to_vec(),
        });
        start += cfg.test_days;
    }
    if out.is_empty() {
        return Err(format!(
            "needs more than train_days = {} sessions, to leave a test day; the orders fall on {}",
            cfg.train_days,
            dates.len()
        ));
    }
    Ok(out)
}

/// The sorted distinct sessions `orders` fall on (with `[orders] symbols`,
/// a symbol's history may be shorter than the dataset's).
pub fn order_dates(orders: &[ParentOrder]) -> Vec<NaiveDate> {
    let mut dates: Vec<NaiveDate> = orders.iter().map(|o| o.date).collect();
    dates.sort_unstable();
    dates.dedup();
    dates
}

/// The orders of `all` that fall on `dates`.
pub fn orders_on(all: &[ParentOrder], dates: &[NaiveDate]) -> Vec<ParentOrder> {
    all.iter()
        .filter(|o| dates.contains(&o.date))
        .cloned()
        .collect()
}

/// One window with its orders, as [`run_windows`] hands it to a step.
#[derive(Debug, Clone)]
pub struct WindowOrders {
    /// Its dates.
    pub window: Window,
    /// Orders on its training sessions.
    pub train: Vec<ParentOrder>,
    /// Orders on its validation sessions.
    pub validation: Vec<ParentOrder>,
    /// Orders on the sessions after it.
    pub test: Vec<ParentOrder>,
}

/// What one window gave: its dates, how many orders it trained and
/// tested on, and what the step made of it (flattened into the window's
/// record when serialized).
#[derive(Debug, Clone, Serialize)]
pub struct WindowRun<T> {
    /// Its dates.
    pub window: Window,
    /// Orders it trained on (validation not counted).
    pub train_orders: usize,
    /// Orders it was tested on.
    pub test_orders: usize,
    /// What the step made of it.
    #[serde(flatten)]
    pub outcome: T,
}

/// The windows of `cfg` over the sessions of `all`, each with its orders.
/// The error names the setting or the window that is wrong; the caller
/// prefixes the table's name.
pub fn cut(all: &[ParentOrder], cfg: &WalkForwardConfig) -> Result<Vec<WindowOrders>, String> {
    windows(&order_dates(all), cfg)?
        .into_iter()
        .map(|w| {
            let (train, validation, test) = (
                orders_on(all, &w.train),
                orders_on(all, &w.validation),
                orders_on(all, &w.test),
            );
            if train.is_empty() || validation.is_empty() || test.is_empty() {
                return Err(format!(
                    "window {} has {} train, {} validation and {} test orders; every window needs all three (check [orders] symbols and the dates)",
                    w.index,
                    train.len(),
                    validation.len(),
                    test.len()
                ));
            }
            Ok(WindowOrders {
                window: w,
                train,
                validation,
                test,
            })
        })
        .collect()
}

/// The walk-forward driver of `serl train --walk-forward` and `serl evolve
/// --walk-forward`: runs `step` on each window [`cut`] gave (so every
/// window was checked before the first trains), in order, with the number
/// of windows.
pub fn run_windows<T, E>(
    windows: Vec<WindowOrders>,
    mut step: impl FnMut(&WindowOrders, usize) -> Result<T, E>,
) -> Result<Vec<WindowRun<T>>, E> {
    let n = windows.len();
    let mut out = Vec::with_capacity(n);
    for w in windows {
        let outcome = step(&w, n)?;
        out.push(WindowRun {
            train_orders: w.train.len(),
            test_orders: w.test.len(),
            window: w.window,
            outcome,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn days(n: u32) -> Vec<NaiveDate> {
        (1..=n)
            .map(|d| NaiveDate::from_ymd_opt(2018, 1, d).unwrap())
            .collect()
    }

    #[test]
    fn windows_roll_by_the_test_length_and_never_test_a_day_they_trained_on() {
        let cfg = WalkForwardConfig::default();
        let w = windows(&days(29), &cfg).unwrap();
        let tested: Vec<usize> = w.iter().map(|w| w.test.len()).collect();
        assert_eq!(tested, [5, 5, 5, 2]);
        for w in &w {
            assert_eq!((w.train.len(), w.validation.len()), (10, 2));
            assert!(w.validation.last() < w.test.first());
        }
        // Every day after the first window's training is tested once.
        let all: Vec<NaiveDate> = w.iter().flat_map(|w| w.test.clone()).collect();
        assert_eq!(all, days(29)[12..]);
        assert!(windows(&days(12), &cfg).is_err());
    }

    #[test]
    fn a_window_setting_that_cannot_work_is_named() {
        let cfg = WalkForwardConfig {
            validation_days: 12,
            ..WalkForwardConfig::default()
        };
        let e = windows(&days(29), &cfg).unwrap_err();
        assert!(e.contains("train_days > validation_days"), "{e}");
    }

    #[test]
    fn the_driver_hands_each_window_its_own_orders_and_counts_them() {
        let orders: Vec<ParentOrder> = days(20)
            .into_iter()
            .enumerate()
            .flat_map(|(k, date)| {
                (0..2).map(move |j| ParentOrder {
                    id: (2 * k + j) as u64,
                    symbol: "AAPL".into(),
                    date,
                    side: serl_env::OrderSide::Buy,
                    qty: 100.0,
                    start_minute: 0,
                    end_minute: 390,
                })
            })
            .collect();
        let cfg = WalkForwardConfig::default();
        let windows = cut(&orders, &cfg).unwrap();
        let runs = run_windows(windows, |w, n| -> Result<(usize, usize), String> {
            assert!(w.test.iter().all(|o| w.window.test.contains(&o.date)));
            Ok((w.validation.len(), n))
        })
        .unwrap();
        let counts: Vec<(usize, usize, usize)> = runs
            .iter()
            .map(|r| (r.train_orders, r.test_orders, r.outcome.0))
            .collect();
        assert_eq!(counts, [(20, 10, 4), (20, 6, 4)]);
        assert!(runs.iter().all(|r| r.outcome.1 == 2));
        let short = cut(&orders[..20], &cfg);
        assert!(short.unwrap_err().starts_with("needs more"));
    }
}
