//! The storage under the book: order nodes in a slab and price levels
//! (each side's levels by price are in [`super::ladder`]).

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

#[inline(always)]
pub(super) fn key(side: Side, price: Ticks) -> Ticks {
    match side {
        Side::Bid => price,
        Side::Ask => -price,
    }
}

#[inline(always)]
pub(super) fn side_ix(side: Side) -> usize {
    match side {
        Side::Bid => 0,
        Side::Ask => 1,
    }
}
