//! Parsing the message file: a fast path for well-formed rows, and a
//! checked parser that names the line and field of anything it refuses.

use super::digits::{lines, parse_i64, parse_seconds, uint_at, Fields};
use super::ReplayError;
use crate::OrderId;

/// What a LOBSTER message did: the message file's `type` field, whose
/// codes 1 to 7 are the discriminants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LobsterEvent {
    /// A new limit order was submitted.
    Submit = 1,
    /// Partial cancellation: `size` shares were taken off a resting order.
    Cancel = 2,
    /// Total deletion: the order left the book; `size` is what it held.
    Delete = 3,
    /// `size` shares of a visible resting order were executed.
    Execute = 4,
    /// A hidden order was executed; the visible book does not change.
    ExecuteHidden = 5,
    /// A cross trade, e.g. the opening or closing auction; the visible book
    /// does not change.
    Cross = 6,
    /// A trading halt, quoting resumption or trading resumption (told apart
    /// by `price`: -1, 0 and 1).
    Halt = 7,
}

impl LobsterEvent {
    /// The event of a LOBSTER type code, or `None` outside 1 to 7.
    #[inline]
    pub const fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => LobsterEvent::Submit,
            2 => LobsterEvent::Cancel,
            3 => LobsterEvent::Delete,
            4 => LobsterEvent::Execute,
            5 => LobsterEvent::ExecuteHidden,
            6 => LobsterEvent::Cross,
            7 => LobsterEvent::Halt,
            _ => return None,
        })
    }

    /// LOBSTER's type code, 1 to 7.
    #[inline]
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// [`Self::from_code`] for a field parsed as a wider integer.
    #[inline(always)]
    fn from_field(v: i64) -> Option<Self> {
        if (1..=7).contains(&v) {
            Self::from_code(v as u8)
        } else {
            None
        }
    }
}

/// One row of a LOBSTER message file, as read: the six fields with their
/// ranges checked (a known type, an id and size of zero or more, a
/// direction of 1 or -1) and nothing else.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageRow {
    /// Seconds after midnight, to the file's precision (milliseconds to
    /// nanoseconds).
    pub time: f64,
    /// What happened.
    pub kind: LobsterEvent,
    /// The order's reference number (NASDAQ's, one per order for the day;
    /// 0 on halts).
    pub id: OrderId,
    /// Shares submitted, cancelled or executed.
    pub size: i64,
    /// Price in dollars × 10000 (LOBSTER's raw price units; a tick of one
    /// cent is 100).
    pub price: i64,
    /// The side of the order the message is about: 1 a buy limit order, -1 a
    /// sell limit order. An execution of a sell order (-1) is a
    /// buyer-initiated trade.
    pub direction: i8,
}

fn parse_message(file: &str, line_no: u64, line: &[u8]) -> Result<MessageRow, ReplayError> {
    let err = |field: &'static str, message: String| ReplayError::Parse {
        file: file.to_string(),
        line: line_no,
        field,
        message,
    };
    let mut f = Fields { b: line, pos: 0 };
    let text = |s: Option<&[u8]>| String::from_utf8_lossy(s.unwrap_or(b"")).into_owned();
    let t = f.next_raw();
    let time: f64 = t
        .and_then(parse_seconds)
        .ok_or_else(|| err("time", format!("`{}` is not a time in seconds", text(t))))?;
    let mut int = |field: &'static str| {
        let raw = f.next_raw();
        raw.and_then(parse_i64).ok_or_else(|| match raw {
            None => err(field, "missing (a message row has 6 fields)".into()),
            Some(r) => err(field, format!("`{}` is not an integer", text(Some(r)))),
        })
    };
    let kind = int("type")?;
    let id = int("order_id")?;
    let size = int("size")?;
    let price = int("price")?;
    let direction = int("direction")?;
    let Some(event) = LobsterEvent::from_field(kind) else {
        return Err(err(
            "type",
            format!("{kind} is not a LOBSTER event type (1-7)"),
        ));
    };
    if id < 0 {
        return Err(err("order_id", format!("{id} is negative")));
    }
    if size < 0 {
        return Err(err("size", format!("{size} is negative")));
    }
    if direction != 1 && direction != -1 {
        return Err(err(
            "direction",
            format!("{direction} is not 1 (buy) or -1 (sell)"),
        ));
    }
    Ok(MessageRow {
        time,
        kind: event,
        id: id as u64,
        size,
        price,
        direction: direction as i8,
    })
}

/// The fast path for one message row; `None` sends the row to the
/// checked parser, which explains what is wrong with it.
#[inline]
fn parse_message_fast(line: &[u8]) -> Option<MessageRow> {
    let mut i = 0;
    let whole = uint_at(line, &mut i)?;
    let mut time = whole as f64;
    if line.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        let frac = uint_at(line, &mut i)?;
        time += frac as f64 / 10f64.powi((i - start) as i32);
    }
    let field = |i: &mut usize| -> Option<i64> {
        if line.get(*i) != Some(&b',') {
            return None;
        }
        *i += 1;
        let neg = line.get(*i) == Some(&b'-');
        if neg {
            *i += 1;
        }
        let v = uint_at(line, i)?;
        Some(if neg { -v } else { v })
    };
    let kind = field(&mut i)?;
    let id = field(&mut i)?;
    let size = field(&mut i)?;
    let price = field(&mut i)?;
    let direction = field(&mut i)?;
    let event = LobsterEvent::from_field(kind)?;
    let ok = i == line.len() && id >= 0 && size >= 0 && (direction == 1 || direction == -1);
    ok.then_some(MessageRow {
        time,
        kind: event,
        id: id as u64,
        size,
        price,
        direction: direction as i8,
    })
}

/// Parses a whole message file (`file` names it in errors).
///
/// A row the fast path refuses is parsed again by a checked parser, whose
/// [`ReplayError::Parse`] names the file, the 1-based line and the field.
pub fn parse_messages(file: &str, bytes: &[u8]) -> Result<Vec<MessageRow>, ReplayError> {
    let mut out = Vec::with_capacity(bytes.len() / 40);
    for (i, line) in lines(bytes).enumerate() {
        match parse_message_fast(line) {
            Some(m) => out.push(m),
            None => out.push(parse_message(file, i as u64 + 1, line)?),
        }
    }
    Ok(out)
}
