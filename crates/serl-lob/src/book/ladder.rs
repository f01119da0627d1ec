//! The levels of one side of the book, by key (the price for bids, minus
//! the price for asks, so that "better" is "larger" on both sides).
//!
//! A book's levels crowd around the touch, so a side keeps them in an
//! array indexed by key over a window that follows the prices in use,
//! with a bitmap of the occupied keys (and a summary bit for each 64-key
//! word of it), and links each level to its neighbours in price order.
//! Finding, adding and removing a level are one index each; a new level
//! finds its lower neighbour in the bitmap, usually in the same word; and
//! the book is listed from the best level down by following the links. A
//! sorted vector did the same with a search and moved every level below
//! the changed one, which on a deep book was most of the cost of a level
//! far from the touch; listing by the bitmap alone cost a branch on each
//! gap between prices, which made the queue-reactive flow (it reads ten
//! levels a side on every event) a fifth slower.
//!
//! A side whose prices spread over more than [`MAX_SPAN`] ticks (a fuzzer's,
//! a badly scaled feed's, or a stub quote thousands of dollars from the
//! touch) falls back to the sorted vector, which costs memory in levels,
//! not in ticks, until the side empties.

use crate::types::Ticks;

const NIL: u32 = u32::MAX;

/// The widest window of keys a side holds as an array: 256 KiB of slots.
/// The widest spread of keys a side holds as an array: $2,621 in cents.
/// The array is up to twice as wide, 2 MiB of slots.
const MAX_SPAN: i128 = 1 << 18;

/// The first window's size, in keys.
const FIRST_WINDOW: usize = 1 << 10;

#[derive(Debug, Clone)]
pub(super) enum Ladder {
    Dense(Dense),
    Sorted(Sorted),
}

impl Default for Ladder {
    fn default() -> Self {
        Ladder::Dense(Dense::new(FIRST_WINDOW))
    }
}

impl Ladder {
    /// The best level's key and index.
    #[inline(always)]
    pub(super) fn best(&self) -> Option<(Ticks, u32)> {
        match self {
            Ladder::Dense(d) => d.best(),
            Ladder::Sorted(s) => Some((*s.keys.last()?, *s.levels.last()?)),
        }
    }

    /// The level at key `k`.
    #[inline(always)]
    pub(super) fn get(&self, k: Ticks) -> Option<u32> {
        match self {
            Ladder::Dense(d) => d.get(k),
            Ladder::Sorted(s) => s.search(k).ok().map(|pos| s.levels[pos]),
        }
    }

    /// Adds level `li` at key `k`, which holds none.
    #[inline]
    pub(super) fn insert(&mut self, k: Ticks, li: u32) {
        if let Ladder::Dense(d) = self {
            if d.make_room(k) {
                d.insert(k, li);
                return;
            }
            *self = Ladder::Sorted(d.to_sorted());
        }
        if let Ladder::Sorted(s) = self {
            if let Err(pos) = s.search(k) {
                s.keys.insert(pos, k);
                s.levels.insert(pos, li);
            }
        }
    }

    /// Removes the level at key `k`, returning its index.
    #[inline]
    pub(super) fn remove(&mut self, k: Ticks) -> Option<u32> {
        match self {
            Ladder::Dense(d) => d.remove(k),
            Ladder::Sorted(s) => {
                let pos = s.search(k).ok()?;
                s.keys.remove(pos);
                let li = s.levels.remove(pos);
                if s.keys.is_empty() {
                    // The far prices are gone: back to the array.
                    *self = Ladder::default();
                }
                Some(li)
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Ladder::Dense(d) => d.len,
            Ladder::Sorted(s) => s.keys.len(),
        }
    }

    /// Empties the side, keeping an array's allocation.
    pub(super) fn clear(&mut self) {
        match self {
            Ladder::Dense(d) => d.clear(),
            Ladder::Sorted(_) => *self = Ladder::default(),
        }
    }

    /// Checks the side's own structure (for the book's invariants): keys
    /// strictly worse down the list, and in the array form every link,
    /// slot and bit agreeing.
    pub(super) fn check(&self) -> Result<(), String> {
        match self {
            Ladder::Dense(d) => d.check(),
            Ladder::Sorted(s) if s.keys.len() != s.levels.len() => {
                Err("sorted ladder: keys and levels differ in length".into())
            }
            Ladder::Sorted(s) if s.keys.windows(2).any(|w| w[0] >= w[1]) => {
                Err("sorted ladder: keys not strictly ascending".into())
            }
            Ladder::Sorted(_) => Ok(()),
        }
    }

    /// Keys and levels from the best outwards.
    #[inline(always)]
    pub(super) fn iter(&self) -> Iter<'_> {
        match self {
            Ladder::Dense(d) => Iter::Dense {
                dense: d,
                at: d.best_level,
            },
            Ladder::Sorted(s) => Iter::Sorted {
                sorted: s,
                left: s.keys.len(),
            },
        }
    }
}

