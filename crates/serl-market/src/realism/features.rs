//! What a LOBSTER day is measured by: per-message samples of the book and
//! of the order flow, each tagged with its minute (the bootstrap's block).
//!
//! The same code reads a real LOBSTER day and a simulated one written by
//! [`serl_lob::LobsterRecorder`], so a difference in a score is a difference
//! in the days, never in how they were read.

use std::collections::HashMap;

use serl_lob::{BookRows, LobsterEvent, MessageRow};

/// The minute of the session (0 to 389) a LOBSTER time falls in.
pub(super) fn minute_of(seconds: f64) -> u16 {
    (((seconds - crate::LOBSTER_OPEN_SECONDS) / 60.0).max(0.0) as u16)
        .min(crate::SESSION_MINUTES - 1)
}

/// The minute of the session (0: 09:30 to 389: 15:59) a LOBSTER time
/// (seconds after midnight) falls in.
pub fn minute_of_session(seconds: f64) -> usize {
    minute_of(seconds) as usize
}

/// Message lags, in messages, at which the price response is read.
pub const RESPONSE_LAGS: [usize; 7] = [1, 2, 5, 10, 20, 50, 100];

/// Messages closer together than this (the simulator's clock step) are
/// counted as this far apart, so that the log of an inter-arrival time is
/// defined.
const MIN_INTERARRIVAL_S: f64 = 1e-6;

/// One sample: the minute of the day it fell in, and its value.
pub type Sample = (u16, f64);

/// The three kinds of event whose price response is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseEvent {
    /// A market order: the executions of one aggressor at one time.
    Market,
    /// A new limit order.
    Limit,
    /// A cancel or deletion.
    Cancel,
}

/// One event whose price response is measured: its minute, kind, whether
/// it moved the mid itself, and the signed mid change (ticks, in the
/// direction the event pushes the price) at each of [`RESPONSE_LAGS`]
/// (`NaN` past the day's end).
#[derive(Debug, Clone, Copy)]
pub struct Response {
    /// Minute of the day.
    pub minute: u16,
    /// What the event was.
    pub event: ResponseEvent,
    /// Whether the mid changed at the event itself.
    pub moved: bool,
    /// Signed mid change at each lag, ticks.
    pub change: [f64; RESPONSE_LAGS.len()],
}

/// Everything measured on one day.
#[derive(Debug, Clone, Default)]
pub struct DayFeatures {
    /// Levels per side in the files.
    pub levels: usize,
    /// Quoted spread after each message, ticks.
    pub spread: Vec<Sample>,
    /// log10 seconds between consecutive messages.
    pub interarrival: Vec<Sample>,
    /// log10 shares of each new limit order.
    pub limit_size: Vec<Sample>,
    /// log10 shares of each market order.
    pub market_size: Vec<Sample>,
    /// Ticks of each new limit order behind its own side's best price
    /// before it arrived (negative: inside the spread).
    pub limit_depth: Vec<Sample>,
    /// Ticks of each cancel behind its own side's best price.
    pub cancel_depth: Vec<Sample>,
    /// log10 seconds from an order's submission to its deletion (orders
    /// submitted within the day).
    pub cancel_time: Vec<Sample>,
    /// Level-1 imbalance (bid − ask) / (bid + ask) after each message.
    pub imbalance: Vec<Sample>,
    /// The same over the first five levels (as many as the files hold),
    /// only when they hold more than one: LOB-Bench's imbalance at depth.
    pub imbalance_depth: Vec<Sample>,
    /// log10 seconds from an order's submission to its first execution
    /// (orders submitted within the day): LOB-Bench's time to first fill.
    pub fill_time: Vec<Sample>,
    /// log10 shares at the best ask and at the best bid.
    pub touch_volume: [Vec<Sample>; 2],
    /// log10 shares over all levels of the files, ask and bid (only when
    /// they hold more than one level).
    pub depth_volume: [Vec<Sample>; 2],
    /// log10 of the mean level-1 size after each message, with the spread
    /// then (ticks), for the conditional statistic.
    pub touch_given_spread: Vec<(u16, f64, f64)>,
    /// |log return| of the mid over the 5 minutes before each minute, bps
    /// (`NaN` for the first six minutes).
    pub minute_volatility: Vec<f64>,
    /// The price response of every market order, limit order and cancel.
    pub responses: Vec<Response>,
}

