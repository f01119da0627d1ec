//! Streaming the order-book rows: a reader thread turns the file's bytes
//! into chunks of rows while the replay consumes them in order.

use std::sync::mpsc::{Receiver, SyncSender};

use super::digits::{digit_run, uint_at};
use super::orderbook::{parse_orderbook, BookRows};
use super::ReplayError;

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
pub(super) const CHUNK_ROWS: usize = 4096;

pub(super) enum Chunk {
    /// `n` rows of values, row after row.
    Rows(Vec<i64>, usize),
    /// The reader stopped: the end of the file, or a row for the checked
    /// parser.
    Stop,
}

/// The reader thread: rows into chunks, buffers recycled through `free`.
pub(super) fn read_rows(
    ob: &[u8],
    width: usize,
    full: SyncSender<Chunk>,
    free: Receiver<Vec<i64>>,
) {
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
pub(super) struct RowFeed<'a> {
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

impl<'a> RowFeed<'a> {
    /// The replay's end of the channels to [`read_rows`], for a file of
    /// `width` fields a row and a day of `messages` messages.
    pub(super) fn new(
        full: Receiver<Chunk>,
        free: SyncSender<Vec<i64>>,
        width: usize,
        ob: &'a [u8],
        name: &'a str,
        messages: usize,
    ) -> Self {
        RowFeed {
            full,
            free,
            cur: Vec::new(),
            rows: 0,
            at: 0,
            width,
            fallback: None,
            ob,
            name,
            messages,
        }
    }

    /// Fields per row.
    pub(super) fn width(&self) -> usize {
        self.width
    }

    #[inline]
    pub(super) fn row(&mut self, i: usize) -> Result<&[i64], ReplayError> {
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
