//! # serl-lob: a price-time priority matching engine
//!
//! The dynamic market and every simulated execution in serl run through
//! this crate. It depends on no other serl crate.
//!
//! - [`types`] holds the vocabulary: [`Side`], [`NewOrder`] with its
//!   [`OrderKind`] (limit, market, immediate-or-cancel), [`Message`]
//!   (new, cancel, reduce, modify), [`Fill`] and [`Event`].
//! - [`OrderBook`] keeps the resting orders and matches incoming ones in
//!   price-time priority. Prices are integer ticks and sizes integer lots;
//!   [`to_ticks`] converts from a raw price and refuses prices off the grid.
//!   Every change goes to an [`EventSink`] as an [`Event`]: pass `()` to drop
//!   them at no cost, or a `Vec<Event>` to record a day.
//! - [`synthetic`] generates a realistic message stream for benchmarks.
//! - [`lobster`] replays LOBSTER message files through the book and checks
//!   it against LOBSTER's order-book snapshots after every message.
//!
//! ```
//! use serl_lob::*;
//! let mut book = OrderBook::default();
//! let mut tape: Vec<Event> = Vec::new();
//! let ask = NewOrder { id: 1, owner: 7, side: Side::Ask, kind: OrderKind::Limit { price: 101 }, qty: 5 };
//! book.submit(ask, &mut tape).unwrap();
//! let buy = NewOrder { id: 2, owner: 8, side: Side::Bid, kind: OrderKind::Market, qty: 3 };
//! let report = book.submit(buy, &mut tape).unwrap();
//! assert_eq!(report.filled, 3);
//! assert_eq!(book.best(Side::Ask).unwrap().qty, 2);
//! assert!(matches!(tape.last(), Some(Event::Trade(f)) if f.maker == 1 && f.taker == 2));
//! ```

mod book;
mod error;
mod index;
pub mod lobster;
pub mod synthetic;
pub mod types;

pub use book::{OrderBook, QueuePosition, EXTERNAL, EXTERNAL_OWNER};
pub use error::LobError;
pub use types::*;

/// Converts a raw price (e.g. 1/10000 dollars) to ticks of `tick` raw units.
pub fn to_ticks(raw: i64, tick: i64) -> Result<Ticks, LobError> {
    if tick <= 0 || raw % tick != 0 {
        return Err(LobError::OffTick { raw, tick });
    }
    Ok(raw / tick)
}
