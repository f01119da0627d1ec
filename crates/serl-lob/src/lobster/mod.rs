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
mod discover;
mod export;
mod input;
mod mbo;
mod mbo_export;
mod mbp;
mod messages;
mod orderbook;
mod replay;
mod replayer;
mod rows;
mod window;

pub use compare::Mismatch;
pub use discover::{lobster_name, read_days, sample_files, LobsterDayFiles, MBO_LEVELS};
pub use export::LobsterRecorder;
pub use input::LobsterInput;
pub use mbo::{is_dbn, mbo_symbols, read_mbo, read_mbo_messages, CrossedBook, MboMessages};
pub use mbo_export::{export_mbo, write_mbo, MboExport};
pub use mbp::{check_mbp, write_mbp, MbpCheck, MbpMismatch};
pub use messages::{parse_messages, LobsterEvent, MessageRow};
pub use orderbook::{book_level, parse_orderbook, BookRows};
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

/// Why a LOBSTER day could not be opened, parsed or replayed. Every
/// variant names the file (and, past opening, the 1-based line) at fault.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A file could not be read, or the order-book file beside a message
    /// CSV does not exist.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The sample zip, or an entry in it, could not be read.
    #[error("{path}: not a readable zip: {message}")]
    Zip {
        /// The zip file.
        path: PathBuf,
        /// What the zip reader said.
        message: String,
    },
    /// A zip without a message or order-book entry, or a CSV whose name has
    /// no `message` to find its order-book file by.
    #[error("{path}: the zip has no {what} file (expected a name containing `_{what}_`)")]
    MissingFile {
        /// The zip or message file given.
        path: PathBuf,
        /// `"message"` or `"orderbook"`.
        what: &'static str,
    },
    /// A field that is missing, not a number, or out of range.
    #[error("{file}:{line}: field `{field}`: {message}")]
    Parse {
        /// The file's name (`zip:entry` inside a zip).
        file: String,
        /// The 1-based line.
        line: u64,
        /// The field, by LOBSTER's column name (`type`, `size`,
        /// `bid_price`, …), or `row` for the row as a whole.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The engine refused a message (or the replay's own seeding of a
    /// level), or a price is not on the tick grid.
    #[error("{file}:{line}: {error}")]
    Engine {
        /// The message file's name.
        file: String,
        /// The message's 1-based line.
        line: u64,
        /// The engine's reason.
        error: LobError,
    },
    /// The files contradict each other beyond what hidden depth explains: a
    /// cancel or execution larger than its visible level holds, or a first
    /// message that removes more than the first row shows.
    #[error("{file}:{line}: {message}")]
    Inconsistent {
        /// The message file's name.
        file: String,
        /// The message's 1-based line.
        line: u64,
        /// What does not add up.
        message: String,
    },
    /// A path that holds no LOBSTER day, or not the symbols asked for
    /// (the message names the path).
    #[error("{message}")]
    Samples {
        /// What is wrong, with the path.
        message: String,
    },
    /// The two files must have one row per message.
    #[error("the message file has {messages} rows but the order-book file has {rows}")]
    RowCount {
        /// Rows (messages) in the message file.
        messages: usize,
        /// Rows in the order-book file.
        rows: usize,
    },
}
