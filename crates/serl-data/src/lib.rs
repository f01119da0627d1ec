//! # serl-data: historical intraday bars
//!
//! This crate is the bottom of serl's one-way data flow
//! (data → market → env → train/eval → evolve → cli). It turns minute-bar
//! files of US stocks into one typed, validated in-memory form,
//! [`Session`]: one symbol's regular session on one date, stored
//! column-wise, with every defect met on the way reported as a [`Problem`].
//!
//! ## How the pieces connect
//!
//! 1. **Config.** [`DataConfig`] (TOML, usually the `[data]` table of a run
//!    config; [`DataConfig::from_file`] / [`DataConfig::from_toml`]) holds
//!    the CSV column names ([`ColumnMapping`]), the regular session
//!    (09:30–16:00 by default) and what to do with missing minutes
//!    ([`SessionConfig`], [`MissingMinutes`]), the [`ErrorPolicy`], the split
//!    rules ([`SplitConfig`]) and the statistics windows ([`StatsConfig`]).
//! 2. **Scan / load.** [`scan`] finds the files under a path (generic CSV or
//!    CSV.gz with a `timestamp` or `date` + `ToD` layout, Parquet with the
//!    same column mapping, and QuantConnect
//!    LEAN `SYMBOL/YYYYMMDD_trade.zip` with optional `_quote.zip`) and reads
//!    them in parallel, one file per rayon task, collecting every problem;
//!    [`load`] does the same and then applies the [`ErrorPolicy`].
//! 3. **Clean.** Every reader's rows go through the same rules: bars outside
//!    the session are dropped, bad prices and volumes drop their row, rows
//!    are sorted, duplicates are dropped and missing minutes counted or
//!    filled. Nothing is repaired silently: each defect becomes a
//!    [`Problem`] with file, line and field ([`ProblemKind`], [`Severity`]).
//! 4. **Bars.** The result is a [`Dataset`]: [`Session`]s sorted by
//!    (symbol, date), the problems, and a [`FileReport`] per file. Prices
//!    are in dollars (LEAN's integer 1/10 000 dollars are converted),
//!    volumes in shares, and a bar's `minute` counts
//!    minutes after midnight, so 09:30 is 570 ([`format_minute`],
//!    [`parse_time_minute`]). Where a bar has no VWAP, its minute price is
//!    the typical price (H+L+C)/3 ([`Session::minute_price`]).
//! 5. **Catalog and statistics.** [`Catalog`] summarises a dataset for
//!    `serl data inspect` ([`Catalog::scan`] a symbol at a time, in bounded
//!    memory; [`convert`] writes a cleaned Parquet copy the same way, one
//!    file per symbol, with [`write_sessions`]); [`SessionStats`] ([`Dataset::session_stats`],
//!    [`session_stats`]) holds the per-session statistics (volume, ADV,
//!    intraday profile, volatility, spread, price level) that calibration,
//!    environments and baselines use, computed without looking ahead.
//! 6. **Split.** [`Splits`] cuts the distinct dates into train / validation /
//!    test, by explicit end dates or by fractions; [`Split`] names one part
//!    and [`Dataset::split_sessions`] selects its sessions.
//!
//! ```
//! use serl_data::{load, Catalog, DataConfig, Split};
//!
//! // A tiny CSV: two minutes on each of three days, and one pre-market bar.
//! let dir = std::env::temp_dir().join(format!("serl-data-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let mut csv = String::from("timestamp,open,high,low,close,volume\n");
//! for day in ["2018-02-14", "2018-02-15", "2018-02-16"] {
//!     csv += &format!("{day} 09:00:00,10.0,10.0,10.0,10.0,5\n");
//!     csv += &format!("{day} 09:30:00,10.0,10.2,9.9,10.1,100\n");
//!     csv += &format!("{day} 09:31:00,10.1,10.3,10.0,10.2,300\n");
//! }
//! std::fs::write(dir.join("AAPL.csv"), csv)?;
//!
//! let cfg = DataConfig::from_toml("[session]\nclose = \"09:32\"").unwrap();
//! let ds = load(&dir, &cfg)?;
//! let s = &ds.sessions[0];
//! assert_eq!((&*s.symbol, s.len()), ("AAPL", 2));
//! assert_eq!(serl_data::format_minute(s.minute[0]), "09:30");
//! assert!((s.minute_price(0) - (10.2 + 9.9 + 10.1) / 3.0).abs() < 1e-12);
//!
//! let catalog = Catalog::new(&dir, &ds, &cfg);
//! assert_eq!((catalog.symbols, catalog.symbol_sessions), (1, 3));
//! assert_eq!(catalog.bars_outside_session, 3);
//!
//! let stats = ds.session_stats(&cfg.session, &cfg.stats);
//! assert_eq!(stats[2].adv, Some(400.0));
//! let test = ds.split_sessions(Split::Test, &cfg.splits);
//! assert_eq!(test[0].date.to_string(), "2018-02-16");
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

mod bars;
mod catalog;
mod config;
mod convert;
mod csv;
mod dbn_bars;
mod dbn_records;
mod dbn_write;
mod error;
mod lean;
mod load;
mod parquet;
mod plant;
mod raw;
mod scale;
mod split;
mod stats;
mod stream;
mod threads;
mod time;

pub use bars::{Dataset, FileReport, QuoteBars, Session};
pub use catalog::{Catalog, MissingMinutesSession, ProblemCount, SymbolSummary};
pub use config::{
    ColumnMapping, DataConfig, ErrorPolicy, MissingMinutes, PolicyConfig, SessionConfig,
    SplitConfig, StatsConfig,
};
pub use convert::{convert, ConvertReport};
#[doc(hidden)]
pub use dbn_bars::dbn_bars_read;
#[doc(hidden)]
pub use dbn_bars::dbn_records_decoded;
pub use dbn_write::write_dbn_bars;
pub use error::{DataError, Problem, ProblemKind, Severity};
pub use load::{load, scan};
pub use parquet::write_sessions;
pub use plant::{
    forward_returns_bps, plant, read_plant_manifest, PlantConfig, PlantReport, PLANT_MANIFEST,
};
pub use scale::{scale_fixture, ScaleConfig, ScaleReport, SCALE_MANIFEST};
pub use split::{Split, Splits};
pub use stats::{
    historical_profile, realized_vol, session_stats, spread_estimate, volume_profile, SessionStats,
    SpreadSource,
};
pub use time::{format_minute, parse_time_minute};
