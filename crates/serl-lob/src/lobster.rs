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

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::Instant;

use rustc_hash::FxHashMap;
use serde::Serialize;

use crate::{LevelView, LobError, OrderBook, OrderId, SelfTradePolicy, Side, Ticks};

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

/// A message file and its order-book file, in memory.
pub struct LobsterInput {
    pub message_name: String,
    pub orderbook_name: String,
    pub messages: Vec<u8>,
    pub orderbook: Vec<u8>,
}

fn read(path: &Path) -> Result<Vec<u8>, ReplayError> {
    std::fs::read(path).map_err(|source| ReplayError::Io {
        path: path.to_path_buf(),
        source,
    })
}

impl LobsterInput {
    /// Opens a LOBSTER sample zip, or a message CSV with its order-book CSV
    /// (found beside it by name when not given).
    pub fn open(path: &Path, orderbook: Option<&Path>) -> Result<Self, ReplayError> {
        let is_zip = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("zip"));
        if is_zip {
            return Self::open_zip(path);
        }
        let ob_path = match orderbook {
            Some(p) => p.to_path_buf(),
            None => {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if !name.contains("message") {
                    return Err(ReplayError::MissingFile {
                        path: path.to_path_buf(),
                        what: "orderbook",
                    });
                }
                path.with_file_name(name.replace("message", "orderbook"))
            }
        };
        if !ob_path.exists() {
            return Err(ReplayError::Io {
                path: ob_path,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "order-book file not found; pass it as the second argument",
                ),
            });
        }
        Ok(LobsterInput {
            message_name: path.display().to_string(),
            orderbook_name: ob_path.display().to_string(),
            messages: read(path)?,
            orderbook: read(&ob_path)?,
        })
    }

    fn open_zip(path: &Path) -> Result<Self, ReplayError> {
        let f = std::fs::File::open(path).map_err(|source| ReplayError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let zip_err = |e: zip::result::ZipError| ReplayError::Zip {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let mut zip = zip::ZipArchive::new(f).map_err(zip_err)?;
        let mut find = |what: &'static str| -> Result<(String, Vec<u8>), ReplayError> {
            let needle = format!("_{what}_");
            let name = zip
                .file_names()
                .filter_map(|n| n.ok().map(|n| n.into_owned()))
                .find(|n| n.contains(&needle))
                .ok_or(ReplayError::MissingFile {
                    path: path.to_path_buf(),
                    what,
                })?;
            let mut entry = zip.by_name(&name).map_err(zip_err)?;
            let mut out = Vec::with_capacity(entry.size() as usize);
            entry.read_to_end(&mut out).map_err(|e| ReplayError::Zip {
                path: path.to_path_buf(),
                message: format!("{name}: {e}"),
            })?;
            Ok((format!("{}:{name}", path.display()), out))
        };
        let (message_name, messages) = find("message")?;
        let (orderbook_name, orderbook) = find("orderbook")?;
        Ok(LobsterInput {
            message_name,
            orderbook_name,
            messages,
            orderbook,
        })
    }
}

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

/// A cursor over comma-separated integer fields of one line.
struct Fields<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Fields<'a> {
    #[inline]
    fn next_raw(&mut self) -> Option<&'a [u8]> {
        if self.pos > self.b.len() {
            return None;
        }
        let start = self.pos;
        let end = memchr_comma(&self.b[start..]).map_or(self.b.len(), |i| start + i);
        self.pos = end + 1;
        Some(&self.b[start..end])
    }

    #[inline]
    fn int(&mut self) -> Option<i64> {
        parse_i64(self.next_raw()?)
    }
}

#[inline]
fn memchr_comma(b: &[u8]) -> Option<usize> {
    memchr::memchr(b',', b)
}

#[inline]
fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut v: i64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v * 10 + d as i64;
    }
    Some(if neg { -v } else { v })
}

/// Splits a buffer into lines, without the line ends.
fn lines(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    std::iter::from_fn(move || loop {
        if start >= b.len() {
            return None;
        }
        let end = memchr::memchr(b'\n', &b[start..]).map_or(b.len(), |i| start + i);
        let line = &b[start..end];
        start = end + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.is_empty() {
            return Some(line);
        }
    })
}

