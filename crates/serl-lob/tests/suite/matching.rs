//! The engine's semantics, one behaviour per test.

use serl_lob::*;

fn limit(id: OrderId, owner: Owner, side: Side, price: Ticks, qty: Lots) -> NewOrder {
    NewOrder {
        id,
        owner,
        side,
        kind: OrderKind::Limit { price },
        qty,
    }
}

/// The fills a tape records, in order.
fn fills(tape: &[Event]) -> Vec<Fill> {
    let fill = |e: &Event| match e {
        Event::Trade(f) => Some(*f),
        _ => None,
    };
    tape.iter().filter_map(fill).collect()
}

#[test]
fn an_aggressive_order_sweeps_levels_best_price_first() {
    let mut book = OrderBook::default();
    book.submit(limit(1, 1, Side::Ask, 101, 5), &mut ())
        .unwrap();
    book.submit(limit(2, 1, Side::Ask, 102, 5), &mut ())
        .unwrap();
    book.submit(limit(3, 1, Side::Ask, 103, 5), &mut ())
        .unwrap();
    let mut tape: Vec<Event> = Vec::new();
    let r = book
        .submit(limit(9, 2, Side::Bid, 102, 12), &mut tape)
        .unwrap();
    assert_eq!((r.filled, r.resting), (10, 2));
    let trades: Vec<(OrderId, Ticks, Lots)> = fills(&tape)
        .iter()
        .map(|f| (f.maker, f.price, f.qty))
        .collect();
    assert_eq!(trades, vec![(1, 101, 5), (2, 102, 5)]);
    // The rest of the buy now rests as the best bid, below the untouched ask.
    assert_eq!(book.best_bid(), Some(102));
    assert_eq!(book.best_ask(), Some(103));
    assert_eq!(book.spread(), Some(1));
}

/// Prices far apart (a penny bid under a thousand-dollar one) keep the
/// same order as prices a tick apart: a side spread wider than its
/// price-indexed window falls back to a sorted one.
#[test]
fn levels_far_apart_still_trade_best_price_first() {
    let mut book = OrderBook::default();
    let prices = [100_000, 1, 5_000_000, 100_001, 2, 4_999_999];
    for (id, &price) in (1..).zip(&prices) {
        book.submit(limit(id, 1, Side::Bid, price, 1), &mut ())
            .unwrap();
        book.check_invariants().unwrap();
    }
    let mut sorted = prices;
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let listed: Vec<Ticks> = book.levels(Side::Bid).map(|l| l.price).collect();
    assert_eq!(listed, sorted);
    let mut tape: Vec<Event> = Vec::new();
    book.submit(limit(99, 2, Side::Ask, 2, 5), &mut tape)
        .unwrap();
    let traded: Vec<Ticks> = fills(&tape).iter().map(|f| f.price).collect();
    assert_eq!(traded, sorted[..5]);
    assert_eq!((book.best_bid(), book.best_ask()), (Some(1), None));
    book.check_invariants().unwrap();
}

#[test]
fn within_a_price_the_earliest_order_fills_first() {
    let mut book = OrderBook::default();
    for id in 1..=3 {
        book.submit(limit(id, id as Owner, Side::Bid, 100, 4), &mut ())
            .unwrap();
    }
    assert_eq!(
        book.queue_position(3),
        Some(QueuePosition {
            orders_ahead: 2,
            qty_ahead: 8
        })
    );
    let mut tape: Vec<Event> = Vec::new();
    book.submit(
        NewOrder {
            id: 10,
            owner: 9,
            side: Side::Ask,
            kind: OrderKind::Market,
            qty: 6,
        },
        &mut tape,
    )
    .unwrap();
    let makers: Vec<OrderId> = fills(&tape).iter().map(|f| f.maker).collect();
    assert_eq!(makers, vec![1, 2]);
    assert_eq!(book.order(2).unwrap().qty, 2);
    assert_eq!(
        book.queue_position(3),
        Some(QueuePosition {
            orders_ahead: 1,
            qty_ahead: 2
        })
    );
}

