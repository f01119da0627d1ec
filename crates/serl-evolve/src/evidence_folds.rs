//! The folded evidence (`[evolve.select] folds`): the finalists and plain
//! PPO scored fold by fold over every non-test day, and on the days that
//! did not pick them (the validation days did) the chosen design tested
//! against plain PPO with the fold as the unit (a clustered t), the
//! Reality Check over the finalists shown beside it. Computed from the
//! evidence rows alone, like the rest of `evidence.json`.

use std::collections::BTreeSet;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serl_eval::evidence::{dated_day_matrix, name_with_role, names_with_role, EvidenceRow};
use serl_eval::selection::{self, ClusteredTest, Spa};

use crate::fold::cut_days;

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
    /// White's Reality Check (and Hansen's SPA) over the finalists there:
    /// shown, not read (on a few blocks of days its bootstrap rejects
    /// noise too often; [`selection::clustered_t_test`]).
    pub spa: Option<Spa>,
    /// The chosen design's daily edge there tested with each fold's days
    /// as one cluster: what the recommendation reads. The days did not
    /// pick it, so it is one test, not the best of several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clustered: Option<ClusteredTest>,
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
    let (dates, m) = dated_day_matrix(&unpicked, &names, &plain)?;
    let days = m.days();
    let sigma_d = m.sigma_d();
    let chosen_row = names.iter().position(|n| *n == fold_name(chosen));
    let chosen_diffs = chosen_row.map(|k| m.diffs[k].clone()).unwrap_or_default();
    let clusters = fold_of_each(rows, &dates, settings.folds);
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
        clustered: clusters.and_then(|c| selection::clustered_t_test(&chosen_diffs, &c)),
    })
}

/// The fold each of `dates` was scored by: the folded rows' days, every
/// non-test day, cut into `folds` blocks as the run cut them
/// ([`crate::fold::day_blocks`]). `None` where a date is in no block.
fn fold_of_each(rows: &[EvidenceRow], dates: &[NaiveDate], folds: usize) -> Option<Vec<usize>> {
    let all: BTreeSet<NaiveDate> = rows
        .iter()
        .filter(|r| r.role == FOLD_ROLE || r.role == FOLD_PLAIN_ROLE)
        .map(|r| r.date)
        .collect();
    let blocks = cut_days(&all.into_iter().collect::<Vec<_>>(), folds);
    dates
        .iter()
        .map(|d| blocks.iter().position(|b| b.contains(d)))
        .collect()
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
        // Blocks of 3 days as the run cut the 12: the 10 unpicked days
        // fall in all 4 folds, and `a` leads in every one.
        let clustered = f.clustered.unwrap();
        assert_eq!(clustered.clusters, 4);
        assert!((clustered.mean - 1.0).abs() < 1e-9);
        assert!(clustered.p_value < 0.01, "{clustered:?}");
        let b = assess_folds(&rows, "b", &cfg, 1, &validation).unwrap();
        assert!(
            b.chosen_edge.unwrap().abs() < 1e-9,
            "b's picked days are left out"
        );
        assert!(assess_folds(&rows[3..4], "a", &cfg, 1, &validation).is_none());
    }

    /// A finalist that leads by 3 bps on one fold's days and not at all on
    /// the others: ahead on the mean, but one fold's luck, not a lead.
    #[test]
    fn a_lead_from_one_lucky_fold_is_not_a_lead() {
        let mut rows = Vec::new();
        for day in 1..=12 {
            let wobble = if day % 2 == 0 { 0.2 } else { -0.2 };
            rows.push(row("fold:baseline", FOLD_PLAIN_ROLE, day, 0.0));
            let lucky = if day <= 3 { 3.0 } else { 0.0 };
            rows.push(row("fold:c", FOLD_ROLE, day, lucky + wobble));
        }
        let cfg = SelectConfig {
            folds: 4,
            finalists: 1,
            ..SelectConfig::default()
        };
        let f = assess_folds(&rows, "c", &cfg, 1, &BTreeSet::new()).unwrap();
        assert!((f.chosen_edge.unwrap() - 0.75).abs() < 1e-9);
        let clustered = f.clustered.unwrap();
        assert_eq!(clustered.clusters, 4);
        assert!(clustered.p_value > 0.1, "{clustered:?}");
    }
}
