//! Selection that does not fit noise (`[evolve.search]`): a design is
//! scored by what survives days, its paired difference against plain PPO
//! (trained the same way, validated on the same orders) day by day, and
//! ranked by the lower bound of that difference rather than by its mean.
//!
//! A round of twenty designs ranked on a few validation days picks the
//! luckiest as often as the best; a design whose daily edge over plain
//! PPO is large *and* steady has a high lower bound, one that won a
//! single day by chance has not. Day-blocked folds show how often the
//! winner on all days would also have won on each block of days alone.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serl_eval::OrderResult;

use crate::record::{candidate_score, DayPa, PairedScore, StockDayPa};

/// Each stock-day's mean PA over `rows`, by date then symbol.
pub(crate) fn stock_day_means(rows: &[OrderResult]) -> Vec<StockDayPa> {
    serl_eval::evidence::stock_day_rows("", "", rows)
        .into_iter()
        .map(|r| StockDayPa {
            date: r.date,
            symbol: r.symbol,
            pa: r.pa_bps,
            orders: r.orders,
        })
        .collect()
}

/// Each day's mean PA over `rows`, by date.
pub(crate) fn day_means(rows: &[OrderResult]) -> Vec<DayPa> {
    let mut by_day: std::collections::BTreeMap<NaiveDate, (f64, usize)> = Default::default();
    for r in rows {
        let e = by_day.entry(r.date).or_default();
        e.0 += r.pa_bps;
        e.1 += 1;
    }
    by_day
        .into_iter()
        .map(|(date, (sum, n))| DayPa {
            date,
            pa: sum / n as f64,
        })
        .collect()
}

/// `design`'s days against `plain`'s, paired on the days both have, with
/// the lower bound `z` standard errors below the mean; `None` when they
/// share no day.
pub fn paired(design: &[DayPa], plain: &[DayPa], z: f64) -> Option<PairedScore> {
    let diffs: Vec<f64> = design
        .iter()
        .filter_map(|d| {
            let p = plain.iter().find(|p| p.date == d.date)?;
            Some(d.pa - p.pa)
        })
        .collect();
    bound(&diffs, z)
}

/// The mean of `diffs`, its standard error and its lower bound `z`
/// standard errors below; `None` for no differences.
fn bound(diffs: &[f64], z: f64) -> Option<PairedScore> {
    if diffs.is_empty() {
        return None;
    }
    let n = diffs.len() as f64;
    let mean = diffs.iter().sum::<f64>() / n;
    let se = if diffs.len() < 2 {
        0.0
    } else {
        let var = diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (var / n).sqrt()
    };
    Some(PairedScore {
        mean,
        se,
        lower: mean - z * se,
        days: diffs.len(),
        diffs: diffs.to_vec(),
    })
}

/// How stable a round's choice is across day-blocked folds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FoldStability {
    /// The round's winner on all validation days.
    pub winner: String,
    /// Each fold's winner: the highest selection score on that block of
    /// days alone (the lower bound of its daily edge there, charged for
    /// the designer's retries, as the round's winner is chosen).
    pub fold_winners: Vec<String>,
    /// Share of folds whose winner is the round's.
    pub agreement: f64,
}

/// The days cut into `folds` contiguous blocks (the last takes the
/// remainder); `None` when there are fewer days than folds.
fn blocks(days: usize, folds: usize) -> Option<Vec<std::ops::Range<usize>>> {
    if folds == 0 || days < folds {
        return None;
    }
    let size = days / folds;
    Some(
        (0..folds)
            .map(|f| {
                let end = if f + 1 == folds { days } else { (f + 1) * size };
                f * size..end
            })
            .collect(),
    )
}

/// One design of a round as the folds see it: its key, its daily edge
/// over plain PPO and its designer's success rate.
pub(crate) type Contender<'a> = (String, &'a PairedScore, f64);