#[test]
fn ioc_and_market_orders_never_rest() {
    let mut book = OrderBook::default();
    book.submit(limit(1, 1, Side::Ask, 100, 3), &mut ())
        .unwrap();
    let r = book
        .submit(
            NewOrder {
                id: 2,
                owner: 2,
                side: Side::Bid,
                kind: OrderKind::Ioc { price: 100 },
                qty: 5,
            },
            &mut (),
        )
        .unwrap();
    assert_eq!((r.filled, r.resting, r.cancelled), (3, 0, 2));
    let r = book
        .submit(
            NewOrder {
                id: 3,
                owner: 2,
                side: Side::Bid,
                kind: OrderKind::Market,
                qty: 5,
            },
            &mut (),
        )
        .unwrap();
    assert_eq!((r.filled, r.cancelled), (0, 5));
    assert!(book.is_empty());
}

#[test]
fn a_smaller_size_keeps_priority_but_a_new_price_loses_it() {
    let mut book = OrderBook::default();
    book.submit(limit(1, 1, Side::Bid, 100, 10), &mut ())
        .unwrap();
    book.submit(limit(2, 2, Side::Bid, 100, 10), &mut ())
        .unwrap();
    book.modify(1, 100, 4, &mut ()).unwrap();
    assert_eq!(book.queue_position(1).unwrap().orders_ahead, 0);
    book.modify(1, 99, 4, &mut ()).unwrap();
    book.modify(1, 100, 4, &mut ()).unwrap();
    assert_eq!(
        book.queue_position(1).unwrap().orders_ahead,
        1,
        "back of the queue after a price change"
    );
    // A larger size also loses priority.
    book.modify(2, 100, 20, &mut ()).unwrap();
    assert_eq!(book.queue_position(2).unwrap().orders_ahead, 1);
}

#[test]
fn a_modify_that_crosses_trades() {
    let mut book = OrderBook::default();
    book.submit(limit(1, 1, Side::Ask, 101, 5), &mut ())
        .unwrap();
    book.submit(limit(2, 2, Side::Bid, 100, 5), &mut ())
        .unwrap();
    let r = book.modify(2, 101, 5, &mut ()).unwrap();
    assert_eq!(r.filled, 5);
    assert!(book.is_empty());
}

#[test]
fn reduce_keeps_the_queue_place_and_refuses_too_much() {
    let mut book = OrderBook::default();
    book.submit(limit(1, 1, Side::Ask, 100, 10), &mut ())
        .unwrap();
    book.submit(limit(2, 1, Side::Ask, 100, 10), &mut ())
        .unwrap();
    assert_eq!(book.reduce(1, 4, &mut ()), Ok(6));
    assert_eq!(book.queue_position(2).unwrap().qty_ahead, 6);
    assert_eq!(
        book.reduce(1, 7, &mut ()),
        Err(LobError::ReduceTooLarge {
            id: 1,
            by: 7,
            resting: 6
        })
    );
    assert_eq!(book.reduce(1, 6, &mut ()), Ok(0));
    assert!(book.order(1).is_none());
}

#[test]
fn self_trade_policies() {
    let setup = |p| {
        let mut b = OrderBook::new(p);
        b.submit(limit(1, 7, Side::Ask, 100, 5), &mut ()).unwrap();
        b.submit(limit(2, 8, Side::Ask, 100, 5), &mut ()).unwrap();
        b
    };
    let taker = limit(3, 7, Side::Bid, 100, 5);

    let mut b = setup(SelfTradePolicy::Allow);
    let mut tape: Vec<Event> = Vec::new();
    b.submit(taker, &mut tape).unwrap();
    assert!(tape
        .iter()
        .any(|e| matches!(e, Event::Trade(f) if f.maker == 1)));

    let mut b = setup(SelfTradePolicy::CancelResting);
    let r = b.submit(taker, &mut ()).unwrap();
    assert_eq!(r.filled, 5);
    assert!(b.order(1).is_none() && b.order(2).is_none());

    let mut b = setup(SelfTradePolicy::CancelIncoming);
    let r = b.submit(taker, &mut ()).unwrap();
    assert_eq!((r.filled, r.cancelled, r.resting), (0, 5, 0));
    assert_eq!(b.resting_volume(Side::Ask), 10);
}

