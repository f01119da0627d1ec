//! The data configuration: column mapping, session hours, error policy,
//! splits and statistics windows. It is read from TOML (see
//! `configs/data.toml`); every field has a default that fits the bundled data.

use std::path::Path;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::DataError;

/// Everything that decides how bar files are read, cleaned, split and
/// summarised: the `[data]` table of a serl config, or a standalone data
/// config file. Missing tables and keys take their defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct DataConfig {
    /// CSV header names (`[columns]`).
    pub columns: ColumnMapping,
    /// Regular-session hours and gap handling (`[session]`).
    pub session: SessionConfig,
    /// What errors do to a load (`[policy]`).
    pub policy: PolicyConfig,
    /// Train / validation / test boundaries (`[splits]`).
    pub splits: SplitConfig,
    /// Statistics windows (`[stats]`).
    pub stats: StatsConfig,
}

impl DataConfig {
    /// Reads a config file; unknown keys and bad values are errors that name
    /// the file and the field.
    pub fn from_file(path: &Path) -> Result<Self, DataError> {
        let text = std::fs::read_to_string(path).map_err(|source| DataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text).map_err(|message| DataError::Config {
            path: path.to_path_buf(),
            message,
        })
    }

    /// Parses and validates TOML text; the error is a message naming the
    /// field.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        // Configs for other crates (env, train, ...) embed a `[data]` table;
        // a standalone data config is that table's contents.
        let cfg: DataConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks what serde cannot: session times are `HH:MM` with the open
    /// before the close, split dates are in order, split fractions are in
    /// [0, 1) and sum below 1, and the statistics windows are at least 1.
    pub fn validate(&self) -> Result<(), String> {
        let (open, close) = (self.session.open_minute()?, self.session.close_minute()?);
        self.session.tz()?;
        if open >= close {
            return Err(format!(
                "session.open ({}) must be before session.close ({})",
                self.session.open, self.session.close
            ));
        }
        if let (Some(a), Some(b)) = (self.splits.train_end, self.splits.validation_end) {
            if a >= b {
                return Err(format!(
                    "splits.train_end ({a}) must be before splits.validation_end ({b})"
                ));
            }
        }
        let f = &self.splits;
        if !(0.0..1.0).contains(&f.train_fraction)
            || !(0.0..1.0).contains(&f.validation_fraction)
            || f.train_fraction + f.validation_fraction >= 1.0
        {
            return Err(
                "splits.train_fraction and splits.validation_fraction must be in [0,1) and sum below 1"
                    .into(),
            );
        }
        if self.stats.adv_lookback == 0 {
            return Err("stats.adv_lookback must be at least 1".into());
        }
        if self.stats.profile_bucket_minutes == 0 {
            return Err("stats.profile_bucket_minutes must be at least 1".into());
        }
        Ok(())
    }
}

/// Which header names hold which field in a generic CSV.
///
/// Either `timestamp` (a `YYYY-MM-DD HH:MM[:SS]` or ISO `T`-separated local
/// time) or both `date` and `time` must be present in a file's header; the
/// loader uses whichever the header has.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ColumnMapping {
    /// Combined date-and-time column (default `timestamp`).
    pub timestamp: String,
    /// Date column, `YYYY-MM-DD`, `YYYY/MM/DD` or `YYYYMMDD` (default
    /// `date`); used with `time` when there is no `timestamp` column.
    pub date: String,
    /// Time-of-day column, `HH:MM[:SS]` with zero seconds (default `ToD`).
    pub time: String,
    /// Opening price column (default `open`).
    pub open: String,
    /// High price column (default `high`).
    pub high: String,
    /// Low price column (default `low`).
    pub low: String,
    /// Closing price column (default `close`).
    pub close: String,
    /// Volume column, in shares (default `volume`).
    pub volume: String,
    /// Optional: when the header lacks it, the minute price is the typical
    /// price (H+L+C)/3.
    pub vwap: String,
    /// Optional: a symbol column. Without it the symbol comes from the file
    /// name (`AAPL.csv.gz`) or, for one file per day, the parent folder.
    pub symbol: String,
    /// Optional: a planted forecast of each bar's coming return
    /// (`serl data plant`, default `signal`); designs may read it, plain
    /// PPO does not.
    pub signal: String,
}

impl Default for ColumnMapping {
    fn default() -> Self {
        ColumnMapping {
            timestamp: "timestamp".into(),
            date: "date".into(),
            time: "ToD".into(),
            open: "open".into(),
            high: "high".into(),
            low: "low".into(),
            close: "close".into(),
            volume: "volume".into(),
            vwap: "vwap".into(),
            symbol: "symbol".into(),
            signal: "signal".into(),
        }
    }
}

/// What to do with minutes that have no bar.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MissingMinutes {
    /// Leave the gap; the session's `missing_minutes` counts it.
    #[default]
    Leave,
    /// Insert a flat bar at the previous close with zero volume, flagged in
    /// `Session::filled` and counted in `filled_minutes`.
    Fill,
}

