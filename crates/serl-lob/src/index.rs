//! The order id → slab slot index.
//!
//! A general hash map stores each key beside its value: 16 bytes a resting
//! order for a `u64` id and a `u32` slot, plus control bytes, and deletions
//! leave tombstones that force periodic rehashes under the constant churn of
//! an order book. The book already keeps every id in its slab, so this table
//! stores only a 32-bit hash and the slot (8 bytes) and confirms a match by
//! reading the id from the slab, which the caller touches next anyway. It
//! probes linearly at a load of at most one half and deletes by shifting
//! back, so it never needs tombstones. Half the bytes of a general map keep
//! a book of tens of thousands of orders in the L2 cache.

use crate::types::OrderId;

const EMPTY: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Entry {
    hash: u32,
    slot: u32,
}

const VACANT: Entry = Entry {
    hash: 0,
    slot: EMPTY,
};

/// Where an id is, or where it would go.
pub(crate) enum Probe {
    Found(u32),
    Vacant { pos: usize, hash: u32 },
}

#[derive(Debug, Clone)]
pub(crate) struct IdIndex {
    entries: Vec<Entry>,
    mask: usize,
    len: usize,
}

#[inline(always)]
fn hash(id: OrderId) -> u32 {
    // Fibonacci hashing: the high half of the product mixes every bit of
    // the id, so sequential and strided ids alike spread over the table.
    (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
}

impl IdIndex {
    /// Room for `orders` ids before the table grows.
    pub fn with_capacity(orders: usize) -> Self {
        let size = (orders.max(8) * 2).next_power_of_two();
        IdIndex {
            entries: vec![VACANT; size],
            mask: size - 1,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn clear(&mut self) {
        self.entries.fill(VACANT);
        self.len = 0;
    }

    /// Finds `id`; `id_of` reads the id held in a slot.
    #[inline(always)]
    pub fn probe(&self, id: OrderId, id_of: impl Fn(u32) -> OrderId) -> Probe {
        let h = hash(id);
        let mut pos = h as usize & self.mask;
        loop {
            let e = self.entries[pos];
            if e.slot == EMPTY {
                return Probe::Vacant { pos, hash: h };
            }
            if e.hash == h && id_of(e.slot) == id {
                return Probe::Found(e.slot);
            }
            pos = (pos + 1) & self.mask;
        }
    }

    #[inline(always)]
    pub fn get(&self, id: OrderId, id_of: impl Fn(u32) -> OrderId) -> Option<u32> {
        match self.probe(id, id_of) {
            Probe::Found(slot) => Some(slot),
            Probe::Vacant { .. } => None,
        }
    }

    /// Fills the vacancy a [`Probe`] found, with no other insert or remove
    /// in between.
    #[inline(always)]
    pub fn fill(&mut self, pos: usize, hash: u32, slot: u32) {
        self.entries[pos] = Entry { hash, slot };
        self.len += 1;
        if self.len * 2 > self.entries.len() {
            self.grow();
        }
    }

    /// Inserts an id known to be absent.
    #[inline(always)]
    pub fn insert_absent(&mut self, id: OrderId, slot: u32, id_of: impl Fn(u32) -> OrderId) {
        match self.probe(id, id_of) {
            Probe::Vacant { pos, hash } => self.fill(pos, hash, slot),
            Probe::Found(_) => debug_assert!(false, "id {id} already indexed"),
        }
    }

    /// Removes `id`, returning its slot.
    #[inline(always)]
    pub fn remove(&mut self, id: OrderId, id_of: impl Fn(u32) -> OrderId) -> Option<u32> {
        let h = hash(id);
        let mut pos = h as usize & self.mask;
        loop {
            let e = self.entries[pos];
            if e.slot == EMPTY {
                return None;
            }
            if e.hash == h && id_of(e.slot) == id {
                self.shift_back(pos);
                self.len -= 1;
                return Some(e.slot);
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Closes the hole at `hole` by moving later entries of the same probe
    /// run back, so lookups never meet a gap before their id.
    #[inline(always)]
    fn shift_back(&mut self, mut hole: usize) {
        let mut pos = (hole + 1) & self.mask;
        loop {
            let e = self.entries[pos];
            if e.slot == EMPTY {
                break;
            }
            let home = e.hash as usize & self.mask;
            // The entry may move into the hole when its home is not in the
            // cyclic range (hole, pos].
            let stays = if hole <= pos {
                hole < home && home <= pos
            } else {
                hole < home || home <= pos
            };
            if !stays {
                self.entries[hole] = e;
                hole = pos;
            }
            pos = (pos + 1) & self.mask;
        }
        self.entries[hole] = VACANT;
    }

    #[cold]
    fn grow(&mut self) {
        let size = self.entries.len() * 2;
        let old = std::mem::replace(&mut self.entries, vec![VACANT; size]);
        self.mask = size - 1;
        for e in old.into_iter().filter(|e| e.slot != EMPTY) {
            let mut pos = e.hash as usize & self.mask;
            while self.entries[pos].slot != EMPTY {
                pos = (pos + 1) & self.mask;
            }
            self.entries[pos] = e;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The table against a std map over a random insert/remove churn whose
    /// ids collide often (a small id space) and grow the table.
    #[test]
    fn agrees_with_a_std_map_under_churn() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        let mut ids: Vec<OrderId> = Vec::new(); // slot -> id
        let mut free: Vec<u32> = Vec::new();
        let mut index = IdIndex::with_capacity(4);
        let mut reference: HashMap<OrderId, u32> = HashMap::new();
        for _ in 0..200_000 {
            let id = rng.random_range(0..3_000u64) * 1024;
            let present = reference.contains_key(&id);
            if rng.random_bool(0.55) && !present {
                let slot = match free.pop() {
                    Some(s) => {
                        ids[s as usize] = id;
                        s
                    }
                    None => {
                        ids.push(id);
                        ids.len() as u32 - 1
                    }
                };
                index.insert_absent(id, slot, |s| ids[s as usize]);
                reference.insert(id, slot);
            } else {
                let got = index.remove(id, |s| ids[s as usize]);
                let want = reference.remove(&id);
                assert_eq!(got, want, "remove {id}");
                if let Some(s) = got {
                    free.push(s);
                }
            }
            assert_eq!(index.len(), reference.len());
        }
        for (&id, &slot) in &reference {
            assert_eq!(index.get(id, |s| ids[s as usize]), Some(slot));
        }
    }
}
