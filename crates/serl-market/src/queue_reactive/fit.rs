//! Calibrating the queue-reactive flow from LOBSTER message data: every
//! message is classified against the book just before it (the order-book
//! row of the message before), and each rate is the count of its events
//! over the time its queue spent in the bin.

use serl_lob::{BookRows, LobsterEvent, MessageRow, Ticks};

use super::{bin, QueueReactive, FORMAT, MAX_BIN, MAX_SPREAD};

/// Seconds a bin must have been visited for a rate of its own; rarer bins
/// pool their neighbours' until the pooled time reaches it.
pub const MIN_SECONDS: f64 = 20.0;

/// Quantiles kept of each drawn quantity.
const QUANTILES: usize = 64;

/// The most levels per side the flow models.
pub const MAX_LEVELS: usize = 10;

/// A message classified against the book before it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    Join(usize),
    Cancel(usize),
    Market,
    Inside(f64),
    Behind(Ticks),
    Other,
}

/// Counts and visiting times per level and bin, both sides pooled.
struct Tally {
    time: Vec<[f64; MAX_BIN + 1]>,
    limit: Vec<[f64; MAX_BIN + 1]>,
    cancel: Vec<[f64; MAX_BIN + 1]>,
    market: [f64; MAX_BIN + 1],
    spread_time: [f64; MAX_SPREAD + 1],
    inside: [f64; MAX_SPREAD + 1],
    behind: f64,
    seconds: f64,
}

impl QueueReactive {
    /// Fits the flow to a LOBSTER day (or part of one): `messages` and the
    /// order-book `rows` after each, prices in units of `tick` (100: one
    /// cent). Models the file's levels, at most [`MAX_LEVELS`]. `None`
    /// when the day holds too little to fit (no limit order, no market
    /// order, or no two-sided book).
    pub fn fit(
        messages: &[MessageRow],
        rows: &BookRows,
        tick: i64,
        source: &str,
    ) -> Option<QueueReactive> {
        let k = rows.levels().min(MAX_LEVELS);
        let n = messages.len().min(rows.len());
        if n < 2 {
            return None;
        }
        let classes: Vec<Class> = (1..n)
            .map(|i| classify(&messages[i], &messages[i - 1], rows.row(i - 1), k, tick))
            .collect();
        let unit = units(messages, &classes, k);
        let tally = tally(messages, rows, &classes, &unit, tick);
        let limit_sizes = quantiles(sizes(messages, &classes, |c| {
            matches!(c, Class::Join(_) | Class::Inside(_) | Class::Behind(_))
        }));
        let all_market = market_sizes(messages, &classes);
        let executed: u64 = all_market.iter().sum();
        let market_sizes = quantiles(all_market);
        let mut inside_at: Vec<f64> = classes
            .iter()
            .filter_map(|c| match c {
                Class::Inside(at) => Some(*at),
                _ => None,
            })
            .collect();
        inside_at.sort_by(f64::total_cmp);
        let inside_at = pick(&inside_at);
        let behind_depth = quantiles(
            classes
                .iter()
                .filter_map(|c| match c {
                    Class::Behind(d) => Some(*d),
                    _ => None,
                })
                .collect(),
        );
        let (gap, depth, spread) = profile(rows, k, tick);
        let mut limit: Vec<Vec<f64>> = tally
            .limit
            .iter()
            .zip(&tally.time)
            .map(|(c, t)| pooled(c, t))
            .collect();
        // A level that is not there cannot be joined in the data: a limit
        // order opening it is counted behind the best. Real books are
        // deeper than any file shows, so an empty level receives orders as
        // its smallest queue does, rather than waiting for one behind the
        // best to land there (which left a side empty 3-4% of the time).
        for rates in &mut limit {
            rates[0] = rates[1];
        }
        let model = QueueReactive {
            format: FORMAT,
            source: source.to_string(),
            tick,
            seconds: tally.seconds,
            limit,
            cancel: tally
                .cancel
                .iter()
                .zip(&tally.time)
                .map(|(c, t)| pooled(c, t))
                .collect(),
            market: pooled(&tally.market, &tally.time[0]),
            inside: tally
                .inside
                .iter()
                .zip(&tally.spread_time)
                .map(|(c, t)| if *t > 0.0 { c / (2.0 * t) } else { 0.0 })
                .collect(),
            inside_at: if inside_at.is_empty() {
                vec![0.5]
            } else {
                inside_at
            },
            behind: tally.behind / (2.0 * tally.seconds.max(1e-9)),
            behind_depth: if behind_depth.is_empty() {
                vec![1]
            } else {
                behind_depth
            },
            unit,
            gap,
            depth,
            spread,
            volume_per_second: executed as f64 / tally.seconds.max(1e-9),
            limit_sizes,
            market_sizes,
        };
        model.check().is_ok().then_some(model)
    }
}