/// The visible top of the book in a row: best ask, its size, best bid, its
/// size, and whether both sides quote.
pub(super) fn touch(row: &[i64]) -> (i64, i64, i64, i64, bool) {
    let (a, qa) = serl_lob::book_level(row, serl_lob::Side::Ask, 0);
    let (b, qb) = serl_lob::book_level(row, serl_lob::Side::Bid, 0);
    (a, qa, b, qb, qa > 0 && qb > 0)
}

impl DayFeatures {
    /// The new limit orders' depths behind their own side's best price
    /// (ticks, negative inside the spread) at `n` evenly spaced quantiles;
    /// empty when the day shows none.
    pub fn limit_depth_quantiles(&self, n: usize) -> Vec<i64> {
        let mut d: Vec<i64> = self
            .limit_depth
            .iter()
            .map(|s| s.1.round() as i64)
            .collect();
        d.sort_unstable();
        crate::quantiles::evenly_spaced_quantiles(&d, n)
    }

    /// The book's shape after one message in minute `at`: spread,
    /// imbalances, volumes at the touch and over the levels.
    fn book_shape(&mut self, at: u16, row: &[i64], tick: f64) {
        let (a, qa, b, qb, two_sided) = touch(row);
        if two_sided {
            let spread = (a - b) as f64 / tick;
            self.spread.push((at, spread));
            self.imbalance
                .push((at, (qb - qa) as f64 / (qb + qa) as f64));
            self.touch_volume[0].push((at, (qa as f64).log10()));
            self.touch_volume[1].push((at, (qb as f64).log10()));
            let mean_touch = ((qa + qb) as f64 / 2.0).log10();
            self.touch_given_spread.push((at, spread, mean_touch));
        }
        if self.levels > 1 {
            for (side, offset) in [(0, 1), (1, 3)] {
                let total: i64 = row.chunks(4).map(|l| l[offset]).sum();
                if total > 0 {
                    self.depth_volume[side].push((at, (total as f64).log10()));
                }
            }
            let top = |offset: usize| -> i64 { row.chunks(4).take(5).map(|l| l[offset]).sum() };
            let (asks, bids) = (top(1), top(3));
            if asks + bids > 0 {
                let x = (bids - asks) as f64 / (bids + asks) as f64;
                self.imbalance_depth.push((at, x));
            }
        }
    }

    /// Measures a LOBSTER day: `rows[i]` is the book after `messages[i]`;
    /// `tick` is one price tick in LOBSTER units (100 for a cent).
    pub fn measure(all: &[MessageRow], rows: &BookRows, tick: i64) -> DayFeatures {
        // Hidden executions, crosses and halts leave the visible book alone
        // and no simulator writes them: measured, they would count one book
        // state twice and shorten the inter-arrival times of real days only.
        let kept: Vec<usize> = (0..all.len().min(rows.len()))
            .filter(|&i| {
                matches!(
                    all[i].kind,
                    LobsterEvent::Submit
                        | LobsterEvent::Cancel
                        | LobsterEvent::Delete
                        | LobsterEvent::Execute
                )
            })
            .collect();
        let messages: Vec<MessageRow> = kept.iter().map(|&i| all[i]).collect();
        let row_of = |j: usize| rows.row(kept[j]);
        let n = messages.len();
        let tick = tick.max(1) as f64;
        let minute = minute_of;
        let mut f = DayFeatures {
            levels: rows.levels(),
            ..DayFeatures::default()
        };
        let mut mids = Vec::with_capacity(n);
        let mut submitted: HashMap<u64, f64> = HashMap::new();
        // Orders not yet filled at all, by id: when they were submitted.
        let mut unfilled: HashMap<u64, f64> = HashMap::new();
        let mut minute_mid = vec![f64::NAN; 390];
        for i in 0..n {
            let (m, row) = (&messages[i], row_of(i));
            let at = minute(m.time);
            let (a, _, b, _, two_sided) = touch(row);
            let mid = if two_sided {
                (a + b) as f64 / 2.0 / tick
            } else {
                f64::NAN
            };
            mids.push(mid);
            if two_sided {
                minute_mid[at as usize] = mid;
            }
            f.book_shape(at, row, tick);
            if i > 0 {
                let dt = (m.time - messages[i - 1].time).max(MIN_INTERARRIVAL_S);
                f.interarrival.push((at, dt.log10()));
            }
            let depth = (i > 0)
                .then(|| ticks_behind_touch(m, row_of(i - 1), tick))
                .flatten();
            match m.kind {
                LobsterEvent::Submit => {
                    submitted.insert(m.id, m.time);
                    unfilled.insert(m.id, m.time);
                    if m.size > 0 {
                        f.limit_size.push((at, (m.size as f64).log10()));
                    }
                    if let Some(d) = depth {
                        f.limit_depth.push((at, d));
                    }
                }
                LobsterEvent::Cancel | LobsterEvent::Delete => {
                    if let Some(d) = depth {
                        f.cancel_depth.push((at, d));
                    }
                    if m.kind == LobsterEvent::Delete {
                        unfilled.remove(&m.id);
                        if let Some(t0) = submitted.remove(&m.id) {
                            let dt = (m.time - t0).max(MIN_INTERARRIVAL_S);
                            f.cancel_time.push((at, dt.log10()));
                        }
                    }
                }
                LobsterEvent::Execute => {
                    if let Some(t0) = unfilled.remove(&m.id) {
                        let dt = (m.time - t0).max(MIN_INTERARRIVAL_S);
                        f.fill_time.push((at, dt.log10()));
                    }
                }
                _ => {}
            }
        }
        f.market_size = market_orders(&messages)
            .map(|(first, last)| {
                let size: i64 = messages[first..=last].iter().map(|m| m.size).sum();
                (minute(messages[first].time), (size.max(1) as f64).log10())
            })
            .collect();
        f.responses = responses(&messages, &mids, &minute);
        f.minute_volatility = volatility(&minute_mid);
        f
    }
}

