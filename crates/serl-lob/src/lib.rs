//! # serl-lob: a price-time priority matching engine
//!
//! The dynamic market and every simulated execution in serl run through
//! this crate. It depends on no other serl crate. Prices are integer ticks
//! ([`Ticks`]) and sizes integer lots ([`Lots`]); [`to_ticks`] converts a
//! raw price and refuses one off the grid.
//!
//! Three pieces, all feeding the same [`OrderBook`]:
//!
//! - **The book.** [`OrderBook`] keeps the resting orders and matches
//!   incoming ones in price-time priority. It takes a [`Message`] (new,
//!   cancel, reduce, modify) or the method for each; a [`NewOrder`] is a
//!   limit, market or immediate-or-cancel [`OrderKind`]. Every change goes to
//!   an [`EventSink`] as an [`Event`] (added, [`Fill`], cancelled): pass `()`
//!   to drop them at no cost, or a `Vec<Event>` to record a day.
//! - **The LOBSTER replay.** [`LobsterInput::open`] reads a LOBSTER day (a
//!   sample zip, or a message CSV with its order-book CSV), and [`replay`]
//!   applies every message to a book and checks it against LOBSTER's
//!   order-book row after every message, returning a [`ReplayReport`].
//!   LOBSTER's raw prices are dollars × 10000 and its sizes shares, one
//!   share a lot; [`ReplayOptions::tick`] sets the grid (100 = one cent).
//!   [`parse_messages`] alone gives the [`MessageRow`]s, each with its
//!   [`LobsterEvent`], and [`parse_orderbook`] the [`BookRows`], for
//!   statistics.
//! - **The LOBSTER export.** [`LobsterRecorder`] is an [`EventSink`] that
//!   turns a book's events into a level-*L* LOBSTER day (the messages that
//!   changed the top *L* levels, and the row after each), to score a
//!   simulated day with the same code, or with outside tools, as a real one.
//! - **The synthetic stream.** [`message_stream`] generates a realistic,
//!   seeded stream of [`Message`]s (limit orders near a drifting mid,
//!   cancels of live orders, small market and IOC orders) for benchmarks
//!   and fuzzing.
//!
//! ```
//! use serl_lob::*;
//!
//! // The book: one resting ask, then a market buy that takes part of it.
//! let mut book = OrderBook::default();
//! let mut tape: Vec<Event> = Vec::new();
//! let ask = NewOrder { id: 1, owner: 7, side: Side::Ask, kind: OrderKind::Limit { price: 101 }, qty: 5 };
//! book.submit(ask, &mut tape).unwrap();
//! let buy = NewOrder { id: 2, owner: 8, side: Side::Bid, kind: OrderKind::Market, qty: 3 };
//! let report = book.submit(buy, &mut tape).unwrap();
//! assert_eq!(report.filled, 3);
//! assert_eq!(book.best(Side::Ask).unwrap().qty, 2);
//! assert!(matches!(tape.last(), Some(Event::Trade(f)) if f.maker == 1 && f.taker == 2));
//!
//! // The synthetic stream through a fresh book, dropping the events.
//! let mut book = OrderBook::new(SelfTradePolicy::Allow);
//! for m in &message_stream(10_000, 7) {
//!     let _ = book.apply(m, &mut ());
//! }
//! assert!(book.check_invariants().is_ok() && !book.is_empty());
//!
//! // A LOBSTER day (here in memory; `LobsterInput::open` reads files):
//! // two submissions, a partial execution and a deletion, and the level-1
//! // book after each.
//! let input = LobsterInput {
//!     message_name: "X_message_1.csv".into(),
//!     orderbook_name: "X_orderbook_1.csv".into(),
//!     messages: b"34200.1,1,11,100,1000000,1\n34200.2,1,12,50,1000100,-1\n\
//!                 34200.3,4,12,20,1000100,-1\n34200.4,3,11,100,1000000,1\n".to_vec(),
//!     orderbook: b"1000200,10,1000000,100\n1000100,50,1000000,100\n\
//!                  1000100,30,1000000,100\n1000100,30,999900,40\n".to_vec(),
//! };
//! let rows = parse_messages(&input.message_name, &input.messages).unwrap();
//! assert_eq!(rows[2].kind, LobsterEvent::Execute);
//! let report = replay(&input, &ReplayOptions::default()).unwrap();
//! assert_eq!((report.messages, report.mismatched_rows), (4, 0));
//! assert_eq!(report.by_type[LobsterEvent::Submit.code() as usize - 1], 2);
//! ```

#![deny(missing_docs)]

mod book;
mod error;
mod index;
mod lobster;
mod synthetic;
mod types;

pub use book::{OrderBook, QueuePosition, EXTERNAL, EXTERNAL_OWNER};
pub use error::LobError;
pub use lobster::{
    book_level, check_mbp, export_mbo, is_dbn, lobster_name, mbo_symbols, parse_messages,
    parse_orderbook, read_days, read_mbo, read_mbo_messages, replay, sample_files, write_mbo,
    write_mbp, BookRows, CrossedBook, LobsterDayFiles, LobsterEvent, LobsterInput, LobsterRecorder,
    MboExport, MboMessages, MbpCheck, MbpMismatch, MessageRow, Mismatch, ReplayError,
    ReplayOptions, ReplayReport, MBO_LEVELS,
};
pub use synthetic::message_stream;
pub use types::{
    CancelReason, Event, EventSink, ExecReport, Fill, LevelView, Lots, Message, NewOrder, OrderId,
    OrderKind, Owner, RestingOrder, SelfTradePolicy, Side, Ticks, Totals,
};

/// Converts a raw price (e.g. 1/10000 dollars) to ticks of `tick` raw units.
pub fn to_ticks(raw: i64, tick: i64) -> Result<Ticks, LobError> {
    if tick <= 0 || raw % tick != 0 {
        return Err(LobError::OffTick { raw, tick });
    }
    Ok(raw / tick)
}