/// Parses LOBSTER's decimal seconds after midnight (`34200.017459617`)
/// without going through a float parser.
#[inline]
fn parse_seconds(s: &[u8]) -> Option<f64> {
    let (int, frac) = match memchr::memchr(b'.', s) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &b""[..]),
    };
    let whole = parse_i64(int)?;
    if frac.is_empty() {
        return Some(whole as f64);
    }
    if frac.len() > 15 {
        return None;
    }
    let f = parse_i64(frac)?;
    if f < 0 {
        return None;
    }
    Some(whole as f64 + f as f64 / 10f64.powi(frac.len() as i32))
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

/// Order-book rows, flattened: `4 * levels` integers per row.
pub struct BookRows {
    pub levels: usize,
    pub values: Vec<i64>,
}

impl BookRows {
    pub fn len(&self) -> usize {
        self.values.len() / (4 * self.levels)
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn row(&self, i: usize) -> &[i64] {
        let w = 4 * self.levels;
        &self.values[i * w..(i + 1) * w]
    }
}

/// Parses an order-book file; the number of levels comes from the first row.
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

/// Index of the first byte of `chunk` (little-endian) that is not an ASCII
/// digit, or 8. Borrows and carries only run towards higher bytes, so the
/// lowest flagged byte is exact.
#[inline(always)]
fn digit_run(chunk: u64) -> u32 {
    let below = chunk.wrapping_sub(0x3030_3030_3030_3030);
    let above = chunk.wrapping_add(0x4646_4646_4646_4646);
    let flags = (below | above | chunk) & 0x8080_8080_8080_8080;
    flags.trailing_zeros() / 8
}

/// The value of 8 ASCII digits, first digit in the lowest byte.
#[inline(always)]
fn eight_digits(chunk: u64) -> u64 {
    let mut v = chunk.wrapping_sub(0x3030_3030_3030_3030);
    v = (v.wrapping_mul(10)).wrapping_add(v >> 8);
    let lo = (v & 0x0000_00FF_0000_00FF).wrapping_mul(100 + (1_000_000 << 32));
    let hi = ((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32));
    (lo.wrapping_add(hi)) >> 32
}

const POW10: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// Parses an unsigned integer at `*i`, eight digits at a time, and moves
/// `*i` past it. Returns `None` for no digits or more than 18 (so that the
/// value always fits without overflow checks).
#[inline(always)]
fn uint_at(b: &[u8], i: &mut usize) -> Option<i64> {
    let mut v: u64 = 0;
    let mut digits = 0u32;
    while *i + 8 <= b.len() {
        let chunk = u64::from_le_bytes(b[*i..*i + 8].try_into().ok()?);
        let n = digit_run(chunk);
        if n == 0 {
            return (digits > 0 && digits <= 18).then_some(v as i64);
        }
        // Left-align the n digits and pad the front with '0's.
        let padded = if n == 8 {
            chunk
        } else {
            (chunk << (8 * (8 - n))) | (0x3030_3030_3030_3030u64 >> (8 * n))
        };
        v = v
            .wrapping_mul(POW10[n as usize])
            .wrapping_add(eight_digits(padded));
        digits += n;
        *i += n as usize;
        if n < 8 {
            return (digits <= 18).then_some(v as i64);
        }
        if digits > 18 {
            return None;
        }
    }
    while let Some(&c) = b.get(*i) {
        if !c.is_ascii_digit() {
            break;
        }
        if digits >= 18 {
            return None;
        }
        v = v * 10 + (c - b'0') as u64;
        digits += 1;
        *i += 1;
    }
    (digits > 0).then_some(v as i64)
}

fn parse_orderbook_fast(b: &[u8], width: usize) -> Option<Vec<i64>> {
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

/// Order-book rows read one at a time, straight from the file's bytes.
///
/// Consecutive rows differ in a few fields (one size, or a level shifting),
/// so a field whose text equals the previous row's is not parsed again, and
/// no table of every row is ever built: the 40-field rows of a level-10 file
/// are most of the replay's input, and parsing them in full cost more than
/// the replay itself. Anything unusual (`None` from [`RowCursor::next_row`]
/// with bytes left) is for the checked parser to explain.
struct RowCursor<'a> {
    b: &'a [u8],
    pos: usize,
    /// The previous row's field spans (start, length) and values.
    spans: Vec<(usize, usize)>,
    values: Vec<i64>,
}

impl<'a> RowCursor<'a> {
    fn new(b: &'a [u8], width: usize) -> Self {
        RowCursor {
            b,
            pos: 0,
            spans: vec![(0, 0); width],
            values: vec![0; width],
        }
    }