/// [`Ladder::iter`].
pub(super) enum Iter<'a> {
    Dense { dense: &'a Dense, at: u32 },
    Sorted { sorted: &'a Sorted, left: usize },
}

impl Iterator for Iter<'_> {
    type Item = (Ticks, u32);

    #[inline(always)]
    fn next(&mut self) -> Option<(Ticks, u32)> {
        match self {
            Iter::Dense { dense, at } => {
                let li = *at;
                if li == NIL {
                    return None;
                }
                let link = dense.links[li as usize];
                *at = link.lower;
                Some((link.key, li))
            }
            Iter::Sorted { sorted, left } => {
                *left = left.checked_sub(1)?;
                Some((sorted.keys[*left], sorted.levels[*left]))
            }
        }
    }
}

/// A level's key and its neighbours in price order, by level index.
#[derive(Debug, Clone, Copy)]
struct Link {
    key: Ticks,
    /// The next worse and the next better level (`NIL` at the ends).
    lower: u32,
    higher: u32,
}

const UNLINKED: Link = Link {
    key: 0,
    lower: NIL,
    higher: NIL,
};

/// The array form: `slots[k - base]` is the level at key `k`, or `NIL`.
///
/// The levels are also linked in price order (`links`), so that listing
/// the book from the best level down follows one link a level, with no
/// branch on how far apart the prices are; the bitmap is read only to
/// find a new level's neighbours.
#[derive(Debug, Clone)]
pub(super) struct Dense {
    base: Ticks,
    slots: Vec<u32>,
    /// One bit a slot, set where a level is.
    bits: Vec<u64>,
    /// One bit a word of `bits`, set where that word is not zero: the
    /// next level down is found in a few words however far it is.
    summary: Vec<u64>,
    /// By level index.
    links: Vec<Link>,
    /// The best key and its level, and the worst level, while `len > 0`.
    best: Ticks,
    best_level: u32,
    lowest_level: u32,
    len: usize,
}

impl Dense {
    fn new(size: usize) -> Self {
        Dense {
            base: 0,
            slots: vec![NIL; size],
            bits: vec![0; size / 64],
            summary: vec![0; size.div_ceil(64 * 64)],
            links: Vec::new(),
            best: 0,
            best_level: NIL,
            lowest_level: NIL,
            len: 0,
        }
    }

    #[inline(always)]
    fn best(&self) -> Option<(Ticks, u32)> {
        (self.len > 0).then_some((self.best, self.best_level))
    }

    /// The slot of a key inside the window.
    #[inline(always)]
    fn slot_of(&self, k: Ticks) -> usize {
        (k - self.base) as usize
    }

    /// The slot of `k`, when the window holds it.
    #[inline(always)]
    fn slot_in_window(&self, k: Ticks) -> Option<usize> {
        let pos = k.checked_sub(self.base)?;
        (pos >= 0 && (pos as usize) < self.slots.len()).then_some(pos as usize)
    }

    #[inline(always)]
    fn get(&self, k: Ticks) -> Option<u32> {
        let li = self.slots[self.slot_in_window(k)?];
        (li != NIL).then_some(li)
    }

    #[inline(always)]
    fn mark(&mut self, pos: usize, li: u32) {
        self.slots[pos] = li;
        self.bits[pos / 64] |= 1 << (pos % 64);
        self.summary[pos / 4096] |= 1 << (pos / 64 % 64);
    }

    #[inline(always)]
    fn unmark(&mut self, pos: usize) {
        self.slots[pos] = NIL;
        self.bits[pos / 64] &= !(1 << (pos % 64));
        if self.bits[pos / 64] == 0 {
            self.summary[pos / 4096] &= !(1 << (pos / 64 % 64));
        }
    }

    /// Makes `lower` and `higher` neighbours (`NIL`: the end on that
    /// side), keeping the worst and the best level up to date.
    #[inline(always)]
    fn join(&mut self, lower: u32, higher: u32) {
        match lower {
            NIL => self.lowest_level = higher,
            l => self.links[l as usize].higher = higher,
        }
        match higher {
            NIL => {
                self.best_level = lower;
                if lower != NIL {
                    self.best = self.links[lower as usize].key;
                }
            }
            h => self.links[h as usize].lower = lower,
        }
    }

