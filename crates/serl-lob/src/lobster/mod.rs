//! Replaying LOBSTER message files through the engine and checking the
//! book against LOBSTER's own order-book file after every message.
//!
//! LOBSTER ships, per stock and day, a message file (`time, type, id, size,
//! price, direction`) and an order-book file whose row *i* is the top *L*
//! levels after message *i*. Two things are never in the files, and the
//! replay treats them as anonymous liquidity:
//!
//! - orders resting before the recording starts;
//! - messages that touched only levels outside the visible top *L* at the
//!   time (LOBSTER's level-*L* message file leaves them out), including
//!   NASDAQ's order replaces, which give an order a new id.
//!
//! So the replay works like this:
//!
//! - The book starts from the first order-book row, with the first
//!   message's effect taken back out, one anonymous order per level.
//! - Each message is applied to the engine. A cancel or execution of an
//!   unknown id takes from the anonymous order at its price when that price
//!   was visible; otherwise it touched unobserved liquidity and is counted.
//!   Hidden executions (type 5), cross trades (6) and halts (7) leave the
//!   visible book alone.
//! - A price level that was *not* visible in the previous row cannot be
//!   checked against anything the files recorded, so when it comes into view
//!   its size is taken from the row (adding anonymous liquidity at the front
//!   of its queue, or removing unrecorded cancels from the back).
//! - Every level that *was* visible must then agree with the row exactly:
//!   the comparison covers prices and sizes of all *L* levels on both sides,
//!   and any difference is a mismatch.

mod compare;
mod digits;
mod input;
mod messages;
mod orderbook;
mod replay;
mod replayer;
mod rows;
mod window;

pub use compare::Mismatch;
pub use input::LobsterInput;
pub use messages::{parse_messages, MessageRow};
pub use orderbook::{parse_orderbook, BookRows};
pub use replay::{replay, ReplayOptions, ReplayReport};

use std::path::PathBuf;

use crate::{LobError, OrderId};

/// LOBSTER's placeholder prices for an empty level.
const EMPTY_ASK: i64 = 9_999_999_999;
const EMPTY_BID: i64 = -9_999_999_999;
/// Anonymous orders take ids from the top of the id space, where LOBSTER's
/// (NASDAQ's) ids never reach.
const ANON_BASE: OrderId = 1 << 62;
/// Owner of every order in a replay: LOBSTER does not say who sent what.
const REPLAY_OWNER: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a readable zip: {message}")]
    Zip { path: PathBuf, message: String },
    #[error("{path}: the zip has no {what} file (expected a name containing `_{what}_`)")]
    MissingFile { path: PathBuf, what: &'static str },
    #[error("{file}:{line}: field `{field}`: {message}")]
    Parse {
        file: String,
        line: u64,
        field: &'static str,
        message: String,
    },
    #[error("{file}:{line}: {error}")]
    Engine {
        file: String,
        line: u64,
        error: LobError,
    },
    #[error("{file}:{line}: {message}")]
    Inconsistent {
        file: String,
        line: u64,
        message: String,
    },
    #[error("the message file has {messages} rows but the order-book file has {rows}")]
    RowCount { messages: usize, rows: usize },
}
