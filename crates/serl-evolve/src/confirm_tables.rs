//! The confirmation's tables as text, as `serl evolve --seeds --walk-forward`
//! prints them.

use std::fmt::Write as _;

use crate::confirm_report::ConfirmReport;

/// The confirmation's tables as the terminal shows them: the seeds'
/// test PA and day tests, and the walk-forward windows'.
pub fn confirm_tables(r: &ConfirmReport) -> String {
    let mut out = String::new();
    if !r.across_seeds.is_empty() {
        let _ = writeln!(
            out,
            "{:<14} {:>6} {:>22} {:>22} {:>12}",
            "strategy", "seeds", "test PA (mean ± std)", "ΔPA vs TWAP", "above TWAP"
        );
        for a in &r.across_seeds {
            let _ = writeln!(
                out,
                "{:<14} {:>6} {:>22} {:>22} {:>12}",
                a.strategy,
                a.seeds,
                a.pa_text(),
                a.diff_text(),
                format!("{} of {}", a.seeds_above_twap, a.seeds)
            );
        }
        day_tests(&mut out, "the seeds' mean, day by day", &r.seed_tests);
    }
    if !r.windows.is_empty() {
        let _ = writeln!(
            out,
            "{:>6} {:>24} {:>7} {:>26} {:>26}",
            "window", "test days", "orders", "serl-best ΔPA vs TWAP", "ppo-default ΔPA vs TWAP"
        );
        for w in &r.windows {
            let of = |s: &str| w.diff_of(s).map_or("-".into(), |d| d.diff.to_string());
            let _ = writeln!(
                out,
                "{:>6} {:>24} {:>7} {:>26} {:>26}",
                w.window.index,
                w.window.test_span(),
                w.test_orders,
                of(crate::BEST),
                of(crate::PLAIN)
            );
        }
        day_tests(
            &mut out,
            "walk-forward test days, day by day",
            &r.walk_tests,
        );
    }
    out
}

fn day_tests(out: &mut String, title: &str, tests: &[serl_eval::DayTest]) {
    let _ = writeln!(out, "{title}:");
    for t in tests {
        let p = if t.too_few_days() {
            format!(
                "warning: too few days for a p-value (fewer than {})",
                serl_eval::MIN_TEST_DAYS
            )
        } else {
            format!("p {}  q {}", t.p_cell(), t.q_cell())
        };
        let _ = writeln!(
            out,
            "  {:<26} vs {:<26} won {:>2} of {:<2} days  mean {}  {p}",
            t.strategy, t.reference, t.days_won, t.days, t.mean_day_diff
        );
    }
}