    fn at_end(&mut self) -> bool {
        while matches!(self.b.get(self.pos), Some(b'\n' | b'\r')) {
            self.pos += 1;
        }
        self.pos >= self.b.len()
    }

    /// The next row, or `None` at the end of the file or on a row the fast
    /// path does not accept (tell them apart with [`RowCursor::at_end`]).
    #[inline]
    fn next_row(&mut self) -> Option<&[i64]> {
        if self.at_end() {
            return None;
        }
        let (b, width) = (self.b, self.values.len());
        let mut pos = self.pos;
        for k in 0..width {
            let start = pos;
            let last = k + 1 == width;
            // The common case in one load: the same text as the previous
            // row's field, followed by the separator this field needs.
            let (ps, pl) = self.spans[k];
            if pl < 8 && start + 8 <= b.len() && ps + 8 <= b.len() {
                let x = u64::from_le_bytes(b[start..start + 8].try_into().ok()?);
                let y = u64::from_le_bytes(b[ps..ps + 8].try_into().ok()?);
                let mask = (1u64 << (8 * pl)) - 1;
                let sep = (x >> (8 * pl)) as u8;
                let sep_ok = if last {
                    sep == b'\n' || sep == b'\r'
                } else {
                    sep == b','
                };
                if (x ^ y) & mask == 0 && sep_ok {
                    self.spans[k] = (start, pl);
                    pos = start + pl + 1;
                    continue;
                }
            }
            let neg = b[pos] == b'-';
            pos += neg as usize;
            let digits = pos;
            loop {
                if pos + 8 <= b.len() {
                    let chunk = u64::from_le_bytes(b[pos..pos + 8].try_into().ok()?);
                    let n = digit_run(chunk) as usize;
                    pos += n;
                    if n < 8 {
                        break;
                    }
                } else {
                    while pos < b.len() && b[pos].is_ascii_digit() {
                        pos += 1;
                    }
                    break;
                }
            }
            if pos == digits {
                return None;
            }
            match b.get(pos) {
                Some(b',') if !last => {}
                Some(b'\n' | b'\r') | None if last => {}
                _ => return None,
            }
            if pl != pos - start || b[ps..ps + pl] != b[start..pos] {
                let mut i = digits;
                let v = uint_at(b, &mut i)?;
                self.values[k] = if neg { -v } else { v };
            }
            self.spans[k] = (start, pos - start);
            pos += 1;
        }
        self.pos = pos.min(b.len());
        Some(&self.values)
    }
}

/// Rows per chunk handed from the reader thread to the replay.
const CHUNK_ROWS: usize = 4096;

enum Chunk {
    /// `n` rows of values, row after row.
    Rows(Vec<i64>, usize),
    /// The reader stopped: the end of the file, or a row for the checked
    /// parser.
    Stop,
}

/// The reader thread: rows into chunks, buffers recycled through `free`.
fn read_rows(ob: &[u8], width: usize, full: SyncSender<Chunk>, free: Receiver<Vec<i64>>) {
    let mut cursor = RowCursor::new(ob, width);
    loop {
        let mut buf = free
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK_ROWS * width));
        buf.clear();
        let mut n = 0;
        while n < CHUNK_ROWS {
            match cursor.next_row() {
                Some(v) => buf.extend_from_slice(v),
                None => break,
            }
            n += 1;
        }
        let stopped = n < CHUNK_ROWS;
        if n > 0 && full.send(Chunk::Rows(buf, n)).is_err() {
            return;
        }
        if stopped {
            let _ = full.send(Chunk::Stop);
            return;
        }
    }
}

