//! Ablations: the same evolve run with one part switched off, run by the
//! same command and tabulated in the report.
//!
//! `[evolve] ablations = ["no_high_level", "static_only", ...]` makes
//! `serl evolve` run, after the main run, one more run per ablation in
//! `RUN_DIR/ablations/NAME/` with the same seed, data and orders. Each is a
//! full run (its own search, final retraining and test), so its row
//! compares like with like: the best validation score the search found and
//! the retrained design's test PA against TWAP on the same test orders.

use serde::{Deserialize, Serialize};
use serl_eval::{paired_diff, Estimate, OrderResult};
use serl_train::HybridMode;

use crate::run::EvolveOutcome;
use crate::EvolveConfig;

/// One part of SE-RL to switch off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ablation {
    /// No instruction evolution or replay (high-level DEK off).
    NoHighLevel,
    /// No (1+λ)-ES on the best design's constants (low-level DEK off).
    NoLowLevel,
    /// Candidates train in the static replay only.
    StaticOnly,
    /// Candidates train in the dynamic market only.
    DynamicOnly,
    /// α and β fixed instead of adapted.
    FixedWeights,
    /// The builtin offline search instead of the configured LLM (the "no
    /// LLM" ablation; the same as the main run when that is builtin).
    Builtin,
    /// No `[evolve.budget]`: no limits on tokens or seconds, no pre-screen.
    NoBudget,
}

impl Ablation {
    /// Its name in configs and run directories.
    pub fn name(self) -> &'static str {
        match self {
            Ablation::NoHighLevel => "no_high_level",
            Ablation::NoLowLevel => "no_low_level",
            Ablation::StaticOnly => "static_only",
            Ablation::DynamicOnly => "dynamic_only",
            Ablation::FixedWeights => "fixed_weights",
            Ablation::Builtin => "builtin",
            Ablation::NoBudget => "no_budget",
        }
    }

    /// What it switches off, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Ablation::NoHighLevel => "without high-level DEK (instruction evolution and replay)",
            Ablation::NoLowLevel => "without low-level DEK (constant tuning)",
            Ablation::StaticOnly => "trained in the static replay only",
            Ablation::DynamicOnly => "trained in the dynamic market only",
            Ablation::FixedWeights => "fixed loss weights α, β",
            Ablation::Builtin => "builtin designer instead of the LLM",
            Ablation::NoBudget => "no budget: unlimited tokens and seconds, no pre-screen",
        }
    }

    /// The ablated run's config: the main one with this part switched off
    /// (and no ablations of its own).
    pub fn apply(self, cfg: &EvolveConfig) -> EvolveConfig {
        let mut c = cfg.clone();
        c.ablations.clear();
        // The hierarchy rows belong to the main run's report.
        c.hierarchy = None;
        match self {
            Ablation::NoHighLevel => c.high_level = false,
            Ablation::NoLowLevel => c.low_level.enabled = false,
            Ablation::StaticOnly => c.train.hybrid.mode = HybridMode::StaticOnly,
            Ablation::DynamicOnly => c.train.hybrid.mode = HybridMode::DynamicOnly,
            Ablation::FixedWeights => c.train.hybrid.mode = HybridMode::Fixed,
            Ablation::Builtin => {}
            Ablation::NoBudget => c.budget = None,
        }
        c
    }
}

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
    let mut md = String::from(
        "| run | what changes | best validation score | best validation PA | test PA (static) | test PA − TWAP [95% CI] | wall s |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.0} |\n",
            r.name,
            r.description,
            opt(r.best_score),
            opt(r.best_validation_pa),
            opt(r.test_pa),
            r.test_minus_twap.map_or("-".to_string(), |e| e.to_string()),
            r.secs
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ablation_switches_off_exactly_its_part() {
        let mut cfg = EvolveConfig {
            ablations: vec![Ablation::NoHighLevel, Ablation::StaticOnly],
            ..EvolveConfig::default()
        };
        cfg.train.hybrid.mode = HybridMode::Adaptive;
        cfg.budget = Some(crate::BudgetConfig::default());
        let full = cfg.clone();
        for a in [
            Ablation::NoHighLevel,
            Ablation::NoLowLevel,
            Ablation::StaticOnly,
            Ablation::DynamicOnly,
            Ablation::FixedWeights,
            Ablation::Builtin,
            Ablation::NoBudget,
        ] {
            let c = a.apply(&full);
            assert_eq!(
                c.budget.is_none(),
                a == Ablation::NoBudget || full.budget.is_none()
            );
            assert!(c.ablations.is_empty(), "{a:?} would recurse");
            assert_eq!(c.high_level, a != Ablation::NoHighLevel, "{a:?}");
            assert_eq!(c.low_level.enabled, a != Ablation::NoLowLevel, "{a:?}");
            let mode = match a {
                Ablation::StaticOnly => HybridMode::StaticOnly,
                Ablation::DynamicOnly => HybridMode::DynamicOnly,
                Ablation::FixedWeights => HybridMode::Fixed,
                _ => HybridMode::Adaptive,
            };
            assert_eq!(c.train.hybrid.mode, mode, "{a:?}");
            assert_eq!(c.seed, full.seed);
        }
    }

    #[test]
    fn ablation_names_are_what_the_config_spells() {
        let names = [
            "no_high_level",
            "no_low_level",
            "static_only",
            "dynamic_only",
            "fixed_weights",
            "builtin",
            "no_budget",
        ];
        let parsed: Vec<Ablation> =
            serde_json::from_str(&serde_json::to_string(&names).unwrap()).unwrap();
        assert_eq!(parsed.iter().map(|a| a.name()).collect::<Vec<_>>(), names);
        assert!(serde_json::from_str::<Vec<Ablation>>(r#"["no_llm"]"#).is_err());
    }
}
