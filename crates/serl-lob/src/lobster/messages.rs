//! Parsing the message file: a fast path for well-formed rows, and a
//! checked parser that names the line and field of anything it refuses.

use super::digits::{lines, parse_i64, parse_seconds, uint_at, Fields};
use super::ReplayError;
use crate::OrderId;

/// One parsed message row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageRow {
    pub time: f64,
    pub kind: u8,
    pub id: OrderId,
    pub size: i64,
    pub price: i64,
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
    if !(1..=7).contains(&kind) {
        return Err(err(
            "type",
            format!("{kind} is not a LOBSTER event type (1-7)"),
        ));
    }
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
        kind: kind as u8,
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
    let ok = i == line.len()
        && (1..=7).contains(&kind)
        && id >= 0
        && size >= 0
        && (direction == 1 || direction == -1);
    ok.then_some(MessageRow {
        time,
        kind: kind as u8,
        id: id as u64,
        size,
        price,
        direction: direction as i8,
    })
}

/// Parses a whole message file.
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
