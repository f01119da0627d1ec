//! Property tests: random message streams never break the book.

use proptest::prelude::*;
use serl_lob::*;

/// A message drawn over a small id and price space so that cancels, modifies
/// and crossings happen often.
fn message() -> impl Strategy<Value = Message> {
    let side = prop_oneof![Just(Side::Bid), Just(Side::Ask)];
    let kind = prop_oneof![
        4 => (90i64..110).prop_map(|price| OrderKind::Limit { price }),
        1 => Just(OrderKind::Market),
        1 => (90i64..110).prop_map(|price| OrderKind::Ioc { price }),
    ];
    prop_oneof![
        6 => (0u64..64, 0u32..4, side, kind, 1u64..50).prop_map(|(id, owner, side, kind, qty)| {
            Message::New(NewOrder { id, owner, side, kind, qty })
        }),
        2 => (0u64..64).prop_map(|id| Message::Cancel { id }),
        1 => (0u64..64, 1u64..20).prop_map(|(id, by)| Message::Reduce { id, by }),
        1 => (0u64..64, 90i64..110, 1u64..50).prop_map(|(id, price, qty)| Message::Modify { id, price, qty }),
    ]
}

fn policy() -> impl Strategy<Value = SelfTradePolicy> {
    prop_oneof![
        Just(SelfTradePolicy::Allow),
        Just(SelfTradePolicy::CancelResting),
        Just(SelfTradePolicy::CancelIncoming),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// After every message: the book is not crossed, every queue and level
    /// total agrees, and submitted = resting + filled + cancelled.
    #[test]
    fn invariants_hold_after_every_message(stp in policy(), msgs in prop::collection::vec(message(), 1..300)) {
        let mut book = OrderBook::new(stp);
        for m in &msgs {
            let _ = book.apply(m, &mut ());
            if let Err(e) = book.check_invariants() {
                prop_assert!(false, "after {m:?}: {e}");
            }
        }
    }

    /// Fills happen at the best price first, and within a price in arrival
    /// order: a taker's fills never improve as it sweeps, and makers at one
    /// price fill in the order they were added.
    #[test]
    fn fills_respect_price_time_priority(msgs in prop::collection::vec(message(), 1..300)) {
        let mut book = OrderBook::default();
        let mut arrival = std::collections::HashMap::new();
        let mut seq = 0u64;
        for m in &msgs {
            let mut events: Vec<Event> = Vec::new();
            let _ = book.apply(m, &mut events);
            let mut last: Option<(Ticks, u64)> = None;
            for e in &events {
                match *e {
                    Event::Added { id, .. } => {
                        seq += 1;
                        arrival.insert(id, seq);
                    }
                    Event::Trade(f) => {
                        let t = arrival[&f.maker];
                        if let Some((p, s)) = last {
                            match f.taker_side {
                                Side::Bid => prop_assert!(f.price >= p),
                                Side::Ask => prop_assert!(f.price <= p),
                            }
                            if f.price == p {
                                prop_assert!(t > s, "maker {} filled out of time order", f.maker);
                            }
                        }
                        last = Some((f.price, t));
                    }
                    _ => {}
                }
            }
        }
    }

    /// Unknown ids are clean errors, never panics.
    #[test]
    fn unknown_ids_are_errors(id in 1000u64..2000, by in 1u64..10) {
        let mut book = OrderBook::default();
        prop_assert_eq!(book.cancel(id, &mut ()), Err(LobError::UnknownOrder(id)));
        prop_assert_eq!(book.reduce(id, by, &mut ()), Err(LobError::UnknownOrder(id)));
        prop_assert_eq!(book.modify(id, 100, by, &mut ()), Err(LobError::UnknownOrder(id)));
        prop_assert_eq!(book.execute(id, by, &mut ()), Err(LobError::UnknownOrder(id)));
    }
}