/// The replay's side of the reader thread: row `i`, in order, falling back
/// to a full checked parse when the reader stops early (which names the
/// line of a malformed row, or reads what the fast path would not).
struct RowFeed<'a> {
    full: Receiver<Chunk>,
    free: SyncSender<Vec<i64>>,
    cur: Vec<i64>,
    rows: usize,
    at: usize,
    width: usize,
    fallback: Option<BookRows>,
    ob: &'a [u8],
    name: &'a str,
    /// Messages to replay (rows wanted).
    messages: usize,
}

impl RowFeed<'_> {
    fn row(&mut self, i: usize) -> Result<&[i64], ReplayError> {
        if self.fallback.is_none() && self.at == self.rows {
            let used = std::mem::take(&mut self.cur);
            let _ = self.free.try_send(used);
            match self.full.recv() {
                Ok(Chunk::Rows(buf, n)) => {
                    self.cur = buf;
                    self.rows = n;
                    self.at = 0;
                }
                Ok(Chunk::Stop) | Err(_) => {
                    self.fallback = Some(parse_orderbook(self.name, self.ob)?);
                }
            }
        }
        if let Some(all) = &self.fallback {
            if i >= all.len() {
                return Err(ReplayError::RowCount {
                    messages: self.messages,
                    rows: all.len(),
                });
            }
            return Ok(all.row(i));
        }
        let w = self.width;
        self.at += 1;
        Ok(&self.cur[(self.at - 1) * w..self.at * w])
    }
}

/// Non-empty lines, as [`lines`] sees them, counted without parsing.
fn count_lines(b: &[u8]) -> usize {
    lines(b).count()
}

fn parse_orderbook_checked(
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

#[derive(Debug, Clone, Serialize)]
pub struct Mismatch {
    /// 1-based row (= message line).
    pub line: u64,
    pub side: &'static str,
    pub level: usize,
    /// LOBSTER's (price, size).
    pub expected: (i64, i64),
    /// The engine's (price, size), in LOBSTER's price units.
    pub actual: (i64, i64),
}

#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    pub message_file: String,
    pub orderbook_file: String,
    pub levels: usize,
    pub messages: usize,
    /// Messages per LOBSTER type 1..=7.
    pub by_type: [u64; 7],
    pub mismatched_rows: usize,
    pub first_mismatches: Vec<Mismatch>,
    /// Lots seeded as anonymous liquidity (the opening book and levels that
    /// came into view later).
    pub anonymous_seeded: u64,
    /// Lots removed from levels as they came into view (cancels LOBSTER did
    /// not record because the level was deeper than *L*).
    pub unrecorded_cancelled: u64,
    /// Cancels and executions of unknown orders at levels outside the view.
    pub unobserved_messages: u64,
    pub resting_orders_at_end: usize,
    /// Seconds parsing the message file and counting the order-book rows.
    /// The rows themselves are read on a second thread while the replay
    /// runs, so their time is inside `replay_seconds`.
    pub parse_seconds: f64,
    /// Seconds applying and checking every message.
    pub replay_seconds: f64,
    /// Messages per second, parsing included.
    pub messages_per_second: f64,
}

pub struct ReplayOptions {
    /// Tick size in LOBSTER price units (1/10000 dollar): 100 is one cent.
    pub tick: i64,
    /// How many mismatches to keep for the report.
    pub keep_mismatches: usize,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            tick: 100,
            keep_mismatches: 5,
        }
    }
}

/// The levels one side of a row shows.
#[derive(Debug, Clone, Default)]
struct Window {
    /// (price in LOBSTER units, size), best first. Kept in raw units so
    /// that filling a window per message needs no division.
    levels: Vec<(i64, i64)>,
    tick: i64,
    /// All *L* slots are used, so deeper levels may exist unseen.
    full: bool,
}

