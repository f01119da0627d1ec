//! A report's summary as the terminal shows it: the metrics table, the
//! legend, the warnings, and what placement earned.

use std::fmt::Write as _;

use crate::report_data::ReportData;
use crate::team_report::TeamReportData;
use crate::Summary;

/// The metrics table every command that backtests prints, the warnings
/// of its report and the legend of its abbreviations.
pub fn summary_table(data: &ReportData) -> String {
    let mut out = String::new();
    let summaries = &data.summaries;
    let width = |f: &dyn Fn(&Summary) -> usize, least: usize| {
        summaries.iter().map(f).max().unwrap_or(0).max(least)
    };
    let (we, ws) = (width(&|s| s.env.len(), 8), width(&|s| s.strategy.len(), 14));
    let _ = writeln!(
        out,
        "{:<we$} {:<ws$} {:>7} {:>26} {:>9} {:>7} {:>6} {:>6} {:>7}",
        "env", "strategy", "orders", "PA bps [95% CI]", "PA filled", "PA-std", "WR", "GLR", "AFI"
    );
    for s in summaries {
        let _ = writeln!(
            out,
            "{:<we$} {:<ws$} {:>7} {:>26} {:>9.2} {:>7.2} {:>6.3} {:>6} {:>7.4}",
            s.env,
            s.strategy,
            s.orders,
            s.pa.to_string(),
            s.pa_filled,
            s.pa_std,
            s.wr,
            s.glr.map_or("-".into(), |g| format!("{g:.2}")),
            s.afi
        );
    }
    let _ = writeln!(out, "{}", crate::LEGEND);
    for w in crate::warnings(data) {
        let _ = writeln!(out, "warning: {w}");
    }
    placement(&mut out, summaries);
    out
}

/// What placement earned, when any strategy rested orders.
fn placement(out: &mut String, summaries: &[Summary]) {
    if summaries.iter().all(|s| s.placement.passive_share == 0.0) {
        return;
    }
    let _ = writeln!(
        out,
        "\n{:<8} {:<22} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8}",
        "env", "strategy", "passive", "captured", "adv 1m", "adv 5m", "final", "final bp"
    );
    for s in summaries {
        let c = crate::placement_cells(&s.placement);
        let _ = writeln!(
            out,
            "{:<8} {:<22} {:>8} {:>9} {:>8} {:>8} {:>8} {:>8}",
            s.env, s.strategy, c[0], c[1], c[2], c[3], c[4], c[5]
        );
    }
}

/// A team report's tables as the terminal shows them: each team's score
/// and PA, then the paired comparisons and the crowding cost.
pub fn team_table(data: &TeamReportData) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<18} {:<26} {:>7} {:>26} {:>26} {:>7}",
        "env", "team", "orders", "team score [95% CI]", "team PA [95% CI]", "AFI"
    );
    for s in &data.summaries {
        let _ = writeln!(
            out,
            "{:<18} {:<26} {:>7} {:>26} {:>26} {:>7.4}",
            s.team.env,
            s.team.strategy,
            s.team.orders,
            s.score.to_string(),
            s.team.pa.to_string(),
            s.team.afi
        );
    }
    if data.paired.is_empty() && data.crowding.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\n{:<18} {:<52} {:>7} {:>26}",
        "env", "comparison", "orders", "difference [95% CI]"
    );
    for c in data.paired.iter().chain(&data.crowding) {
        let _ = writeln!(
            out,
            "{:<18} {:<52} {:>7} {:>26}",
            c.env,
            c.what,
            c.orders,
            c.diff.to_string()
        );
    }
    out
}
