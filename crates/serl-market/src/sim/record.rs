//! What a day leaves behind: per-minute statistics, and for a recording
//! simulator the trade tape and minute-end book snapshots.

use serde::{Deserialize, Serialize};
use serl_lob::{Event, EventSink, Fill, LobsterRecorder, Side};

/// Per-minute results of the simulated day.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MinuteStats {
    /// Shares traded in each minute, by every trader (execution agents
    /// included).
    pub volume: Vec<f64>,
    /// Mid at the end of each minute, dollars (the fundamental when the
    /// book has no two-sided quote).
    pub mid: Vec<f64>,
    /// Volume-weighted trade price per minute (the mid when no trade).
    pub vwap: Vec<f64>,
    /// Quoted spread at the end of each minute, dollars.
    pub spread: Vec<f64>,
    /// Mean resting size per level (1..=5, both sides averaged) at minute
    /// ends over the day.
    pub depth: [f64; 5],
}

/// One trade on the simulated tape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TapeTrade {
    /// Microseconds since the open.
    pub time_us: u64,
    /// Dollars.
    pub price: f64,
    /// Shares.
    pub qty: u64,
    /// The aggressor's side.
    pub aggressor: Side,
    /// Owner of the aggressing order: an agent's index, or
    /// [`EXECUTION_OWNER`](crate::EXECUTION_OWNER) and above for an
    /// execution agent.
    pub taker_owner: u32,
    /// Owner of the resting order, numbered as `taker_owner`.
    pub maker_owner: u32,
}

/// The top of the book at the end of a minute: (price in dollars, shares)
/// per level, best first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BookSnapshot {
    /// The minute that ended, counted from 0 at the open.
    pub minute: usize,
    /// Bid levels, best (highest) first.
    pub bids: Vec<(f64, u64)>,
    /// Ask levels, best (lowest) first.
    pub asks: Vec<(f64, u64)>,
}

/// Everything a recorded day leaves behind besides its minute statistics:
/// what [`Simulator::finish_recorded`](crate::Simulator::finish_recorded)
/// returns for a [`Simulator::recording`](crate::Simulator::recording)
/// simulator.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Recording {
    /// Every trade of the day, in time order.
    pub trades: Vec<TapeTrade>,
    /// One snapshot per minute, at its end.
    pub snapshots: Vec<BookSnapshot>,
    /// Levels per side in each snapshot.
    pub levels: usize,
}

/// Where a recording simulator sends the book's events: the trades to the
/// tape's buffer, and every event to the LOBSTER recorder.
pub(super) struct Sinks<'a> {
    fills: Option<&'a mut Vec<Fill>>,
    lobster: Option<&'a mut LobsterRecorder>,
}

impl<'a> Sinks<'a> {
    /// The sinks for events at `seconds` after midnight.
    pub(super) fn new(
        seconds: f64,
        fills: Option<&'a mut Vec<Fill>>,
        mut lobster: Option<&'a mut LobsterRecorder>,
    ) -> Self {
        if let Some(l) = lobster.as_deref_mut() {
            l.at(seconds);
        }
        Sinks { fills, lobster }
    }
}

impl EventSink for Sinks<'_> {
    fn event(&mut self, e: Event) {
        if let (Event::Trade(f), Some(fills)) = (e, &mut self.fills) {
            fills.push(f);
        }
        if let Some(l) = &mut self.lobster {
            l.event(e);
        }
    }
}