impl Window {
    fn from_row(row: &[i64], levels: usize, off: usize, tick: i64) -> Self {
        let mut w = Window::default();
        w.fill(row, levels, off, tick);
        w
    }

    /// Refills from a row, reusing the allocation.
    fn fill(&mut self, row: &[i64], levels: usize, off: usize, tick: i64) {
        let w = self;
        w.levels.clear();
        for k in 0..levels {
            let (price, size) = (row[4 * k + off], row[4 * k + off + 1]);
            if price != EMPTY_ASK && price != EMPTY_BID && size > 0 {
                w.levels.push((price, size));
            }
        }
        w.full = w.levels.len() == levels;
        w.tick = tick;
    }

    fn shows(&self, p: Ticks) -> bool {
        let raw = p * self.tick;
        self.levels.iter().any(|l| l.0 == raw)
    }

    fn size_at(&self, p: Ticks) -> i64 {
        let raw = p * self.tick;
        self.levels.iter().find(|l| l.0 == raw).map_or(0, |l| l.1)
    }

    /// Whether the row would show a level at `p` if the book had one.
    fn covers(&self, side: Side, p: Ticks) -> bool {
        match (self.full, self.levels.last()) {
            (false, _) | (true, None) => true,
            (true, Some(&(worst, _))) => match side {
                Side::Ask => p * self.tick <= worst,
                Side::Bid => p * self.tick >= worst,
            },
        }
    }
}

struct Replayer<'a> {
    book: OrderBook,
    tick: i64,
    file: &'a str,
    levels: usize,
    anon: FxHashMap<(Side, Ticks), OrderId>,
    next_anon: OrderId,
    /// What the previous row showed: [asks, bids].
    prev: [Window; 2],
    /// Spare windows, swapped with `prev` so that no row allocates.
    next: [Window; 2],
    /// Ids removed as unrecorded cancels; later messages about them are
    /// about liquidity the replay already took out.
    reconciled: rustc_hash::FxHashSet<OrderId>,
    seeded: u64,
    removed: u64,
    unobserved: u64,
    scratch: Vec<Ticks>,
}

fn side_of(direction: i8) -> Side {
    if direction == 1 {
        Side::Bid
    } else {
        Side::Ask
    }
}

fn window_ix(side: Side) -> usize {
    match side {
        Side::Ask => 0,
        Side::Bid => 1,
    }
}

