//! # serl-eval: baselines, metrics, backtests and reports
//!
//! How the pieces connect:
//!
//! - Baselines: TWAP, VWAP (look-back volume profile), POV,
//!   Almgren–Chriss, the perfect-foresight oracle and passive TWAP (resting
//!   orders at the touch or the mid, catching up by crossing), each a
//!   [`serl_env::Strategy`]; [`StrategySpec`] parses them by name and a
//!   [`StrategyFactory`] makes fresh instances of one (or of a trained
//!   policy, built by the caller).
//! - Backtests: [`Backtest`] plays every factory's strategy on every
//!   parent order at every [`serl_env::Venue`] (static replay, dynamic
//!   market), in parallel, and returns one [`OrderResult`] per order,
//!   strategy and venue.
//! - Metrics: [`summarize`] turns a group of results into a [`Summary`]
//!   (PA, PA-std, WR, GLR, AFI, fill rate and implementation shortfall,
//!   with bootstrap CIs from [`bootstrap_mean`]); [`paired_diff`] compares
//!   two strategies on the same orders.
//! - Reports: [`ReportData::new`] computes every summary, the paired
//!   differences against TWAP and the [`IllusoryGain`] of static over
//!   dynamic PA; [`write_report`] writes `orders.csv`, `orders.parquet`,
//!   `summary.json`, `report.md` and a self-contained `report.html` with
//!   SVG plots, and [`results_tables`] gives the markdown tables for other
//!   reports.
//! - Selection: [`selection`] tells how far the best of many designs can
//!   be trusted (the edge noise alone gives it, the smallest detectable
//!   edge, PBO by CSCV, the deflated Sharpe ratio, Hansen's SPA test);
//!   [`evidence`] keeps the days × strategies PA it reads in one Parquet
//!   file.
//! - Teams: [`run_team_backtest`] plays [`TeamFactory`]s (a trained team,
//!   or one baseline per member) on parent orders worked by several agents
//!   at once; [`TeamReportData`] summarises each team and member, pairs
//!   strategies order by order, and measures the crowding cost of
//!   splitting an order ([`crowding_cost`]); [`write_team_report`] writes
//!   it.
//! - Walk-forward: [`walk_forward::windows`] cuts the rolling windows a
//!   walk-forward evaluation trains and tests on.

#![deny(missing_docs)]

mod backtest;
mod baselines;
pub mod evidence;
mod horizons;
mod metrics;
mod report;
mod report_data;
pub mod selection;
mod significance;
mod team;
mod team_report;
mod terminal;
pub mod walk_forward;
mod warnings;

pub use backtest::{Backtest, StrategyFactory, EXAMPLE_ORDERS};
pub use baselines::{
    AlmgrenChriss, Oracle, PassiveTwap, Pov, SignalTwap, StrategySpec, Twap, Vwap,
};
pub use horizons::{horizon_label, HorizonRow};
pub use metrics::{
    bootstrap_mean, mean, paired_diff, std_dev, summarize, Estimate, OrderResult, PairedDiff,
    Summary,
};
pub use report::{placement_cells, results_tables, write_report};
pub use report_data::{is_baseline, IllusoryGain, Provenance, ReportData};
pub use significance::{benjamini_hochberg, day_test, wilcoxon_greater, DayTest, MIN_TEST_DAYS};
pub use team::{
    crowding_cost, paired_scores, summarize_teams, NamedVenue, TeamFactory, TeamPaired, TeamResult,
    TeamSummary,
};
pub use team_report::{write_team_report, TeamComparisons, TeamReportData};
pub use terminal::{summary_table, team_table};
pub use warnings::{orders_over_capacity, warnings, AFI_WARNING, IS_LEGEND, LEGEND};