#[test]
fn depth_snapshots_list_levels_best_first() {
    let mut book = OrderBook::default();
    for (id, p) in [(1, 99), (2, 97), (3, 98), (4, 99)] {
        book.submit(limit(id, 1, Side::Bid, p, 10), &mut ())
            .unwrap();
    }
    let d = book.depth(Side::Bid, 2);
    assert_eq!(
        d,
        vec![
            LevelView {
                price: 99,
                qty: 20,
                orders: 2
            },
            LevelView {
                price: 98,
                qty: 10,
                orders: 1
            }
        ]
    );
    assert_eq!(book.resting_volume(Side::Bid), 40);
    assert_eq!(book.mid(), None);
}

#[test]
fn bad_orders_are_clean_errors() {
    let mut book = OrderBook::default();
    assert_eq!(
        book.submit(limit(1, 1, Side::Bid, 100, 0), &mut ()),
        Err(LobError::ZeroQuantity)
    );
    assert_eq!(
        book.submit(limit(1, 1, Side::Bid, -5, 1), &mut ()),
        Err(LobError::BadPrice { price: -5 })
    );
    book.submit(limit(1, 1, Side::Bid, 100, 1), &mut ())
        .unwrap();
    assert_eq!(
        book.submit(limit(1, 1, Side::Bid, 100, 1), &mut ()),
        Err(LobError::DuplicateOrder(1))
    );
    assert_eq!(
        to_ticks(2238150, 100),
        Err(LobError::OffTick {
            raw: 2238150,
            tick: 100
        })
    );
    assert_eq!(to_ticks(2238100, 100), Ok(22381));
}

/// A side's count of changes moves with every change to its resting lots
/// (a rest, a partial and a whole fill, a reduction, a cancel, a clear)
/// and with nothing done to the other side alone.
#[test]
fn a_sides_change_count_moves_only_when_that_side_changes() {
    let mut book = OrderBook::default();
    let counts = |b: &OrderBook| (b.side_changes(Side::Bid), b.side_changes(Side::Ask));
    let mut last = counts(&book);
    let mut expect = |b: &OrderBook, bid_moved: bool, ask_moved: bool, what: &str| {
        let now = counts(b);
        assert_eq!(
            (now.0 != last.0, now.1 != last.1),
            (bid_moved, ask_moved),
            "{what}"
        );
        last = now;
    };
    book.submit(limit(1, 1, Side::Ask, 101, 5), &mut ())
        .unwrap();
    expect(&book, false, true, "an ask rests");
    book.submit(limit(2, 1, Side::Bid, 99, 5), &mut ()).unwrap();
    expect(&book, true, false, "a bid rests");
    book.submit(limit(3, 2, Side::Bid, 101, 2), &mut ())
        .unwrap();
    expect(&book, false, true, "a buy fills part of the ask");
    book.submit(limit(4, 2, Side::Bid, 101, 3), &mut ())
        .unwrap();
    expect(&book, false, true, "a buy takes the rest of the ask");
    book.reduce(2, 1, &mut ()).unwrap();
    expect(&book, true, false, "the bid reduced");
    book.cancel(2, &mut ()).unwrap();
    expect(&book, true, false, "the bid cancelled");
    book.submit(limit(5, 1, Side::Bid, 90, 1), &mut ()).unwrap();
    expect(&book, true, false, "a bid rests again");
    book.clear();
    expect(&book, true, true, "the book cleared");
}