impl Replayer<'_> {
    fn ticks(&self, line: u64, price: i64) -> Result<Ticks, ReplayError> {
        if price % self.tick != 0 {
            return Err(ReplayError::Engine {
                file: self.file.into(),
                line,
                error: LobError::OffTick {
                    raw: price,
                    tick: self.tick,
                },
            });
        }
        Ok(price / self.tick)
    }

    fn engine(&self, line: u64) -> impl Fn(LobError) -> ReplayError + '_ {
        move |error| ReplayError::Engine {
            file: self.file.into(),
            line,
            error,
        }
    }

    /// Adds `qty` anonymous lots at the front of a level.
    fn seed(&mut self, side: Side, p: Ticks, qty: u64) -> Result<(), LobError> {
        if qty == 0 {
            return Ok(());
        }
        self.seeded += qty;
        let mut total = qty;
        if let Some(&id) = self.anon.get(&(side, p)) {
            if let Some(o) = self.book.order(id) {
                // Grow the existing anonymous order, keeping it in front.
                self.book.cancel(id, &mut ())?;
                total += o.qty;
            }
        }
        let id = self.next_anon;
        self.next_anon += 1;
        self.anon.insert((side, p), id);
        self.book.seed_front(id, REPLAY_OWNER, side, p, total)
    }

    /// Removes `qty` lots from a level, newest orders first: the ones that
    /// arrived or were cancelled while the level was out of view are the
    /// most recent. Returns the lots it could not find.
    fn take_from_level(
        &mut self,
        side: Side,
        p: Ticks,
        mut qty: u64,
        execute: bool,
    ) -> Result<u64, LobError> {
        let queue = self.book.queue(side, p);
        for o in queue.iter().rev() {
            if qty == 0 {
                break;
            }
            let take = qty.min(o.qty);
            if execute {
                self.book.execute(o.id, take, &mut ())?;
            } else {
                self.book.reduce(o.id, take, &mut ())?;
            }
            if take == o.qty && self.anon.get(&(side, p)) != Some(&o.id) {
                self.reconciled.insert(o.id);
            }
            qty -= take;
        }
        Ok(qty)
    }

    /// A cancel (types 2, 3) or execution (4) of `size` lots at a level.
    ///
    /// The named order gives what it holds. The order may hold less than the
    /// message says when it rested before the recording, arrived while its
    /// level was out of view, or lost lots to an unrecorded cancel that the
    /// replay had to assign to some order at its level; the rest then comes
    /// from the level's anonymous order, then from its newest orders.
    fn remove_at_level(&mut self, line: u64, m: &MessageRow, p: Ticks) -> Result<(), ReplayError> {
        let side = side_of(m.direction);
        let execute = m.kind == 4;
        let size = m.size as u64;
        let mut left = size;
        if let Some(o) = self.book.order(m.id) {
            let take = left.min(o.qty);
            let r = match (execute, m.kind == 3 && o.qty > size) {
                (true, _) => self.book.execute(m.id, take, &mut ()).map(|_| ()),
                (false, false) => self.book.reduce(m.id, take, &mut ()).map(|_| ()),
                (false, true) => {
                    // Deleted with more left than LOBSTER says it had: the
                    // excess belongs to an order the replay took lots from
                    // by mistake, so it stays as anonymous liquidity.
                    let excess = o.qty - size;
                    self.book
                        .cancel(m.id, &mut ())
                        .and_then(|_| self.seed(side, p, excess))
                }
            };
            r.map_err(self.engine(line))?;
            left -= take;
            if left == 0 {
                return Ok(());
            }
        } else if !self.prev[window_ix(side)].shows(p) {
            self.unobserved += 1;
            return Ok(());
        }
        if let Some(&anon) = self.anon.get(&(side, p)) {
            if let Some(o) = self.book.order(anon) {
                let take = left.min(o.qty);
                let r = if execute {
                    self.book.execute(anon, take, &mut ())
                } else {
                    self.book.reduce(anon, take, &mut ())
                };
                r.map_err(self.engine(line))?;
                left -= take;
            }
        }
        // Then the newest orders: NASDAQ replaces an order under a new id,
        // and a replace that leaves the visible book alone is not in the
        // file, so the lots of a never-seen id can sit under an old one.
        if left > 0 {
            left = self
                .take_from_level(side, p, left, execute)
                .map_err(self.engine(line))?;
        }
        if left > 0 && !self.reconciled.contains(&m.id) {
            return Err(ReplayError::Inconsistent {
                file: self.file.into(),
                line,
                message: format!(
                    "order id {} is unknown and the visible level {} {:?} holds only {} of its {size} lots",
                    m.id,
                    p * self.tick,
                    side,
                    size - left
                ),
            });
        }
        Ok(())
    }

    fn apply(&mut self, line: u64, m: &MessageRow) -> Result<(), ReplayError> {
        let side = side_of(m.direction);
        let size = m.size as u64;
        match m.kind {
            1 => {
                let p = self.ticks(line, m.price)?;
                self.book
                    .submit(
                        crate::NewOrder {
                            id: m.id,
                            owner: REPLAY_OWNER,
                            side,
                            kind: crate::OrderKind::Limit { price: p },
                            qty: size,
                        },
                        &mut (),
                    )
                    .map_err(self.engine(line))?;
            }
            2..=4 => {
                let p = self.ticks(line, m.price)?;
                self.remove_at_level(line, m, p)?;
            }
            _ => {} // hidden execution, cross trade, halt: the visible book is unchanged
        }
        Ok(())
    }

    /// Brings levels that just came into view to the row's sizes, then makes
    /// this row the previous one. Returns true when the book already agreed
    /// with the row on both sides, so nothing needed checking.
    fn reconcile(&mut self, row: &[i64]) -> Result<bool, LobError> {
        let mut agreed = true;
        for (side, off) in [(Side::Ask, 0usize), (Side::Bid, 2usize)] {
            let wi = window_ix(side);
            let mut now = std::mem::take(&mut self.next[wi]);
            now.fill(row, self.levels, off, self.tick);
            let same = {
                let mut ours = self.book.levels(side).take(self.levels);
                let tick = self.tick;
                now.levels.iter().all(|&(p, q)| {
                    ours.next()
                        .is_some_and(|l| l.price * tick == p && l.qty as i64 == q)
                }) && ours.next().is_none()
            };
            if same {
                self.next[wi] = std::mem::replace(&mut self.prev[wi], now);
                continue;
            }
            agreed = false;
            let mut prices = std::mem::take(&mut self.scratch);
            prices.clear();
            prices.extend(now.levels.iter().map(|l| l.0 / self.tick));
            prices.extend(
                self.book
                    .levels(side)
                    .map(|l| l.price)
                    .take_while(|&p| now.covers(side, p)),
            );
            for &p in &prices {
                if self.prev[wi].shows(p) {
                    continue;
                }
                let ours = self.book.qty_at(side, p) as i64;
                let want = now.size_at(p);
                if want > ours {
                    self.seed(side, p, (want - ours) as u64)?;
                } else if want < ours {
                    self.removed += (ours - want) as u64;
                    self.take_from_level(side, p, (ours - want) as u64, false)?;
                }
            }
            self.scratch = prices;
            self.next[wi] = std::mem::replace(&mut self.prev[wi], now);
        }
        Ok(agreed)
    }
}