/// What message `m` did to the book `before` it (a LOBSTER order-book row:
/// ask price, ask size, bid price, bid size per level), `prev` the message
/// before it (a market order's later fills share its instant).
fn classify(m: &MessageRow, prev: &MessageRow, before: &[i64], k: usize, tick: i64) -> Class {
    // Direction 1 is a buy limit order (the bid side).
    let (own_price, own_qty, other_price, other_qty) = if m.direction == 1 {
        (2, 3, 0, 1)
    } else {
        (0, 1, 2, 3)
    };
    let sign = m.direction as i64;
    let rank =
        (0..k).find(|&i| before[4 * i + own_qty] > 0 && before[4 * i + own_price] == m.price);
    match m.kind {
        LobsterEvent::Submit => {
            if let Some(i) = rank {
                return Class::Join(i);
            }
            if before[own_qty] <= 0 {
                return Class::Other;
            }
            let own = before[own_price];
            let improves = sign * (m.price - own) > 0;
            if improves && before[other_qty] > 0 {
                let spread = (before[other_price] - own).abs();
                let at = (sign * (m.price - own)) as f64 / spread.max(1) as f64;
                Class::Inside(at.clamp(0.0, 1.0))
            } else if improves {
                Class::Other
            } else {
                Class::Behind(((sign * (own - m.price)) / tick).max(1))
            }
        }
        LobsterEvent::Cancel | LobsterEvent::Delete => rank.map_or(Class::Other, Class::Cancel),
        LobsterEvent::Execute => {
            let same_order = prev.kind == LobsterEvent::Execute
                && prev.time == m.time
                && prev.direction == m.direction;
            if same_order {
                Class::Other
            } else {
                Class::Market
            }
        }
        _ => Class::Other,
    }
}

/// Each level's average event size: the mean of its limit orders',
/// cancels' and (at the best) market orders' sizes.
fn units(messages: &[MessageRow], classes: &[Class], k: usize) -> Vec<f64> {
    let mut sum = vec![(0.0, 0.0); k];
    for (c, m) in classes.iter().zip(&messages[1..]) {
        let level = match c {
            Class::Join(i) | Class::Cancel(i) => *i,
            Class::Market => 0,
            _ => continue,
        };
        sum[level].0 += m.size.max(0) as f64;
        sum[level].1 += 1.0;
    }
    let all = sum.iter().fold((0.0, 0.0), |a, s| (a.0 + s.0, a.1 + s.1));
    let fallback = if all.1 > 0.0 { all.0 / all.1 } else { 100.0 };
    sum.iter()
        .map(|&(s, n)| if n > 0.0 { s / n } else { fallback }.max(1.0))
        .collect()
}

/// Counts each event in the bin of its queue, and the time each queue
/// spent in each bin, between every two messages.
fn tally(
    messages: &[MessageRow],
    rows: &BookRows,
    classes: &[Class],
    unit: &[f64],
    tick: i64,
) -> Tally {
    let k = unit.len();
    let mut t = Tally {
        time: vec![[0.0; MAX_BIN + 1]; k],
        limit: vec![[0.0; MAX_BIN + 1]; k],
        cancel: vec![[0.0; MAX_BIN + 1]; k],
        market: [0.0; MAX_BIN + 1],
        spread_time: [0.0; MAX_SPREAD + 1],
        inside: [0.0; MAX_SPREAD + 1],
        behind: 0.0,
        seconds: 0.0,
    };
    for (j, class) in classes.iter().enumerate() {
        let (m, before) = (&messages[j + 1], rows.row(j));
        let dt = (m.time - messages[j].time).max(0.0);
        t.seconds += dt;
        for i in 0..k {
            for q in [before[4 * i + 1], before[4 * i + 3]] {
                t.time[i][bin(q.max(0) as u64, unit[i])] += dt;
            }
        }
        let spread = spread_ticks(before, tick);
        if let Some(s) = spread {
            t.spread_time[s] += dt;
        }
        let own_qty = |i: usize| {
            let q = if m.direction == 1 {
                before[4 * i + 3]
            } else {
                before[4 * i + 1]
            };
            bin(q.max(0) as u64, unit[i])
        };
        match *class {
            Class::Join(i) => t.limit[i][own_qty(i)] += 1.0,
            Class::Cancel(i) => t.cancel[i][own_qty(i)] += 1.0,
            Class::Market => t.market[own_qty(0)] += 1.0,
            Class::Inside(_) => {
                if let Some(s) = spread {
                    t.inside[s] += 1.0;
                }
            }
            Class::Behind(_) => t.behind += 1.0,
            Class::Other => {}
        }
    }
    t
}

