use chrono::NaiveDate;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnvError {
    #[error("unknown symbol `{symbol}`{hint}")]
    UnknownSymbol { symbol: String, hint: String },
    #[error("no session of {symbol} on {date}")]
    NoSession { symbol: String, date: NaiveDate },
    #[error("order window {start}..{end} is outside the session {open}..{close}")]
    WindowOutsideSession {
        start: String,
        end: String,
        open: String,
        close: String,
    },
    #[error("order window {start}..{end} is empty: the start must be before the end")]
    EmptyWindow { start: String, end: String },
    #[error("order quantity must be positive (got {0})")]
    ZeroQuantity(f64),
    #[error("the {split} split has no sessions")]
    EmptySplit { split: String },
    #[error("invalid environment config: {field}: {message}")]
    Config { field: String, message: String },
}
