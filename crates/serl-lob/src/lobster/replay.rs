//! Replaying a whole day: the two threads, the per-message loop, and the
//! report.

use std::sync::mpsc::sync_channel;
use std::time::Instant;

use serde::Serialize;

use super::compare::{Mismatch, RowCheck};
use super::digits::lines;
use super::input::LobsterInput;
use super::messages::{parse_messages, MessageRow};
use super::orderbook::{count_lines, parse_orderbook};
use super::replayer::{opening_book, Replayer};
use super::rows::{read_rows, RowFeed};
use super::ReplayError;

/// What a replay found: how well the engine's book matched LOBSTER's after
/// every message, what it had to assume, and how fast it ran.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    /// The message file's name ([`LobsterInput::message_name`]).
    pub message_file: String,
    /// The order-book file's name.
    pub orderbook_file: String,
    /// Levels a side in the order-book file (*L*).
    pub levels: usize,
    /// Messages replayed (= order-book rows checked).
    pub messages: usize,
    /// Messages per LOBSTER type: `by_type[e.code() as usize - 1]` counts
    /// [`LobsterEvent`](crate::LobsterEvent) `e`.
    pub by_type: [u64; 7],
    /// Rows where some visible level differed from the engine's book.
    pub mismatched_rows: usize,
    /// The first mismatching rows (at most
    /// [`ReplayOptions::keep_mismatches`]), one mismatch each.
    pub first_mismatches: Vec<Mismatch>,
    /// Lots seeded as anonymous liquidity (the opening book and levels that
    /// came into view later).
    pub anonymous_seeded: u64,
    /// Lots removed from levels as they came into view (cancels LOBSTER did
    /// not record because the level was deeper than *L*).
    pub unrecorded_cancelled: u64,
    /// Cancels and executions of unknown orders at levels outside the view.
    pub unobserved_messages: u64,
    /// Orders (anonymous ones included) left in the book after the last
    /// message.
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

/// How to replay: the price grid and how much detail to keep.
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

/// Replays a LOBSTER day through an [`OrderBook`](crate::OrderBook) and
/// checks the book against every order-book row.
///
/// Mismatches are counted in the report, not returned as errors; an error
/// means the files could not be read as LOBSTER files or contradict each
/// other (see [`ReplayError`]).
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
        let mut feed = RowFeed::new(
            full_rx,
            free_tx,
            width,
            ob,
            &input.orderbook_name,
            msgs.len(),
        );
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
    let levels = feed.width() / 4;
    let mut r = Replayer::new(&input.message_name, opts.tick, levels);
    let mut by_type = [0u64; 7];
    let mut check = RowCheck::new(levels, opts);
    for (i, m) in msgs.iter().enumerate() {
        let line = i as u64 + 1;
        let row = feed.row(i)?;
        if i == 0 {
            opening_book(&mut r, row, m)?;
        }
        by_type[m.kind.code() as usize - 1] += 1;
        r.apply(line, m)?;
        // Reconciling already compared the levels when they all agree; only
        // a row with some difference needs the level-by-level check.
        if r.reconcile(row).map_err(r.engine(line))? {
            continue;
        }
        check.compare(&r.book, line, row);
    }
    let replay_seconds = t1.elapsed().as_secs_f64();
    Ok(ReplayReport {
        message_file: input.message_name.clone(),
        orderbook_file: input.orderbook_name.clone(),
        levels,
        messages: msgs.len(),
        by_type,
        mismatched_rows: check.mismatched_rows,
        first_mismatches: check.first_mismatches,
        anonymous_seeded: r.seeded,
        unrecorded_cancelled: r.removed,
        unobserved_messages: r.unobserved,
        resting_orders_at_end: r.book.len(),
        parse_seconds,
        replay_seconds,
        messages_per_second: msgs.len() as f64 / (parse_seconds + replay_seconds),
    })
}

impl ReplayReport {
    /// Every row matched the engine's book.
    pub fn matched(&self) -> bool {
        self.mismatched_rows == 0
    }
}

/// The report as `serl lob replay` prints it.
impl std::fmt::Display for ReplayReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "replayed   {}", self.message_file)?;
        writeln!(
            f,
            "against    {} ({} levels)",
            self.orderbook_file, self.levels
        )?;
        let t = self.by_type;
        writeln!(
            f,
            "messages   {} (submit {}, partial cancel {}, delete {}, execute {}, hidden {}, cross {}, halt {})",
            self.messages, t[0], t[1], t[2], t[3], t[4], t[5], t[6]
        )?;
        writeln!(f, "mismatched rows  {}", self.mismatched_rows)?;
        for m in &self.first_mismatches {
            writeln!(
                f,
                "  line {}: {} level {}: LOBSTER ({}, {}), engine ({}, {})",
                m.line, m.side, m.level, m.expected.0, m.expected.1, m.actual.0, m.actual.1
            )?;
        }
        writeln!(
            f,
            "anonymous  {} lots seeded; {} messages beyond the visible depth",
            self.anonymous_seeded, self.unobserved_messages
        )?;
        writeln!(
            f,
            "throughput {:.2} M msg/s end to end (parse {:.1} ms, replay+check {:.1} ms)",
            self.messages_per_second / 1e6,
            self.parse_seconds * 1e3,
            self.replay_seconds * 1e3
        )
    }
}