    /// Inserts at a key the window holds ([`Self::make_room`] first).
    #[inline(always)]
    fn insert(&mut self, k: Ticks, li: u32) {
        let pos = self.slot_of(k);
        if self.slots[pos] != NIL {
            debug_assert!(false, "key {k} already holds a level");
            return;
        }
        self.mark(pos, li);
        let lower = match pos.checked_sub(1).and_then(|p| self.highest_at_or_below(p)) {
            Some(p) => self.slots[p],
            None => NIL,
        };
        let higher = match lower {
            NIL => self.lowest_level,
            l => self.links[l as usize].higher,
        };
        if self.links.len() <= li as usize {
            self.links.resize(li as usize + 1, UNLINKED);
        }
        self.links[li as usize] = Link {
            key: k,
            lower,
            higher,
        };
        self.join(lower, li);
        self.join(li, higher);
        self.len += 1;
    }

    #[inline(always)]
    fn remove(&mut self, k: Ticks) -> Option<u32> {
        let pos = self.slot_in_window(k)?;
        let li = self.slots[pos];
        if li == NIL {
            return None;
        }
        self.unmark(pos);
        let Link { lower, higher, .. } = self.links[li as usize];
        self.join(lower, higher);
        self.len -= 1;
        Some(li)
    }

    /// The highest occupied slot at or below `pos`.
    #[inline]
    fn highest_at_or_below(&self, pos: usize) -> Option<usize> {
        let word = self.bits[pos / 64] & below_or_at(pos);
        if word != 0 {
            return Some(pos / 64 * 64 + highest_bit(word));
        }
        let w = self.highest_word_at_or_below((pos / 64).checked_sub(1)?)?;
        Some(w * 64 + highest_bit(self.bits[w]))
    }

    /// The highest non-zero word of the bitmap at or below word `w`, from
    /// the summary.
    #[inline]
    fn highest_word_at_or_below(&self, w: usize) -> Option<usize> {
        let mut s = w / 64;
        let mut summary = self.summary[s] & below_or_at(w);
        while summary == 0 {
            s = s.checked_sub(1)?;
            summary = self.summary[s];
        }
        Some(s * 64 + highest_bit(summary))
    }

    /// Moves or widens the window so that it holds `k` beside every level;
    /// false when that would take more than [`MAX_SPAN`] keys.
    #[inline]
    fn make_room(&mut self, k: Ticks) -> bool {
        if self.slot_in_window(k).is_some() {
            return true;
        }
        if self.len == 0 {
            // An empty side takes the first key it meets as its centre.
            self.base = k.saturating_sub(self.slots.len() as Ticks / 2);
            return self.slot_in_window(k).is_some();
        }
        self.rebuild_around(k)
    }

    /// Lays the window anew around every level and `k`; the links stay.
    #[cold]
    fn rebuild_around(&mut self, k: Ticks) -> bool {
        let lo = self.links[self.lowest_level as usize].key.min(k) as i128;
        let hi = self.best.max(k) as i128;
        let span = hi - lo + 1;
        if span > MAX_SPAN {
            return false;
        }
        let size = self.slots.len().max(2 * span as usize).next_power_of_two();
        let base = lo - (size as i128 - span) / 2;
        if base < Ticks::MIN as i128 || base + size as i128 > Ticks::MAX as i128 {
            return false;
        }
        if size == self.slots.len() {
            // The same width, moved: the buffers are refilled in place (a
            // book in steady state allocates nothing).
            self.slots.fill(NIL);
            self.bits.fill(0);
            self.summary.fill(0);
        } else {
            self.slots = vec![NIL; size];
            self.bits = vec![0; size / 64];
            self.summary = vec![0; size.div_ceil(64 * 64)];
        }
        self.base = base as Ticks;
        let mut at = self.best_level;
        while at != NIL {
            let link = self.links[at as usize];
            self.mark(self.slot_of(link.key), at);
            at = link.lower;
        }
        true
    }

    fn check(&self) -> Result<(), String> {
        let (mut at, mut above, mut seen) = (self.best_level, NIL, 0);
        while at != NIL {
            let link = self.links[at as usize];
            seen += 1;
            if seen > self.len {
                return Err(format!("ladder links run past its {} levels", self.len));
            }
            let pos = self.slot_in_window(link.key);
            if pos.is_none_or(|p| self.slots[p] != at || self.bits[p / 64] >> (p % 64) & 1 == 0) {
                return Err(format!("ladder level at key {} not in its slot", link.key));
            }
            if link.higher != above || above != NIL && self.links[above as usize].key <= link.key {
                return Err(format!("ladder links out of order at key {}", link.key));
            }
            (above, at) = (at, link.lower);
        }
        let marked: u32 = self.bits.iter().map(|b| b.count_ones()).sum();
        if seen != self.len || marked as usize != self.len || above != self.lowest_level {
            return Err(format!(
                "ladder holds {} levels, links {seen}, bits {marked}",
                self.len
            ));
        }
        if self.len > 0 && self.links[self.best_level as usize].key != self.best {
            return Err("ladder's best key is not its best level's".into());
        }
        Ok(())
    }

    /// Every level, best first.
    fn levels(&self) -> Vec<(Ticks, u32)> {
        Iter::Dense {
            dense: self,
            at: self.best_level,
        }
        .collect()
    }

