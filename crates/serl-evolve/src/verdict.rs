//! The run's verdict: how the chosen design did on the test split against
//! plain PPO and the baselines (whole-order PA, paired day by day), and
//! whether the validation ranking held. It is the first thing the report
//! and the terminal say, so that a design that won on validation and lost
//! on test cannot read as a success.

use std::fmt::Write as _;

use serde::Serialize;
use serl_eval::{day_test, DayTest, OrderResult, ReportData};
use serl_report::Table;

use crate::confirm::{BEST, PLAIN};
use crate::run::EvolveOutcome;

/// The chosen design against one reference on the test split.
#[derive(Debug, Clone, Serialize)]
pub struct VerdictRow {
    /// The venue.
    pub env: String,
    /// The reference strategy (`ppo-default`, `twap`, ...).
    pub reference: String,
    /// The chosen design's mean whole-order PA on test, bps.
    pub best_pa: f64,
    /// The reference's, on the same orders.
    pub reference_pa: f64,
    /// The day-level test of the difference (paired, days as the unit).
    pub day: Option<DayTest>,
}

impl VerdictRow {
    /// "won", "lost" or "no clear difference", from the day-level CI.
    pub fn word(&self) -> &'static str {
        match &self.day {
            Some(t) if t.too_few_days() => "too few days to tell",
            Some(t) if t.mean_day_diff.lo > 0.0 => "better",
            Some(t) if t.mean_day_diff.hi < 0.0 => "worse",
            _ => "no clear difference",
        }
    }
}

/// The verdict of a run whose test was played.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The chosen design's validation score and plain PPO's.
    pub validation: (f64, f64),
    /// One row per venue and reference: plain PPO first, then TWAP and
    /// the other baselines.
    pub rows: Vec<VerdictRow>,
    /// Whether the test ordered the design and plain PPO as validation
    /// did (static venue, mean whole-order PA); `None` without plain PPO.
    pub ranking_held: Option<bool>,
}

/// The verdict of `outcome`'s test (`data` is its report); `None` while
/// the test is sealed or was not played.
pub fn verdict(outcome: &EvolveOutcome, data: &ReportData) -> Option<Verdict> {
    if outcome.test.is_empty() {
        return None;
    }
    let seed = data.provenance.seed;
    let mut rows = Vec::new();
    for s in data.summaries.iter().filter(|s| s.strategy == BEST) {
        let mut refs: Vec<&str> = vec![PLAIN];
        refs.extend(
            data.summaries
                .iter()
                .filter(|r| r.env == s.env && serl_eval::is_baseline(&r.strategy))
                .map(|r| r.strategy.as_str()),
        );
        let of = |name: &str| -> Vec<&OrderResult> {
            outcome
                .test
                .iter()
                .filter(|r| r.env == s.env && r.strategy == name)
                .collect()
        };
        let best = of(BEST);
        for reference in refs {
            let other = of(reference);
            if other.is_empty() {
                continue;
            }
            rows.push(VerdictRow {
                env: s.env.clone(),
                reference: reference.to_string(),
                best_pa: s.pa.mean,
                reference_pa: serl_eval::mean(&other.iter().map(|r| r.pa_bps).collect::<Vec<_>>()),
                day: day_test(&best, &other, seed),
            });
        }
    }
    let validation = (
        outcome.best.score.unwrap_or(0.0),
        outcome.baseline.score.unwrap_or(0.0),
    );
    let ranking_held = rows
        .iter()
        .find(|r| r.env == "static" && r.reference == PLAIN)
        .map(|r| (validation.0 > validation.1) == (r.best_pa > r.reference_pa));
    Some(Verdict {
        validation,
        rows,
        ranking_held,
    })
}

impl Verdict {
    /// The verdict in a few plain lines: the terminal's last words and
    /// the report's first section.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.rows {
            let day = r.day.as_ref().map_or(String::new(), |t| {
                format!(
                    "; daily Δ {} over {} days, won {}",
                    t.mean_day_diff, t.days, t.days_won
                )
            });
            out.push(format!(
                "test ({}): {BEST} {:.2} bps vs {} {:.2} bps: {}{day}",
                r.env,
                r.best_pa,
                r.reference,
                r.reference_pa,
                r.word()
            ));
        }
        if let Some(days) = self.too_few_days() {
            out.push(format!(
                "the test split has {days} day{}: too few for a day-level verdict (at least {}); configs/evolve-standard.toml tests on 6 days",
                if days == 1 { "" } else { "s" },
                serl_eval::MIN_TEST_DAYS
            ));
        }
        let (v_best, v_plain) = self.validation;
        out.push(match self.ranking_held {
            Some(true) => format!(
                "the validation ranking held on test (validation score: {BEST} {v_best:.3}, {PLAIN} {v_plain:.3})"
            ),
            Some(false) => format!(
                "the validation ranking did NOT hold on test (validation score: {BEST} {v_best:.3}, {PLAIN} {v_plain:.3})"
            ),
            None => format!("validation score: {BEST} {v_best:.3}"),
        });
        out
    }

    /// The test's days, when every row spans too few of them for a
    /// day-level verdict (said once, rather than only row by row).
    pub fn too_few_days(&self) -> Option<usize> {
        let days: Vec<&DayTest> = self.rows.iter().filter_map(|r| r.day.as_ref()).collect();
        let all_few = !days.is_empty() && days.iter().all(|t| t.too_few_days());
        all_few.then(|| days.iter().map(|t| t.days).max().unwrap_or(0))
    }

    /// The report's first section.
    pub fn markdown(&self) -> String {
        let mut md = String::from("## Verdict\n\n");
        md.push_str("The chosen design (`serl-best`) on the test split against plain PPO and the baselines, same orders, whole-order PA (docs/metrics.md); the difference is paired and tested with the day as the unit (bootstrap CI over days).\n\n");
        let mut t = Table::new([
            "env",
            "against",
            "serl-best PA (bps)",
            "its PA (bps)",
            "daily ΔPA [95% CI]",
            "days won",
            "verdict",
        ])
        .right([2, 3]);
        for r in &self.rows {
            let (ci, won) = r.day.as_ref().map_or(("-".into(), "-".into()), |t| {
                (
                    t.mean_day_diff.to_string(),
                    format!("{} of {}", t.days_won, t.days),
                )
            });
            t.row([
                r.env.to_string(),
                r.reference.to_string(),
                format!("{:.2}", r.best_pa),
                format!("{:.2}", r.reference_pa),
                ci,
                won,
                r.word().to_string(),
            ]);
        }
        md.push_str(&t.markdown());
        let mut lines = self.lines();
        let last = lines.pop().unwrap_or_default();
        let mut said = format!("{}{}.", last[..1].to_uppercase(), &last[1..]);
        if self.too_few_days().is_some() {
            let few = lines.pop().unwrap_or_default();
            said = format!("{}{}. {said}", few[..1].to_uppercase(), &few[1..]);
        }
        let _ = writeln!(md, "\n{said}\n");
        md
    }
}
