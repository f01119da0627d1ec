//! The ablation table: the same evolve run with one part switched off
//! ([`crate::config::Ablation`]), run by the same command and tabulated in
//! the report.
//!
//! `[evolve] ablations = ["no_high_level", "static_only", ...]` makes
//! `serl evolve` run, after the main run, one more run per ablation in
//! `RUN_DIR/ablations/NAME/` with the same seed, data and orders. Each is a
//! full run (its own search, final retraining and test), so its row
//! compares like with like: the best validation score the search found and
//! the retrained design's test PA against TWAP on the same test orders.

use serde::Serialize;
use serl_eval::{paired_diff, Estimate, OrderResult};

use crate::run::EvolveOutcome;

/// One row of the ablation table.
#[derive(Debug, Clone, Serialize)]
pub struct AblationRow {
    /// `full` for the main run, else the ablation's name.
    pub name: String,
    /// What the ablation switches off.
    pub description: String,
    /// The search's best validation score and PA (bps).
    pub best_score: Option<f64>,
    /// The best design's validation PA, bps.
    pub best_validation_pa: Option<f64>,
    /// The retrained best design on the static test split.
    pub test_pa: Option<f64>,
    /// Its paired PA difference against TWAP on the same orders.
    pub test_minus_twap: Option<Estimate>,
    /// Seconds the run took.
    pub secs: f64,
}

impl AblationRow {
    /// The row of a finished run.
    pub fn from_outcome(
        name: &str,
        description: &str,
        out: &EvolveOutcome,
        secs: f64,
        seed: u64,
    ) -> Self {
        let rows = |strategy: &str| -> Vec<&OrderResult> {
            out.test
                .iter()
                .filter(|r| r.env == "static" && r.strategy == strategy)
                .collect()
        };
        let best = rows("serl-best");
        let twap = rows("twap");
        let test_pa = (!best.is_empty())
            .then(|| best.iter().map(|r| r.pa_bps).sum::<f64>() / best.len() as f64);
        AblationRow {
            name: name.to_string(),
            description: description.to_string(),
            best_score: out.best.score,
            best_validation_pa: out.best.validation.as_ref().map(|v| v.pa),
            test_pa,
            test_minus_twap: paired_diff(&best, &twap, seed).map(|p| p.diff),
            secs,
        }
    }
}

/// The Markdown table of the main run and its ablations.
pub fn table(rows: &[AblationRow]) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
    let mut t = serl_report::Table::new([
        "run",
        "what changes",
        "best validation score",
        "best validation PA",
        "test PA (static)",
        "test PA − TWAP [95% CI]",
        "wall s",
    ]);
    for r in rows {
        t.row([
            r.name.to_string(),
            r.description.to_string(),
            opt(r.best_score),
            opt(r.best_validation_pa),
            opt(r.test_pa),
            r.test_minus_twap.map_or("-".to_string(), |e| e.to_string()),
            format!("{:.0}", r.secs),
        ]);
    }
    t.markdown()
}
