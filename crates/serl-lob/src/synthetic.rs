//! A synthetic message stream with realistic depth, for benchmarks, the
//! fuzz corpus and `serl bench`.
//!
//! Limit orders arrive around a slowly drifting mid with geometrically
//! distributed distances (most near the touch), cancels pick a random
//! resting order, and a tenth of the flow is small market and IOC orders.
//! The generator runs its own book so that every cancel names a live order.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::{Event, Message, NewOrder, OrderBook, OrderKind, SelfTradePolicy, Side};

/// `n` messages, deterministic in `seed`. The book it leaves holds a few
/// thousand orders over a few hundred levels.
pub fn message_stream(n: usize, seed: u64) -> Vec<Message> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut book = OrderBook::with_capacity(SelfTradePolicy::Allow, 1 << 14);
    let mut live: Vec<u64> = Vec::with_capacity(1 << 14);
    let mut pos: rustc_hash::FxHashMap<u64, usize> = Default::default();
    let mut out = Vec::with_capacity(n);
    let mut events: Vec<Event> = Vec::new();
    let mut next_id = 1u64;
    let mut mid: i64 = 10_000;
    while out.len() < n {
        if rng.random_bool(0.001) {
            mid += if rng.random_bool(0.5) { 1 } else { -1 };
        }
        let r: f64 = rng.random();
        let side = if rng.random_bool(0.5) {
            Side::Bid
        } else {
            Side::Ask
        };
        let msg = if r < 0.45 || live.len() < 2000 && r < 0.9 {
            // Distance from the touch: geometric, mean about 4 ticks.
            let mut d = 0i64;
            while d < 100 && rng.random_bool(0.78) {
                d += 1;
            }
            let price = match side {
                Side::Bid => mid - 1 - d,
                Side::Ask => mid + 1 + d,
            };
            let qty = 1 + (rng.random::<f64>().powi(3) * 100.0) as u64;
            next_id += 1;
            Message::New(NewOrder {
                id: next_id,
                owner: rng.random_range(0..1000),
                side,
                kind: OrderKind::Limit { price },
                qty,
            })
        } else if r < 0.9 && !live.is_empty() {
            let id = live[rng.random_range(0..live.len())];
            if rng.random_bool(0.15) {
                Message::Reduce { id, by: 1 }
            } else {
                Message::Cancel { id }
            }
        } else {
            next_id += 1;
            let qty = 1 + rng.random_range(0..20);
            let kind = if rng.random_bool(0.5) {
                OrderKind::Market
            } else {
                OrderKind::Ioc {
                    price: match side {
                        Side::Bid => mid + 2,
                        Side::Ask => mid - 2,
                    },
                }
            };
            Message::New(NewOrder {
                id: next_id,
                owner: rng.random_range(0..1000),
                side,
                kind,
                qty,
            })
        };
        events.clear();
        if book.apply(&msg, &mut events).is_err() {
            continue;
        }
        for e in &events {
            match *e {
                Event::Added { id, .. } => {
                    pos.insert(id, live.len());
                    live.push(id);
                }
                Event::Trade(f) if book.order(f.maker).is_none() => {
                    remove_live(&mut live, &mut pos, f.maker)
                }
                Event::Cancelled {
                    id, remaining: 0, ..
                } => remove_live(&mut live, &mut pos, id),
                _ => {}
            }
        }
        out.push(msg);
    }
    out
}

fn remove_live(live: &mut Vec<u64>, pos: &mut rustc_hash::FxHashMap<u64, usize>, id: u64) {
    if let Some(i) = pos.remove(&id) {
        let last = live.pop().expect("live holds id");
        if last != id {
            live[i] = last;
            pos.insert(last, i);
        }
    }
}
