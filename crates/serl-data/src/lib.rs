//! # serl-data: historical intraday bars
//!
//! This crate is the bottom of serl's one-way data flow
//! (data → market → env → train/eval → evolve → cli). It turns bar files
//! into one typed, validated in-memory form, [`Session`]: one symbol's
//! regular session on one date, stored column-wise.
//!
//! ## How the pieces connect
//!
//! - [`load`] / [`scan`] find the files under a path and read them in
//!   parallel (rayon, one file per task):
//!   - `csv` reads generic header CSV or CSV.gz with polars, using the column
//!     names in [`ColumnMapping`] (both `timestamp,...` and the split
//!     `date,ToD,...` layout);
//!   - `lean` reads QuantConnect LEAN zipped minute trade and quote bars.
//! - Every reader yields raw rows; `raw` applies the rules common to all:
//!   the regular session (09:30–16:00 by default), value checks, sorting,
//!   duplicate rows and missing minutes ([`MissingMinutes`]). Nothing is
//!   repaired silently: each defect becomes a [`Problem`] with file, line
//!   and field, and the [`ErrorPolicy`] decides whether a file with an
//!   error is skipped or fails the load.
//! - [`Catalog`] summarises a [`Dataset`] for `serl data inspect`;
//!   [`Splits`] cuts it by date into train / validation / test;
//!   [`SessionStats`] holds the per-session statistics (volume, ADV,
//!   intraday profile, volatility, spread, price level) that calibration,
//!   environments and baselines use.
//!
//! Where a bar has no VWAP, its minute price is the typical price
//! (H+L+C)/3 ([`Session::minute_price`]).
//!
//! ```no_run
//! let cfg = serl_data::DataConfig::default();
//! let ds = serl_data::load("data/lean".as_ref(), &cfg)?;
//! let catalog = serl_data::Catalog::new("data/lean".as_ref(), &ds, &cfg);
//! println!("{} symbols, {} sessions", catalog.symbols, catalog.symbol_sessions);
//! # Ok::<(), serl_data::DataError>(())
//! ```

mod bars;
mod catalog;
mod config;
mod csv;
mod error;
mod lean;
mod load;
mod raw;
mod split;
mod stats;
pub mod time;

pub use bars::{Dataset, FileReport, QuoteBars, Session};
pub use catalog::{Catalog, MissingMinutesSession, ProblemCount, SymbolSummary};
pub use config::{
    ColumnMapping, DataConfig, ErrorPolicy, MissingMinutes, PolicyConfig, SessionConfig,
    SplitConfig, StatsConfig,
};
pub use error::{DataError, Problem, ProblemKind, Severity};
pub use load::{load, scan};
pub use split::{Split, Splits};
pub use stats::{
    historical_profile, realized_vol, session_stats, spread_estimate, volume_profile, SessionStats,
    SpreadSource,
};