/// Builds the book before message 0: row 0 with message 0 taken back out.
fn opening_book(r: &mut Replayer, row0: &[i64], m0: &MessageRow) -> Result<(), ReplayError> {
    let mut book: Vec<(Side, Ticks, i64)> = Vec::new();
    for (side, off) in [(Side::Ask, 0usize), (Side::Bid, 2usize)] {
        let w = Window::from_row(row0, r.levels, off, r.tick);
        for &(raw, size) in &w.levels {
            book.push((side, r.ticks(1, raw)?, size));
        }
        r.prev[window_ix(side)] = w;
    }
    if (1..=4).contains(&m0.kind) {
        let (side0, p0) = (side_of(m0.direction), r.ticks(1, m0.price)?);
        let delta = if m0.kind == 1 { -m0.size } else { m0.size };
        match book.iter_mut().find(|(s, p, _)| *s == side0 && *p == p0) {
            Some(l) => l.2 += delta,
            None => book.push((side0, p0, delta)),
        }
    }
    for &(side, p, size) in &book {
        if size < 0 {
            return Err(ReplayError::Inconsistent {
                file: r.file.into(),
                line: 1,
                message: "the first message removes more than the first order-book row holds"
                    .into(),
            });
        }
        r.seed(side, p, size as u64).map_err(r.engine(1))?;
    }
    Ok(())
}

/// Replays a LOBSTER day and checks every row.
pub fn replay(input: &LobsterInput, opts: &ReplayOptions) -> Result<ReplayReport, ReplayError> {
    let t0 = Instant::now();
    let ob = &input.orderbook[..];
    let width = match lines(ob).next() {
        Some(first) => first.iter().filter(|&&c| c == b',').count() + 1,
        None => 0,
    };
    if width == 0 || width % 4 != 0 {
        // The checked parser says what is wrong with the first row.
        parse_orderbook(&input.orderbook_name, ob)?;
    }
    // Two threads: one reads the order-book rows (most of the input) into
    // chunks while the other parses the messages and replays them.
    std::thread::scope(|scope| {
        let (full_tx, full_rx) = sync_channel(4);
        let (free_tx, free_rx) = sync_channel(8);
        scope.spawn(move || read_rows(ob, width, full_tx, free_rx));
        let msgs = parse_messages(&input.message_name, &input.messages)?;
        let row_count = count_lines(ob);
        if msgs.len() != row_count {
            return Err(ReplayError::RowCount {
                messages: msgs.len(),
                rows: row_count,
            });
        }
        let mut feed = RowFeed {
            full: full_rx,
            free: free_tx,
            cur: Vec::new(),
            rows: 0,
            at: 0,
            width,
            fallback: None,
            ob,
            name: &input.orderbook_name,
            messages: msgs.len(),
        };
        replay_rows(input, opts, &msgs, &mut feed, t0)
    })
}