/// Which of `round` wins each of `folds` blocks of days (by the same rule
/// as the round's winner: the lower bound `z` standard errors below the
/// mean on the block's days, charged for retries), against `winner`, the
/// round's choice on all days. `None` without enough days or designs.
pub(crate) fn fold_stability(
    round: &[Contender],
    winner: &str,
    folds: usize,
    z: f64,
) -> Option<FoldStability> {
    let days = round.iter().map(|(_, p, _)| p.diffs.len()).min()?;
    let blocks = blocks(days, folds)?;
    let fold_winners: Vec<String> = blocks
        .iter()
        .filter_map(|b| {
            let score = |(_, p, success): &Contender| {
                let lower = bound(&p.diffs[b.clone()], z).map_or(f64::MIN, |s| s.lower);
                candidate_score(lower, *success)
            };
            round
                .iter()
                .max_by(|x, y| score(x).total_cmp(&score(y)))
                .map(|(k, _, _)| k.clone())
        })
        .collect();
    let agree = fold_winners.iter().filter(|w| *w == winner).count();
    Some(FoldStability {
        winner: winner.to_string(),
        agreement: agree as f64 / fold_winners.len().max(1) as f64,
        fold_winners,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn days(pas: &[f64]) -> Vec<DayPa> {
        pas.iter()
            .enumerate()
            .map(|(i, &pa)| DayPa {
                date: NaiveDate::from_ymd_opt(2024, 1, 2 + i as u32).unwrap(),
                pa,
            })
            .collect()
    }

    #[test]
    fn a_steady_edge_has_a_higher_lower_bound_than_a_lucky_one_with_the_same_mean() {
        let plain = days(&[0.0, 0.0, 0.0, 0.0]);
        let steady = paired(&days(&[1.0, 1.0, 1.0, 1.0]), &plain, 1.0).unwrap();
        let lucky = paired(&days(&[4.0, 0.0, 0.0, 0.0]), &plain, 1.0).unwrap();
        assert_eq!(steady.mean, lucky.mean);
        assert_eq!(steady.lower, 1.0, "no spread, no penalty");
        // sd of (4, 0, 0, 0) is 2, so se = 1 and the bound is 1 − 1.
        assert!((lucky.se - 1.0).abs() < 1e-12);
        assert!(lucky.lower.abs() < 1e-12, "{lucky:?}");
    }

    #[test]
    fn only_shared_days_pair() {
        let plain = days(&[1.0, 2.0]);
        let mut design = days(&[3.0, 5.0, 7.0]);
        design[0].date = NaiveDate::from_ymd_opt(2023, 1, 1).unwrap();
        let p = paired(&design, &plain, 1.0).unwrap();
        assert_eq!(p.diffs, vec![3.0]);
        assert_eq!(p.se, 0.0);
        assert!(paired(&design[..1], &plain, 1.0).is_none());
    }

    #[test]
    fn fold_stability_counts_the_blocks_the_winner_also_wins() {
        let plain = days(&[0.0; 6]);
        let a = paired(&days(&[5.0, 5.0, 0.0, 0.0, 0.0, 0.0]), &plain, 1.0).unwrap();
        let b = paired(&days(&[1.0, 1.0, 1.0, 1.0, 1.0, 1.0]), &plain, 1.0).unwrap();
        let round = vec![("a".to_string(), &a, 1.0), ("b".to_string(), &b, 1.0)];
        let s = fold_stability(&round, "a", 3, 1.0).unwrap();
        assert_eq!(s.fold_winners, ["a", "b", "b"]);
        assert!((s.agreement - 1.0 / 3.0).abs() < 1e-12);
        let too_many = fold_stability(&round, "a", 7, 1.0);
        assert!(too_many.is_none(), "fewer days than folds");
        // A design charged for its retries loses a block it wins on its edge.
        let round = vec![("a".to_string(), &a, 0.1), ("b".to_string(), &b, 1.0)];
        let s = fold_stability(&round, "b", 3, 1.0).unwrap();
        assert_eq!(s.fold_winners, ["b", "b", "b"]);
    }
}
