//! # serl-eval: baselines, metrics, backtests and reports
//!
//! - [`baselines`]: TWAP, VWAP (look-back volume profile), POV,
//!   Almgren–Chriss and the perfect-foresight oracle, each a
//!   [`serl_env::Strategy`]; [`StrategySpec`] parses them by name.
//! - [`backtest`]: [`run_backtest`] plays every strategy on every parent
//!   order in every environment ([`EpisodeRunner`]), in parallel.
//! - [`metrics`]: PA, PA-std, WR, GLR, AFI, fill rate and implementation
//!   shortfall, with bootstrap CIs and paired differences.
//! - [`report`]: `orders.csv`, `summary.json`, `report.md` and a
//!   self-contained `report.html` with SVG plots.

pub mod backtest;
pub mod baselines;
pub mod metrics;
pub mod report;

pub use backtest::{run_backtest, StrategyFactory};
pub use baselines::StrategySpec;
pub use metrics::{
    bootstrap_mean, paired_diff, summarize, Estimate, OrderResult, PairedDiff, Summary,
};
pub use report::{write_report, Provenance, ReportData};