fn replay_rows(
    input: &LobsterInput,
    opts: &ReplayOptions,
    msgs: &[MessageRow],
    feed: &mut RowFeed,
    t0: Instant,
) -> Result<ReplayReport, ReplayError> {
    let parse_seconds = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let levels = feed.width / 4;
    let mut r = Replayer {
        book: OrderBook::with_capacity(SelfTradePolicy::Allow, 1 << 16),
        tick: opts.tick,
        file: &input.message_name,
        levels,
        anon: FxHashMap::default(),
        next_anon: ANON_BASE,
        prev: Default::default(),
        next: Default::default(),
        reconciled: Default::default(),
        seeded: 0,
        removed: 0,
        unobserved: 0,
        scratch: Vec::new(),
    };
    let mut by_type = [0u64; 7];
    let mut mismatched_rows = 0;
    let mut first_mismatches = Vec::new();
    let mut asks: Vec<LevelView> = Vec::with_capacity(levels);
    let mut bids: Vec<LevelView> = Vec::with_capacity(levels);
    for (i, m) in msgs.iter().enumerate() {
        let line = i as u64 + 1;
        let row = feed.row(i)?;
        if i == 0 {
            opening_book(&mut r, row, m)?;
        }
        by_type[m.kind as usize - 1] += 1;
        r.apply(line, m)?;
        if r.reconcile(row).map_err(r.engine(line))? {
            continue;
        }
        r.book.depth_into(Side::Ask, levels, &mut asks);
        r.book.depth_into(Side::Bid, levels, &mut bids);
        let mut bad = false;
        for k in 0..levels {
            for (side, off, got, empty) in
                [("ask", 0, &asks, EMPTY_ASK), ("bid", 2, &bids, EMPTY_BID)]
            {
                let expected = (row[4 * k + off], row[4 * k + off + 1]);
                let actual = got
                    .get(k)
                    .map_or((empty, 0), |l| (l.price * opts.tick, l.qty as i64));
                if expected != actual {
                    if !bad && first_mismatches.len() < opts.keep_mismatches {
                        first_mismatches.push(Mismatch {
                            line,
                            side,
                            level: k + 1,
                            expected,
                            actual,
                        });
                    }
                    bad = true;
                }
            }
        }
        if bad {
            mismatched_rows += 1;
        }
    }
    let replay_seconds = t1.elapsed().as_secs_f64();
    Ok(ReplayReport {
        message_file: input.message_name.clone(),
        orderbook_file: input.orderbook_name.clone(),
        levels,
        messages: msgs.len(),
        by_type,
        mismatched_rows,
        first_mismatches,
        anonymous_seeded: r.seeded,
        unrecorded_cancelled: r.removed,
        unobserved_messages: r.unobserved,
        resting_orders_at_end: r.book.len(),
        parse_seconds,
        replay_seconds,
        messages_per_second: msgs.len() as f64 / (parse_seconds + replay_seconds),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eight_digit_parser_agrees_with_the_standard_one() {
        let cases = [
            "0",
            "7",
            "42",
            "2239500",
            "12345678",
            "123456789",
            "9999999999",
            "100000000000000000",
        ];
        for c in cases {
            let text = format!("{c},");
            let mut i = 0;
            assert_eq!(
                uint_at(text.as_bytes(), &mut i),
                Some(c.parse().unwrap()),
                "{c}"
            );
            assert_eq!(i, c.len());
        }
        let mut i = 0;
        assert_eq!(uint_at(b"x1", &mut i), None);
        assert_eq!(
            uint_at(b"1234567890123456789", &mut 0),
            None,
            "more than 18 digits"
        );
    }

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