/// The spread of a two-sided row, ticks, capped at [`MAX_SPREAD`].
fn spread_ticks(row: &[i64], tick: i64) -> Option<usize> {
    (row[1] > 0 && row[3] > 0)
        .then(|| (((row[0] - row[2]) / tick.max(1)).max(0) as usize).min(MAX_SPREAD))
}

/// Rates per bin: counts over time, a bin visited less than
/// [`MIN_SECONDS`] pooling its neighbours (nearest first) until the pooled
/// time reaches it. Bin 0 keeps its own (an empty queue is its own
/// state). Counts and times pool both sides, so a rate is per side.
fn pooled(counts: &[f64; MAX_BIN + 1], time: &[f64; MAX_BIN + 1]) -> Vec<f64> {
    let mut out = vec![0.0; MAX_BIN + 1];
    out[0] = if time[0] > 0.0 {
        counts[0] / time[0]
    } else {
        0.0
    };
    for b in 1..=MAX_BIN {
        let (mut c, mut s) = (counts[b], time[b]);
        let mut w = 1;
        while s < MIN_SECONDS && w < MAX_BIN {
            for n in [b.checked_sub(w), Some(b + w)].into_iter().flatten() {
                if (1..=MAX_BIN).contains(&n) {
                    c += counts[n];
                    s += time[n];
                }
            }
            w += 1;
        }
        out[b] = if s > 0.0 { c / s } else { 0.0 };
    }
    out
}

/// The median gap between adjacent levels (level 0's: half the median
/// spread), the median queue per level, and the median spread, ticks.
fn profile(rows: &BookRows, k: usize, tick: i64) -> (Vec<Ticks>, Vec<u64>, Ticks) {
    let median = |mut v: Vec<i64>| {
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let step = (rows.len() / 20_000).max(1);
    let sample: Vec<&[i64]> = (0..rows.len()).step_by(step).map(|i| rows.row(i)).collect();
    let spread = median(
        sample
            .iter()
            .filter_map(|r| spread_ticks(r, tick).map(|s| s as i64))
            .collect(),
    );
    let mut gap = vec![(spread / 2).max(1)];
    let mut depth = Vec::new();
    for i in 0..k {
        let mut queues = Vec::new();
        let mut gaps = Vec::new();
        for r in &sample {
            for (p, q) in [(0, 1), (2, 3)] {
                if r[4 * i + q] > 0 {
                    queues.push(r[4 * i + q]);
                    if i > 0 && r[4 * (i - 1) + q] > 0 {
                        gaps.push((r[4 * i + p] - r[4 * (i - 1) + p]).abs() / tick.max(1));
                    }
                }
            }
        }
        if i > 0 {
            gap.push(median(gaps).max(1));
        }
        depth.push(median(queues).max(0) as u64);
    }
    (gap, depth, spread.max(1))
}

/// The sizes of the messages whose class `keep` selects.
fn sizes(messages: &[MessageRow], classes: &[Class], keep: impl Fn(&Class) -> bool) -> Vec<u64> {
    classes
        .iter()
        .zip(&messages[1..])
        .filter(|(c, m)| keep(c) && m.size > 0)
        .map(|(_, m)| m.size as u64)
        .collect()
}

/// Each market order's size: the executions of its instant summed.
fn market_sizes(messages: &[MessageRow], classes: &[Class]) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    for (j, c) in classes.iter().enumerate() {
        let m = &messages[j + 1];
        if m.kind != LobsterEvent::Execute {
            continue;
        }
        match (c, out.last_mut()) {
            (Class::Market, _) | (_, None) => out.push(m.size.max(0) as u64),
            (_, Some(last)) => *last += m.size.max(0) as u64,
        }
    }
    out.retain(|s| *s > 0);
    out
}

/// [`QUANTILES`] evenly spaced quantiles of `v`.
fn quantiles<T: Copy + Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort_unstable();
    pick(&v)
}

/// [`QUANTILES`] evenly spaced values of sorted `v` (all of it when
/// shorter).
fn pick<T: Copy>(v: &[T]) -> Vec<T> {
    if v.len() <= QUANTILES {
        return v.to_vec();
    }
    (0..QUANTILES)
        .map(|q| v[((q as f64 + 0.5) / QUANTILES as f64 * v.len() as f64) as usize])
        .collect()
}