/// How many ticks behind its own side's best price (in the book `before`
/// it) message `m` was, when that side had a best.
fn ticks_behind_touch(m: &MessageRow, before: &[i64], tick: f64) -> Option<f64> {
    let (ba, qa, bb, qb, _) = touch(before);
    let own = if m.direction == 1 { (bb, qb) } else { (ba, qa) };
    (own.1 > 0).then(|| {
        let behind = if m.direction == 1 {
            own.0 - m.price
        } else {
            m.price - own.0
        };
        behind as f64 / tick
    })
}

/// The market orders among the messages: runs of visible executions at one
/// time against one side, as (first, last) message index.
fn market_orders(messages: &[MessageRow]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < messages.len() && messages[i].kind != LobsterEvent::Execute {
            i += 1;
        }
        if i >= messages.len() {
            return None;
        }
        let first = i;
        while i + 1 < messages.len()
            && messages[i + 1].kind == LobsterEvent::Execute
            && messages[i + 1].time == messages[first].time
            && messages[i + 1].direction == messages[first].direction
        {
            i += 1;
        }
        i += 1;
        Some((first, i - 1))
    })
}

/// The signed mid response of every market order, limit order and cancel.
fn responses(messages: &[MessageRow], mids: &[f64], minute: &dyn Fn(f64) -> u16) -> Vec<Response> {
    let mut out = Vec::new();
    let mut push = |first: usize, last: usize, event: ResponseEvent, sign: f64| {
        if first == 0 || !mids[first - 1].is_finite() {
            return;
        }
        let before = mids[first - 1];
        let mut change = [f64::NAN; RESPONSE_LAGS.len()];
        for (c, lag) in change.iter_mut().zip(RESPONSE_LAGS) {
            if let Some(m) = mids.get(last + lag).filter(|m| m.is_finite()) {
                *c = sign * (m - before);
            }
        }
        let moved = mids[last].is_finite() && mids[last] != before;
        out.push(Response {
            minute: minute(messages[first].time),
            event,
            moved,
            change,
        });
    };
    for (first, last) in market_orders(messages) {
        // An executed sell order (-1) is a buyer-initiated trade: up.
        push(
            first,
            last,
            ResponseEvent::Market,
            -f64::from(messages[first].direction),
        );
    }
    for (i, m) in messages.iter().enumerate() {
        let dir = f64::from(m.direction);
        match m.kind {
            LobsterEvent::Submit => push(i, i, ResponseEvent::Limit, dir),
            LobsterEvent::Cancel | LobsterEvent::Delete => push(i, i, ResponseEvent::Cancel, -dir),
            _ => {}
        }
    }
    out
}

/// |log return| of the mid over the five minutes before each minute, bps:
/// from the end of minute m − 6 to the end of minute m − 1, so a minute's
/// spread is conditioned on what came before it (`NaN` for the first six
/// minutes and where a mid is missing).
fn volatility(minute_mid: &[f64]) -> Vec<f64> {
    let mut last = f64::NAN;
    let filled: Vec<f64> = minute_mid
        .iter()
        .map(|&m| {
            if m.is_finite() {
                last = m;
            }
            last
        })
        .collect();
    (0..filled.len())
        .map(|m| {
            if m < 6 {
                return f64::NAN;
            }
            (filled[m - 1] / filled[m - 6]).ln().abs() * 1e4
        })
        .collect()
}
