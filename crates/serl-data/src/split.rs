//! Train / validation / test splits by date.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::bars::{Dataset, Session};
use crate::config::SplitConfig;

/// Which part of the dates a run uses. Parsed from `train`, `validation`
/// (or `valid`, `val`), `test` and `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// The earliest dates, for learning.
    Train,
    /// The dates after training, for model selection.
    Validation,
    /// The latest dates, held out for the final evaluation.
    Test,
    /// Every date.
    All,
}

impl std::str::FromStr for Split {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "train" => Ok(Split::Train),
            "validation" | "valid" | "val" => Ok(Split::Validation),
            "test" => Ok(Split::Test),
            "all" => Ok(Split::All),
            _ => Err(format!(
                "unknown split `{s}`: expected train, validation, test or all"
            )),
        }
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Split::Train => "train",
            Split::Validation => "validation",
            Split::Test => "test",
            Split::All => "all",
        })
    }
}

/// The dates of each split.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Splits {
    /// Training dates, ascending.
    pub train: Vec<NaiveDate>,
    /// Validation dates, ascending, all after the training dates.
    pub validation: Vec<NaiveDate>,
    /// Test dates, ascending, all after the validation dates.
    pub test: Vec<NaiveDate>,
}

impl Splits {
    /// Cuts sorted distinct `dates` by the config's boundaries, or by its
    /// fractions when no boundary is set. Every split gets at least one date
    /// when there are three or more.
    pub fn new(dates: &[NaiveDate], cfg: &SplitConfig) -> Self {
        let (train_end, validation_end) = match (cfg.train_end, cfg.validation_end) {
            (Some(a), Some(b)) => (a, b),
            _ => {
                let n = dates.len();
                if n == 0 {
                    return Splits::default();
                }
                let mut n_train = ((n as f64) * cfg.train_fraction).round() as usize;
                let mut n_val = ((n as f64) * cfg.validation_fraction).round() as usize;
                if n >= 3 {
                    n_train = n_train.clamp(1, n - 2);
                    n_val = n_val.clamp(1, n - 1 - n_train);
                } else {
                    n_train = n_train.min(n);
                    n_val = n_val.min(n - n_train);
                }
                let cut = |k: usize| dates.get(k.wrapping_sub(1)).copied();
                let a = cut(n_train).unwrap_or(NaiveDate::MIN);
                let b = cut(n_train + n_val).unwrap_or(a);
                (a, b)
            }
        };
        let mut s = Splits::default();
        for &d in dates {
            if d <= train_end {
                s.train.push(d);
            } else if d <= validation_end {
                s.validation.push(d);
            } else {
                s.test.push(d);
            }
        }
        s
    }

    /// The dates of `split`, ascending ([`Split::All`]: all three in turn).
    pub fn dates(&self, split: Split) -> Vec<NaiveDate> {
        match split {
            Split::Train => self.train.clone(),
            Split::Validation => self.validation.clone(),
            Split::Test => self.test.clone(),
            Split::All => {
                let mut v = self.train.clone();
                v.extend(&self.validation);
                v.extend(&self.test);
                v
            }
        }
    }

    /// Whether `date` is in `split` ([`Split::All`] contains every date).
    pub fn contains(&self, split: Split, date: NaiveDate) -> bool {
        match split {
            Split::Train => self.train.binary_search(&date).is_ok(),
            Split::Validation => self.validation.binary_search(&date).is_ok(),
            Split::Test => self.test.binary_search(&date).is_ok(),
            Split::All => true,
        }
    }
}

impl Dataset {
    /// The dataset's distinct dates cut by `cfg` (see [`Splits::new`]).
    pub fn splits(&self, cfg: &SplitConfig) -> Splits {
        Splits::new(&self.dates(), cfg)
    }

    /// The sessions whose date falls in `split`.
    pub fn split_sessions(&self, split: Split, cfg: &SplitConfig) -> Vec<&Session> {
        let splits = self.splits(cfg);
        self.sessions
            .iter()
            .filter(|s| splits.contains(split, s.date))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn days(n: u32) -> Vec<NaiveDate> {
        (1..=n)
            .map(|d| NaiveDate::from_ymd_opt(2018, 3, d).unwrap())
            .collect()
    }

    #[test]
    fn fractions_cut_dates_in_order_without_overlap() {
        let s = Splits::new(&days(10), &SplitConfig::default());
        assert_eq!((s.train.len(), s.validation.len(), s.test.len()), (6, 2, 2));
        assert!(s.train.last() < s.validation.first());
        assert!(s.validation.last() < s.test.first());
    }

    #[test]
    fn explicit_boundaries_win_over_fractions() {
        let cfg = SplitConfig {
            train_end: NaiveDate::from_ymd_opt(2018, 3, 3),
            validation_end: NaiveDate::from_ymd_opt(2018, 3, 5),
            ..SplitConfig::default()
        };
        let s = Splits::new(&days(10), &cfg);
        assert_eq!((s.train.len(), s.validation.len(), s.test.len()), (3, 2, 5));
    }

    #[test]
    fn three_dates_give_one_to_each_split() {
        let s = Splits::new(&days(3), &SplitConfig::default());
        assert_eq!((s.train.len(), s.validation.len(), s.test.len()), (1, 1, 1));
    }
}
