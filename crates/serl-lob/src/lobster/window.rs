//! What one side of an order-book row shows, and the questions the replay
//! asks of it.

use super::{EMPTY_ASK, EMPTY_BID};
use crate::{Side, Ticks};

/// The levels one side of a row shows.
#[derive(Debug, Clone, Default)]
pub(super) struct Window {
    /// (price in LOBSTER units, size), best first. Kept in raw units so
    /// that filling a window per message needs no division.
    pub(super) levels: Vec<(i64, i64)>,
    tick: i64,
    /// All *L* slots are used, so deeper levels may exist unseen.
    full: bool,
}

impl Window {
    pub(super) fn from_row(row: &[i64], levels: usize, off: usize, tick: i64) -> Self {
        let mut w = Window::default();
        w.fill(row, levels, off, tick);
        w
    }

    /// Refills from a row, reusing the allocation.
    pub(super) fn fill(&mut self, row: &[i64], levels: usize, off: usize, tick: i64) {
        let w = self;
        w.levels.clear();
        for k in 0..levels {
            let (price, size) = (row[4 * k + off], row[4 * k + off + 1]);
            if price != EMPTY_ASK && price != EMPTY_BID && size > 0 {
                w.levels.push((price, size));
            }
        }
        w.full = w.levels.len() == levels;
        w.tick = tick;
    }

    pub(super) fn shows(&self, p: Ticks) -> bool {
        let raw = p * self.tick;
        self.levels.iter().any(|l| l.0 == raw)
    }

    pub(super) fn size_at(&self, p: Ticks) -> i64 {
        let raw = p * self.tick;
        self.levels.iter().find(|l| l.0 == raw).map_or(0, |l| l.1)
    }

    /// Whether the row would show a level at `p` if the book had one.
    pub(super) fn covers(&self, side: Side, p: Ticks) -> bool {
        match (self.full, self.levels.last()) {
            (false, _) | (true, None) => true,
            (true, Some(&(worst, _))) => match side {
                Side::Ask => p * self.tick <= worst,
                Side::Bid => p * self.tick >= worst,
            },
        }
    }
}
