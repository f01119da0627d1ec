//! Comparing the engine's book with an order-book row, level by level.

use serde::Serialize;

use super::{ReplayOptions, EMPTY_ASK, EMPTY_BID};
use crate::{LevelView, OrderBook, Side};

/// The first level where the engine's book and an order-book row differ.
#[derive(Debug, Clone, Serialize)]
pub struct Mismatch {
    /// 1-based row (= message line).
    pub line: u64,
    /// `"ask"` or `"bid"`.
    pub side: &'static str,
    /// The 1-based level on that side (1 is the best).
    pub level: usize,
    /// LOBSTER's (price, size), in dollars × 10000 and shares; an empty
    /// level is (±9999999999, 0).
    pub expected: (i64, i64),
    /// The engine's (price, size), in LOBSTER's price units.
    pub actual: (i64, i64),
}

/// The row-by-row comparison and its tally, with the depth buffers reused
/// from row to row so that checking allocates nothing.
pub(super) struct RowCheck {
    levels: usize,
    tick: i64,
    keep_mismatches: usize,
    asks: Vec<LevelView>,
    bids: Vec<LevelView>,
    pub(super) mismatched_rows: usize,
    /// The first rows that differed, one mismatch (the first) per row.
    pub(super) first_mismatches: Vec<Mismatch>,
}

impl RowCheck {
    pub(super) fn new(levels: usize, opts: &ReplayOptions) -> Self {
        RowCheck {
            levels,
            tick: opts.tick,
            keep_mismatches: opts.keep_mismatches,
            asks: Vec::with_capacity(levels),
            bids: Vec::with_capacity(levels),
            mismatched_rows: 0,
            first_mismatches: Vec::new(),
        }
    }

    /// Compares prices and sizes of all *L* levels on both sides of `row`
    /// (LOBSTER's line `line`) with `book`, counting the row if any differ.
    #[inline]
    pub(super) fn compare(&mut self, book: &OrderBook, line: u64, row: &[i64]) {
        let levels = self.levels;
        book.depth_into(Side::Ask, levels, &mut self.asks);
        book.depth_into(Side::Bid, levels, &mut self.bids);
        let mut bad = false;
        for k in 0..levels {
            for (side, off, got, empty) in [
                ("ask", 0, &self.asks, EMPTY_ASK),
                ("bid", 2, &self.bids, EMPTY_BID),
            ] {
                let expected = (row[4 * k + off], row[4 * k + off + 1]);
                let actual = got
                    .get(k)
                    .map_or((empty, 0), |l| (l.price * self.tick, l.qty as i64));
                if expected != actual {
                    if !bad && self.first_mismatches.len() < self.keep_mismatches {
                        self.first_mismatches.push(Mismatch {
                            line,
                            side,
                            level: k + 1,
                            expected,
                            actual,
                        });
                    }
                    bad = true;
                }
            }
        }
        if bad {
            self.mismatched_rows += 1;
        }
    }
}
