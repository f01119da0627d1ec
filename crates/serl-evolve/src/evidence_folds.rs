//! The folded evidence (`[evolve.select] folds`): the finalists and plain
//! PPO scored fold by fold over every non-test day, and the Reality Check
//! over the finalists on the days that did not pick them (the validation
//! days did). Computed from the evidence rows alone, like the rest of
//! `evidence.json`.

use std::collections::BTreeSet;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serl_eval::evidence::{day_matrix, name_with_role, names_with_role, EvidenceRow};
use serl_eval::selection::{self, Spa};

use crate::select::SelectConfig;

/// The role of a finalist's rows scored fold by fold.
pub const FOLD_ROLE: &str = "fold";
/// The role of plain PPO's rows scored fold by fold.
pub const FOLD_PLAIN_ROLE: &str = "fold_plain";
/// The prefix of a folded design's name in the rows (`fold:<key>`).
pub const FOLD_PREFIX: &str = "fold:";

/// What the folds say of the finalists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FoldedEvidence {
    /// Blocks of days.
    pub folds: usize,
    /// Trainings of each design per fold, averaged.
    #[serde(default = "one")]
    pub seeds: usize,
    /// Finalists scored fold by fold (the N of the folded test).
    pub designs: usize,
    /// Non-test days that did not pick the finalists, scored by a fold
    /// that never trained on them.
    pub days: usize,
    /// Median daily sd of a finalist's difference from plain PPO there,
    /// bps.
    pub sigma_d: Option<f64>,
    /// The smallest daily edge a paired test finds on these days, bps.
    pub min_detectable_edge: Option<f64>,
    /// The chosen design's mean daily edge over plain PPO there, bps
    /// (`None` where it is not a finalist).
    pub chosen_edge: Option<f64>,
    /// Days it beat plain PPO there.
    pub chosen_days_won: usize,
    /// White's Reality Check (and Hansen's SPA) over the finalists there.
    pub spa: Option<Spa>,
}

fn one() -> usize {
    1
}

/// The name of a folded finalist's rows.
pub fn fold_name(key: &str) -> String {
    format!("{FOLD_PREFIX}{key}")
}

/// The folded evidence in `rows`, on the days plain PPO's validation rows
/// do not cover; `None` where the rows hold no folds.
pub(crate) fn assess_folds(
    rows: &[EvidenceRow],
    chosen: &str,
    settings: &SelectConfig,
    seed: u64,
    validation_days: &BTreeSet<NaiveDate>,
) -> Option<FoldedEvidence> {
    let plain = name_with_role(rows, FOLD_PLAIN_ROLE)?;
    let names = names_with_role(rows, FOLD_ROLE);
    let unpicked: Vec<EvidenceRow> = rows
        .iter()
        .filter(|r| r.role == FOLD_ROLE || r.role == FOLD_PLAIN_ROLE)
        .filter(|r| !validation_days.contains(&r.date))
        .cloned()
        .collect();
    let m = day_matrix(&unpicked, &names, &plain)?;
    let days = m.days();
    let sigma_d = m.sigma_d();
    let chosen_row = names.iter().position(|n| *n == fold_name(chosen));
    let chosen_diffs = chosen_row.map(|k| m.diffs[k].clone()).unwrap_or_default();
    Some(FoldedEvidence {
        folds: settings.folds,
        seeds: settings.seeds,
        designs: names.len(),
        days,
        sigma_d,
        min_detectable_edge: sigma_d.and_then(|sd| {
            selection::min_detectable_edge(sd, days, settings.alpha, settings.power)
        }),
        chosen_edge: chosen_row.map(|k| m.means()[k]),
        chosen_days_won: chosen_diffs.iter().filter(|&&d| d > 0.0).count(),
        spa: selection::spa_test(&m, fold_block(settings, days), settings.reps, seed),
    })
}

/// The bootstrap's mean block on the folded days: at least a fold's
/// length. A fold's days share one training of each design and of plain
/// PPO, so its daily differences move together (a fold whose plain PPO
/// trained badly shows every finalist ahead on all its days); resampling
/// those days one by one would take them for independent evidence.
fn fold_block(settings: &SelectConfig, days: usize) -> f64 {
    settings
        .mean_block
        .max(days as f64 / settings.folds.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, role: &str, day: u32, pa: f64) -> EvidenceRow {
        EvidenceRow {
            name: name.into(),
            role: role.into(),
            date: NaiveDate::from_ymd_opt(2018, 3, day).unwrap(),
            symbol: "X".into(),
            pa_bps: pa,
            orders: 1,
        }
    }

    /// Two finalists over 12 folded days, the last 2 of them validation
    /// days that picked them (where `fold:b` is far ahead): the test runs
    /// on the other 10, where `fold:a` leads by 1 bps every day.
    #[test]
    fn the_folded_test_leaves_out_the_days_that_picked_the_finalists() {
        let mut rows = Vec::new();
        for day in 1..=12 {
            let picked = day > 10;
            let wobble = if day % 2 == 0 { 0.2 } else { -0.2 };
            rows.push(row("fold:baseline", FOLD_PLAIN_ROLE, day, 0.0));
            rows.push(row("fold:a", FOLD_ROLE, day, 1.0 + wobble));
            rows.push(row(
                "fold:b",
                FOLD_ROLE,
                day,
                if picked { 50.0 } else { wobble },
            ));
            rows.push(row("baseline", "plain", day, 0.0));
        }
        let validation: BTreeSet<NaiveDate> = (11..=12)
            .map(|d| NaiveDate::from_ymd_opt(2018, 3, d).unwrap())
            .collect();
        let cfg = SelectConfig {
            folds: 4,
            finalists: 2,
            ..SelectConfig::default()
        };
        let f = assess_folds(&rows, "a", &cfg, 1, &validation).unwrap();
        assert_eq!((f.designs, f.days, f.folds), (2, 10, 4));
        assert!((f.chosen_edge.unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(f.chosen_days_won, 10);
        assert!(f.spa.unwrap().p_value() < 0.05);
        let b = assess_folds(&rows, "b", &cfg, 1, &validation).unwrap();
        assert!(
            b.chosen_edge.unwrap().abs() < 1e-9,
            "b's picked days are left out"
        );
        assert!(assess_folds(&rows[3..4], "a", &cfg, 1, &validation).is_none());
    }
}
