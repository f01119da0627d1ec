//! The storage under the book: order nodes in a slab, price levels, and
//! the sorted ladder of levels per side.

use crate::types::*;

/// A resting order in the slab. Its price and side are its level's: 32
/// bytes, two to a cache line, where carrying them cost 48.
#[derive(Debug, Clone, Copy)]
#[repr(align(32))]
pub(super) struct Node {
    pub(super) id: OrderId,
    pub(super) qty: Lots,
    pub(super) owner: Owner,
    pub(super) level: u32,
    pub(super) prev: u32,
    pub(super) next: u32,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Level {
    pub(super) price: Ticks,
    pub(super) qty: Lots,
    pub(super) count: u32,
    pub(super) head: u32,
    pub(super) tail: u32,
    pub(super) side: Side,
}

/// A node with its level's price and side.
#[derive(Debug, Clone, Copy)]
pub(super) struct Placed {
    pub(super) qty: Lots,
    pub(super) owner: Owner,
    pub(super) level: u32,
    pub(super) price: Ticks,
    pub(super) side: Side,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Ladder {
    /// Ascending; the best level is last.
    pub(super) keys: Vec<Ticks>,
    pub(super) levels: Vec<u32>,
}

#[inline(always)]
pub(super) fn key(side: Side, price: Ticks) -> Ticks {
    match side {
        Side::Bid => price,
        Side::Ask => -price,
    }
}

/// Position of `k` in ascending `keys`, searching from the end first
/// because almost all activity is near the top of the book.
#[inline]
pub(super) fn search(keys: &[Ticks], k: Ticks) -> Result<usize, usize> {
    let n = keys.len();
    let mut i = n;
    let stop = n.saturating_sub(8);
    while i > stop {
        let kk = keys[i - 1];
        if kk == k {
            return Ok(i - 1);
        }
        if kk < k {
            return Err(i);
        }
        i -= 1;
    }
    keys[..i].binary_search(&k)
}

#[inline(always)]
pub(super) fn side_ix(side: Side) -> usize {
    match side {
        Side::Bid => 0,
        Side::Ask => 1,
    }
}
