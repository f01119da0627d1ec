//! Parsing a whole order-book file into a table of rows: the fallback
//! when the streaming reader ([`super::rows`]) stops on a row it does not
//! accept, which names the line and field at fault.

use super::digits::{lines, uint_at, Fields};
use super::ReplayError;
use crate::Side;

/// The rows of a LOBSTER order-book file, flattened: `4 * levels` integers
/// per row (ask price, ask size, bid price, bid size, level by level, in
/// LOBSTER's raw units; an empty level holds the placeholder prices
/// ±9,999,999,999 and size 0).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BookRows {
    pub(super) levels: usize,
    pub(super) values: Vec<i64>,
}

impl BookRows {
    /// Rows of `levels` levels from their flattened values.
    pub(super) fn from_values(levels: usize, values: Vec<i64>) -> Self {
        BookRows { levels, values }
    }

    /// Levels per side in each row.
    pub fn levels(&self) -> usize {
        self.levels
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.values.len() / (4 * self.levels.max(1))
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Row `i` (0-based): ask price, ask size, bid price, bid size per level.
    pub fn row(&self, i: usize) -> &[i64] {
        let w = 4 * self.levels;
        &self.values[i * w..(i + 1) * w]
    }

    /// A copy of rows `range`.
    pub fn slice(&self, range: std::ops::Range<usize>) -> BookRows {
        let w = 4 * self.levels;
        BookRows {
            levels: self.levels,
            values: self.values[range.start * w..range.end * w].to_vec(),
        }
    }

    /// Price and size of level `k` (0: the best) of `side` in row `i`
    /// ([`book_level`]).
    pub fn level(&self, i: usize, side: Side, k: usize) -> (i64, i64) {
        book_level(self.row(i), side, k)
    }
}

/// Price and size of level `k` (0: the best) of `side` in an order-book
/// row, in LOBSTER's raw units (an empty level: its placeholder price and
/// size 0).
#[inline]
pub fn book_level(row: &[i64], side: Side, k: usize) -> (i64, i64) {
    let at = 4 * k + if side == Side::Bid { 2 } else { 0 };
    (row[at], row[at + 1])
}

/// Parses an order-book file (its name is for errors); the number of
/// levels comes from the first row.
///
/// One pass over the bytes with no per-field search: this file is several
/// times larger than the message file and dominates parsing. Anything the
/// fast pass does not accept is handed to the line-by-line parser, which
/// names the line and field at fault.
pub fn parse_orderbook(file: &str, bytes: &[u8]) -> Result<BookRows, ReplayError> {
    let first = lines(bytes).next().ok_or_else(|| ReplayError::Parse {
        file: file.into(),
        line: 1,
        field: "ask_price_1",
        message: "empty order-book file".into(),
    })?;
    let width = first.iter().filter(|&&c| c == b',').count() + 1;
    if width % 4 != 0 {
        return Err(ReplayError::Parse {
            file: file.into(),
            line: 1,
            field: "row",
            message: format!("{width} fields; an order-book row has 4 per level"),
        });
    }
    match parse_orderbook_fast(bytes, width) {
        Some(values) => Ok(BookRows {
            levels: width / 4,
            values,
        }),
        None => parse_orderbook_checked(file, bytes, width),
    }
}

pub(super) fn parse_orderbook_fast(b: &[u8], width: usize) -> Option<Vec<i64>> {
    let mut values = Vec::with_capacity(b.len() / 6);
    let mut i = 0;
    let mut in_row = 0usize;
    while i < b.len() {
        match b[i] {
            b'\n' | b'\r' if in_row == 0 => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let neg = b[i] == b'-';
        if neg {
            i += 1;
        }
        let v = uint_at(b, &mut i)?;
        values.push(if neg { -v } else { v });
        in_row += 1;
        match b.get(i) {
            Some(b',') if in_row < width => i += 1,
            Some(b'\n') | Some(b'\r') | None if in_row == width => {
                in_row = 0;
                i += 1;
            }
            _ => return None,
        }
    }
    (in_row == 0).then_some(values)
}

/// Non-empty lines, as [`lines`] sees them, counted without parsing.
pub(super) fn count_lines(b: &[u8]) -> usize {
    lines(b).count()
}

pub(super) fn parse_orderbook_checked(
    file: &str,
    bytes: &[u8],
    width: usize,
) -> Result<BookRows, ReplayError> {
    let mut values = Vec::with_capacity(bytes.len() / 6);
    for (i, line) in lines(bytes).enumerate() {
        let mut f = Fields { b: line, pos: 0 };
        for k in 0..width {
            match f.int() {
                Some(v) => values.push(v),
                None => {
                    return Err(ReplayError::Parse {
                        file: file.into(),
                        line: i as u64 + 1,
                        field: ["ask_price", "ask_size", "bid_price", "bid_size"][k % 4],
                        message: format!(
                            "level {}: not an integer, or fewer than {width} fields",
                            k / 4 + 1
                        ),
                    })
                }
            }
        }
        if f.next_raw().is_some() {
            return Err(ReplayError::Parse {
                file: file.into(),
                line: i as u64 + 1,
                field: "row",
                message: format!("more than {width} fields"),
            });
        }
    }
    Ok(BookRows {
        levels: width / 4,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_and_checked_orderbook_parsers_agree() {
        let text = b"2239500,100,2231800,100\r\n2239500,100,-9999999999,0\n";
        let fast = parse_orderbook_fast(text, 4).unwrap();
        let checked = parse_orderbook_checked("x", text, 4).unwrap().values;
        assert_eq!(fast, checked);
        assert_eq!(
            fast,
            vec![2239500, 100, 2231800, 100, 2239500, 100, -9999999999, 0]
        );
        assert!(parse_orderbook_fast(b"1,2,3\n", 4).is_none());
        assert!(parse_orderbook_fast(b"1,2,3,4,5\n", 4).is_none());
    }
}
