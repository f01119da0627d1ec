//! Arbitrary message sequences against the matching engine: no panic, and
//! every invariant holds after every message.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serl_lob::*;

#[derive(Debug, Arbitrary)]
enum Op {
    Limit { id: u8, owner: u8, bid: bool, price: i8, qty: u16 },
    // Prices up to 262,000 ticks away: they move and widen a side's
    // price-indexed window, and now and then spread it past its limit.
    FarLimit { id: u8, owner: u8, bid: bool, price: i16, qty: u16 },
    // Any price at all (the sorted fallback, and the overflow guards).
    WildLimit { id: u8, owner: u8, bid: bool, price: i64, qty: u16 },
    Market { id: u8, owner: u8, bid: bool, qty: u16 },
    Ioc { id: u8, owner: u8, bid: bool, price: i8, qty: u16 },
    Cancel { id: u8 },
    Reduce { id: u8, by: u16 },
    Modify { id: u8, price: i8, qty: u16 },
    Execute { id: u8, qty: u16 },
}

#[derive(Debug, Arbitrary)]
struct Input {
    policy: u8,
    ops: Vec<Op>,
}

fn side(bid: bool) -> Side {
    if bid { Side::Bid } else { Side::Ask }
}

fuzz_target!(|input: Input| {
    let policy = match input.policy % 3 {
        0 => SelfTradePolicy::Allow,
        1 => SelfTradePolicy::CancelResting,
        _ => SelfTradePolicy::CancelIncoming,
    };
    let mut book = OrderBook::new(policy);
    let mut events: Vec<Event> = Vec::new();
    for op in input.ops {
        let price = |p: i8| 100 + p as i64; // includes non-positive prices
        let r = match op {
            Op::Limit { id, owner, bid, price: p, qty } => book.submit(NewOrder { id: id as u64, owner: owner as u32, side: side(bid), kind: OrderKind::Limit { price: price(p) }, qty: qty as u64 }, &mut events).map(|_| ()),
            Op::FarLimit { id, owner, bid, price: p, qty } => book.submit(NewOrder { id: id as u64, owner: owner as u32, side: side(bid), kind: OrderKind::Limit { price: 100 + p as i64 * 8 }, qty: qty as u64 }, &mut events).map(|_| ()),
            Op::WildLimit { id, owner, bid, price, qty } => book.submit(NewOrder { id: id as u64, owner: owner as u32, side: side(bid), kind: OrderKind::Limit { price }, qty: qty as u64 }, &mut events).map(|_| ()),
            Op::Market { id, owner, bid, qty } => book.submit(NewOrder { id: id as u64, owner: owner as u32, side: side(bid), kind: OrderKind::Market, qty: qty as u64 }, &mut events).map(|_| ()),
            Op::Ioc { id, owner, bid, price: p, qty } => book.submit(NewOrder { id: id as u64, owner: owner as u32, side: side(bid), kind: OrderKind::Ioc { price: price(p) }, qty: qty as u64 }, &mut events).map(|_| ()),
            Op::Cancel { id } => book.cancel(id as u64, &mut events).map(|_| ()),
            Op::Reduce { id, by } => book.reduce(id as u64, by as u64, &mut events).map(|_| ()),
            Op::Modify { id, price: p, qty } => book.modify(id as u64, price(p), qty as u64, &mut events).map(|_| ()),
            Op::Execute { id, qty } => book.execute(id as u64, qty as u64, &mut events).map(|_| ()),
        };
        let _ = r;
        if let Err(e) = book.check_invariants() {
            panic!("invariant broken: {e}");
        }
        events.clear();
    }
});