/// The regular trading session: which bars are kept and how gaps in it
/// are handled.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SessionConfig {
    /// Regular session open, exchange local time, `HH:MM`.
    pub open: String,
    /// Regular session close, exchange local time, `HH:MM`.
    pub close: String,
    /// Whether a bar stamped at the close belongs to the session. Alpha
    /// Vantage style files put the closing auction in a 16:00 bar; LEAN bars
    /// are stamped at their start, so LEAN's 16:00 bar is after-hours and is
    /// always dropped.
    pub include_close_bar: bool,
    /// What to do with session minutes that have no bar.
    pub missing_minutes: MissingMinutes,
    /// The exchange's time zone (IANA), for files stamped in UTC (DBN):
    /// their bars are read in it.
    pub timezone: String,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            open: "09:30".into(),
            close: "16:00".into(),
            include_close_bar: true,
            missing_minutes: MissingMinutes::Leave,
            timezone: "America/New_York".into(),
        }
    }
}

fn parse_hhmm(s: &str, field: &str) -> Result<u16, String> {
    crate::time::parse_time_minute(s.as_bytes())
        .ok_or_else(|| format!("{field}: `{s}` is not a time of day HH:MM"))
}

impl SessionConfig {
    /// The open in minutes after midnight (09:30 is 570), or a message if
    /// `open` is not `HH:MM`.
    pub fn open_minute(&self) -> Result<u16, String> {
        parse_hhmm(&self.open, "session.open")
    }
    /// The close in minutes after midnight (16:00 is 960), or a message if
    /// `close` is not `HH:MM`.
    pub fn close_minute(&self) -> Result<u16, String> {
        parse_hhmm(&self.close, "session.close")
    }
    /// The exchange's time zone, or a message if `timezone` is not an IANA
    /// name.
    pub fn tz(&self) -> Result<chrono_tz::Tz, String> {
        self.timezone.parse().map_err(|_| {
            format!(
                "session.timezone: `{}` is not an IANA time zone (America/New_York, Europe/London, …)",
                self.timezone
            )
        })
    }
}

/// What a file with an error-severity problem does to the load.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ErrorPolicy {
    /// Skip the file (or drop the bad rows) with a warning and go on.
    #[default]
    Skip,
    /// Fail the whole load on the first file with an error.
    Fail,
}

impl ErrorPolicy {
    /// Every policy's name, as configs spell it and the command line
    /// lists it (with `-` for `_`).
    pub const NAMES: [&'static str; 2] = ["skip", "fail"];
}

/// How loading a dataset treats errors in the data ([`DataConfig::policy`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Skip or fail on a file with an error-severity problem.
    pub on_error: ErrorPolicy,
}

/// Date boundaries of the train / validation / test splits.
///
/// With explicit dates: train is `date <= train_end`, validation is
/// `train_end < date <= validation_end`, test is the rest. Without them, the
/// distinct session dates are cut by the fractions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SplitConfig {
    /// Last date of the training split (inclusive); used only together
    /// with `validation_end`.
    pub train_end: Option<NaiveDate>,
    /// Last date of the validation split (inclusive); used only together
    /// with `train_end`.
    pub validation_end: Option<NaiveDate>,
    /// Share of the distinct dates that go to training (default 0.6).
    pub train_fraction: f64,
    /// Share of the distinct dates that go to validation (default 0.2);
    /// the rest is test.
    pub validation_fraction: f64,
}

impl Default for SplitConfig {
    fn default() -> Self {
        SplitConfig {
            train_end: None,
            validation_end: None,
            train_fraction: 0.6,
            validation_fraction: 0.2,
        }
    }
}

/// Windows of the per-session statistics ([`crate::SessionStats`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct StatsConfig {
    /// Sessions before the current one that average daily volume uses.
    pub adv_lookback: usize,
    /// Width of the intraday volume-profile buckets, in minutes.
    pub profile_bucket_minutes: u16,
}

impl Default for StatsConfig {
    fn default() -> Self {
        StatsConfig {
            adv_lookback: 5,
            profile_bucket_minutes: 30,
        }
    }
}

#[cfg(test)]
mod names_tests {
    use super::*;

    /// The command line lists [`ErrorPolicy::NAMES`]: each reads as the config
    /// reads it, and every variant is listed in its place (a new one fails
    /// to compile here until it is).
    #[test]
    fn every_error_policy_is_named_as_the_config_names_it() {
        use serde::de::value::{Error, StrDeserializer};
        let index = |v: ErrorPolicy| match v {
            ErrorPolicy::Skip => 0,
            ErrorPolicy::Fail => 1,
        };
        for (i, name) in ErrorPolicy::NAMES.iter().enumerate() {
            let v = ErrorPolicy::deserialize(StrDeserializer::<Error>::new(name)).unwrap();
            assert_eq!(index(v), i, "{name}");
        }
    }
}
