//! The book's structural invariants, checked in full for tests and fuzzing.

use super::levels::{key, side_ix};
use super::{OrderBook, NIL};
use crate::types::*;

impl OrderBook {
    /// Checks every structural invariant; for tests and fuzzing. Returns a
    /// description of the first violation.
    pub fn check_invariants(&self) -> Result<(), String> {
        if let (Some(b), Some(a)) = (self.best_bid(), self.best_ask()) {
            if b >= a {
                return Err(format!("crossed book: bid {b} >= ask {a}"));
            }
        }
        let mut count = 0usize;
        for side in [Side::Bid, Side::Ask] {
            self.ladder(side)
                .check()
                .map_err(|e| format!("{side:?} {e}"))?;
            let mut side_qty = 0;
            for (k, li) in self.ladder(side).iter() {
                let l = &self.levels[li as usize];
                if key(side, l.price) != k {
                    return Err(format!("level key mismatch at {}", l.price));
                }
                if l.side != side {
                    return Err(format!(
                        "{:?} level at {} on the {side:?} side",
                        l.side, l.price
                    ));
                }
                if l.count == 0 {
                    return Err(format!("empty level left at {}", l.price));
                }
                let (mut q, mut c, mut cur, mut prev) = (0, 0, l.head, NIL);
                while cur != NIL {
                    let n = &self.nodes[cur as usize];
                    if n.prev != prev || n.level != li {
                        return Err(format!("broken queue at level {}", l.price));
                    }
                    if n.qty == 0 {
                        return Err(format!("zero-size order {} resting", n.id));
                    }
                    if self.slot(n.id) != Some(cur) {
                        return Err(format!("order {} not indexed", n.id));
                    }
                    q += n.qty;
                    c += 1;
                    prev = cur;
                    cur = n.next;
                }
                if prev != l.tail || q != l.qty || c != l.count {
                    return Err(format!("level {} totals disagree with its queue", l.price));
                }
                side_qty += q;
                count += c as usize;
            }
            if side_qty != self.resting[side_ix(side)] {
                return Err(format!("{side:?} resting volume disagrees with its levels"));
            }
        }
        if count != self.index.len() {
            return Err(format!(
                "{} orders indexed, {count} in queues",
                self.index.len()
            ));
        }
        let t = self.totals;
        let resting = (self.resting[0] + self.resting[1]) as u128;
        if t.submitted != resting + t.filled + t.cancelled {
            return Err(format!(
                "quantity not conserved: submitted {} != resting {resting} + filled {} + cancelled {}",
                t.submitted, t.filled, t.cancelled
            ));
        }
        Ok(())
    }
}