    fn to_sorted(&self) -> Sorted {
        let mut levels = self.levels();
        levels.reverse();
        Sorted {
            keys: levels.iter().map(|&(k, _)| k).collect(),
            levels: levels.iter().map(|&(_, li)| li).collect(),
        }
    }

    fn clear(&mut self) {
        if self.len > 0 {
            self.slots.fill(NIL);
            self.bits.fill(0);
            self.summary.fill(0);
            self.best_level = NIL;
            self.lowest_level = NIL;
            self.len = 0;
        }
    }
}

/// The bits of a word at and below bit `pos % 64`.
#[inline(always)]
fn below_or_at(pos: usize) -> u64 {
    u64::MAX >> (63 - pos % 64)
}

/// The index of the highest set bit of a non-zero word.
#[inline(always)]
fn highest_bit(word: u64) -> usize {
    63 - word.leading_zeros() as usize
}

/// The sorted form, for sides spread wider than an array should be.
#[derive(Debug, Clone, Default)]
pub(super) struct Sorted {
    /// Ascending; the best level is last.
    keys: Vec<Ticks>,
    levels: Vec<u32>,
}

impl Sorted {
    /// Position of `k` in the ascending keys, searching from the end first
    /// because almost all activity is near the top of the book.
    fn search(&self, k: Ticks) -> Result<usize, usize> {
        let keys = &self.keys;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// The ladder against an ordered map over random inserts and removes
    /// of level indices reused from a free list, with keys around a centre
    /// that trends (moving the window), rare far keys (widening it, and
    /// searching the summary across words) removed again like any other,
    /// and a jump past the array's limit (the sorted fallback, and the way
    /// back once the side is drained).
    #[test]
    fn agrees_with_an_ordered_map() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        let mut ladder = Ladder::default();
        let mut reference: BTreeMap<Ticks, u32> = BTreeMap::new();
        let mut free: Vec<u32> = (0..4_000).rev().collect();
        let mut centre: Ticks = -50_000;
        let mut moved = 0;
        for step in 0..300_000u32 {
            centre += rng.random_range(-1..=2);
            if step == 200_000 {
                centre += 10 * MAX_SPAN as Ticks;
            }
            let k = if rng.random_bool(0.002) {
                centre + rng.random_range(-30_000..30_000)
            } else {
                centre + rng.random_range(-400..400)
            };
            let base = match &ladder {
                Ladder::Dense(d) => Some(d.base),
                Ladder::Sorted(_) => None,
            };
            // About 300 levels, drained for a while after the jump.
            let removing = match (step, reference.len()) {
                (250_000..260_000, _) => 1.0,
                (_, n) if n > 300 => 0.6,
                _ => 0.4,
            };
            if !reference.is_empty() && rng.random_bool(removing) {
                // Remove a present key, found by rank (far keys go too).
                let nth = rng.random_range(0..reference.len());
                let gone = *reference.keys().nth(nth).expect("in range");
                let li = reference.remove(&gone);
                assert_eq!(ladder.remove(gone), li, "remove {gone}");
                free.push(li.expect("present"));
            } else if let std::collections::btree_map::Entry::Vacant(slot) = reference.entry(k) {
                let li = free.pop().expect("a free index");
                ladder.insert(k, li);
                slot.insert(li);
            }
            if let (Some(before), Ladder::Dense(d)) = (base, &ladder) {
                moved += usize::from(d.base != before && d.len > 0);
            }
            assert_eq!(ladder.len(), reference.len());
            assert_eq!(
                ladder.best(),
                reference.iter().next_back().map(|(&k, &v)| (k, v))
            );
            if step % 499 == 0 {
                ladder
                    .check()
                    .unwrap_or_else(|e| panic!("step {step}: {e}"));
                let want: Vec<(Ticks, u32)> =
                    reference.iter().rev().map(|(&k, &v)| (k, v)).collect();
                assert_eq!(ladder.iter().collect::<Vec<_>>(), want, "step {step}");
                assert_eq!(ladder.get(k), reference.get(&k).copied());
            }
            if step == 200_001 {
                assert!(
                    matches!(ladder, Ladder::Sorted(_)),
                    "the jump spread the keys"
                );
                assert!(reference.len() > 50, "{} levels", reference.len());
            }
        }
        assert!(moved > 10, "the window moved {moved} times");
        assert!(
            matches!(ladder, Ladder::Dense(_)),
            "back to the array once empty"
        );
        assert!(reference.len() > 50, "{} levels", reference.len());
        ladder.clear();
        assert_eq!((ladder.len(), ladder.best()), (0, None));
        ladder.insert(7, 1);
        assert_eq!(ladder.iter().collect::<Vec<_>>(), [(7, 1)]);
        ladder.check().unwrap();
    }
}
