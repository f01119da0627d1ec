use chrono::NaiveDate;

/// What can go wrong setting up orders and environments.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvError {
    /// An order config names a symbol the data does not have.
    #[error("unknown symbol `{symbol}`{hint}")]
    UnknownSymbol {
        /// The symbol asked for.
        symbol: String,
        /// A few of the symbols the data has, to show in the message.
        hint: String,
    },
    /// The data has no session of this symbol on this date.
    #[error("no session of {symbol} on {date}")]
    NoSession {
        /// The symbol asked for.
        symbol: String,
        /// The date asked for.
        date: NaiveDate,
    },
    /// An order window reaches outside the session's hours.
    #[error("order window {start}..{end} is outside the session {open}..{close}")]
    WindowOutsideSession {
        /// The window's start, `HH:MM`.
        start: String,
        /// The window's end, `HH:MM`.
        end: String,
        /// The session's open, `HH:MM`.
        open: String,
        /// The session's close, `HH:MM`.
        close: String,
    },
    /// An order window that does not start before it ends.
    #[error("order window {start}..{end} is empty: the start must be before the end")]
    EmptyWindow {
        /// The window's start, `HH:MM`.
        start: String,
        /// The window's end, `HH:MM`.
        end: String,
    },
    /// An order quantity (shares or ADV fraction) that is not positive and
    /// finite.
    #[error("order quantity must be positive (got {0})")]
    ZeroQuantity(f64),
    /// No order could be drawn: the split has no sessions (of the symbols
    /// asked for).
    #[error("the {split} split has no sessions")]
    EmptySplit {
        /// The split's name.
        split: String,
    },
    /// A setting is out of range.
    #[error("invalid environment config: {field}: {message}")]
    Config {
        /// The setting's path in the config, e.g. `env.participation_cap`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}
