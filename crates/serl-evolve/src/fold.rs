//! `[evolve.select] folds`: a design judged on every non-test session
//! instead of the validation days alone.
//!
//! The train and validation sessions are cut into `of` contiguous blocks
//! of days. Fold `index` trains on the orders of every other block and is
//! scored on the orders of its own, so each day is scored by a policy that
//! never trained on it, and a design's scores over all folds cover every
//! non-test day. The test split plays no part. A scored fold keeps the
//! days it trained on and the days it was scored on ([`FoldRecord`]), so
//! the claim can be checked on the run's records.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serl_env::ParentOrder;

/// One fold of `of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fold {
    /// Which block of days it is scored on, from 0.
    pub index: usize,
    /// How many blocks the non-test days are cut into.
    pub of: usize,
}

/// What a fold trained on and was scored on, kept with its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FoldRecord {
    /// The fold.
    pub fold: Fold,
    /// The days of the orders it trained on.
    pub trained_on: Vec<NaiveDate>,
    /// The days of the orders it was scored on.
    pub scored_on: Vec<NaiveDate>,
}

/// The key of `key`'s scoring on fold `index` with its `seed`-th seed
/// (`fold<index>_<key>`, `fold<index>s<seed>_<key>` after the first).
pub(crate) fn fold_key(index: usize, seed: usize, key: &str) -> String {
    match seed {
        0 => format!("fold{index}_{key}"),
        s => format!("fold{index}s{s}_{key}"),
    }
}

/// The design key a fold's key was made from ([`fold_key`]'s inverse).
pub(crate) fn unfolded_key(key: &str) -> Option<&str> {
    let (tag, rest) = key.strip_prefix("fold")?.split_once('_')?;
    let (index, seed) = tag.split_once('s').unwrap_or((tag, "0"));
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    (digits(index) && digits(seed)).then_some(rest)
}

/// The distinct days of `orders`, sorted.
fn days_of<'o>(orders: impl Iterator<Item = &'o ParentOrder>) -> Vec<NaiveDate> {
    let mut days: Vec<NaiveDate> = orders.map(|o| o.date).collect();
    days.sort();
    days.dedup();
    days
}

/// The blocks of days of the non-test orders (`train` and `val`): `of`
/// contiguous runs of nearly equal length, in date order (fewer where
/// there are fewer days).
pub fn day_blocks(train: &[ParentOrder], val: &[ParentOrder], of: usize) -> Vec<Vec<NaiveDate>> {
    cut_days(&days_of(train.iter().chain(val)), of)
}

/// Sorted distinct `days` cut into `of` contiguous blocks of nearly equal
/// length, as [`day_blocks`] cuts the non-test days.
pub(crate) fn cut_days(days: &[NaiveDate], of: usize) -> Vec<Vec<NaiveDate>> {
    let of = of.clamp(1, days.len().max(1));
    (0..of)
        .map(|b| days[b * days.len() / of..(b + 1) * days.len() / of].to_vec())
        .filter(|block| !block.is_empty())
        .collect()
}

/// Fold `fold`'s training and scoring orders, and its record.
pub(crate) fn fold_orders(
    train: &[ParentOrder],
    val: &[ParentOrder],
    fold: Fold,
) -> (Vec<ParentOrder>, Vec<ParentOrder>, FoldRecord) {
    let blocks = day_blocks(train, val, fold.of);
    let held: &[NaiveDate] = blocks.get(fold.index).map_or(&[], Vec::as_slice);
    let (scored, trained): (Vec<ParentOrder>, Vec<ParentOrder>) = train
        .iter()
        .chain(val)
        .cloned()
        .partition(|o| held.binary_search(&o.date).is_ok());
    let record = FoldRecord {
        fold,
        trained_on: days_of(trained.iter()),
        scored_on: days_of(scored.iter()),
    };
    (trained, scored, record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serl_env::OrderSide;
    use std::sync::Arc;

    fn order(day: u32, id: u64) -> ParentOrder {
        ParentOrder {
            id,
            symbol: Arc::from("X"),
            date: NaiveDate::from_ymd_opt(2018, 3, day).unwrap(),
            side: OrderSide::Buy,
            qty: 100.0,
            start_minute: 570,
            end_minute: 960,
        }
    }

    /// 7 training days and 3 validation days in 3 folds: every day is
    /// scored by exactly one fold, and no fold trains on a day it scores.
    #[test]
    fn every_non_test_day_is_scored_once_by_a_fold_that_never_trained_on_it() {
        let train: Vec<ParentOrder> = (1..=7).map(|d| order(d, d as u64)).collect();
        let val: Vec<ParentOrder> = (8..=10).map(|d| order(d, d as u64)).collect();
        let blocks = day_blocks(&train, &val, 3);
        assert_eq!(blocks.iter().map(Vec::len).collect::<Vec<_>>(), [3, 3, 4]);
        let mut scored = Vec::new();
        for (index, block) in blocks.iter().enumerate() {
            let (t, s, r) = fold_orders(&train, &val, Fold { index, of: 3 });
            assert_eq!(t.len() + s.len(), 10);
            assert!(r.scored_on.iter().all(|d| !r.trained_on.contains(d)));
            assert_eq!(&r.scored_on, block);
            scored.extend(r.scored_on);
        }
        scored.sort();
        assert_eq!(scored, days_of(train.iter().chain(&val)));
        assert_eq!(unfolded_key(&fold_key(3, 0, "i2_c1")), Some("i2_c1"));
        assert_eq!(fold_key(3, 2, "baseline"), "fold3s2_baseline");
        assert_eq!(unfolded_key("fold3s2_baseline"), Some("baseline"));
        assert_eq!(unfolded_key("fold3s_baseline"), None);
        assert_eq!(unfolded_key("foldx_i2"), None);
        // More folds than days: one day a fold.
        assert_eq!(day_blocks(&train[..2], &[], 5).len(), 2);
    }
}
