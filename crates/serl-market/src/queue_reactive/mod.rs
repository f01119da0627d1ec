//! The queue-reactive order flow of Huang, Lehalle & Rosenbaum (2015):
//! the order flow at each of the first levels of the book arrives at rates
//! that depend on the size of that level's queue.
//!
//! - **Levels are ranks**: level `i` of a side is its `i`-th non-empty
//!   price, as in a LOBSTER order-book file, so that a stock whose spread
//!   is many ticks wide (AMZN, GOOG) is modelled as well as a one-tick one.
//! - **Per level and queue-size bin** (the queue over the level's average
//!   event size, rounded up, capped at [`MAX_BIN`]): limit orders joining
//!   the queue, cancels from it, and at the best level market orders, each
//!   a Poisson rate per side.
//! - **New price levels**: limit orders inside the spread at a rate that
//!   depends on the spread (in ticks), a share of the spread away from the
//!   own best; and limit orders behind the best at a price no modelled
//!   level holds, at a constant rate and a depth drawn from the day's.
//! - **The reference price moves** when a best queue depletes (the next
//!   level becomes the best) or an order improves it: the price is the
//!   book's own, not a path given from outside.
//!
//! [`QueueReactive::fit`] calibrates it from LOBSTER message data,
//! [`QueueReactive::next_event`] draws what happens next in a book, and
//! [`QueueReactive::simulate`] plays a day of it alone, recorded as
//! LOBSTER files. The dynamic market plays it beside the execution agents
//! with `[market] flow = "queue_reactive"` (docs/market.md).

mod day;
pub use day::row_mid;
mod fit;
#[cfg(test)]
mod tests;

use rand::Rng;
use serde::{Deserialize, Serialize};
use serl_lob::{OrderBook, OrderId, RestingOrder, Side, Ticks};

/// The largest queue-size bin: queues of more than this many average
/// events share one bin's rates.
pub const MAX_BIN: usize = 20;

/// The widest spread, ticks, with rates of its own for orders inside the
/// spread; wider spreads share the last.
pub const MAX_SPREAD: usize = 64;

/// The format of a calibrated model's file; a file of another version is
/// refused by name.
pub const FORMAT: u32 = 1;

/// A queue-reactive order flow calibrated to a day (rates per second per
/// side). Written as JSON by `serl simulate calibrate`; a market config
/// names the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueReactive {
    /// [`FORMAT`].
    pub format: u32,
    /// What it was calibrated on (a file name and its window).
    pub source: String,
    /// Price units (dollars × 10,000) per tick: 100 for one cent.
    pub tick: i64,
    /// Seconds of order flow it was calibrated on.
    pub seconds: f64,
    /// The queue-size unit of each modelled level, shares: the average
    /// size of the events at that level.
    pub unit: Vec<f64>,
    /// Limit orders joining level `i`'s queue, per second, by the queue's
    /// bin (`limit[i][bin]`).
    pub limit: Vec<Vec<f64>>,
    /// Cancels from level `i`'s queue, per second, by the queue's bin.
    pub cancel: Vec<Vec<f64>>,
    /// Market orders against the best queue, per second, by its bin.
    pub market: Vec<f64>,
    /// Limit orders improving the own best, per second, by the spread in
    /// ticks (0 and 1: none fits).
    pub inside: Vec<f64>,
    /// How far inside the spread an improving order goes: quantiles of its
    /// improvement over the spread, in (0, 1).
    pub inside_at: Vec<f64>,
    /// Limit orders behind the best at a price no modelled level holds,
    /// per second.
    pub behind: f64,
    /// Their depth behind the own best, ticks: quantiles.
    pub behind_depth: Vec<Ticks>,
    /// The median gap to the level before, ticks, per level (level 0's:
    /// half the median spread).
    pub gap: Vec<Ticks>,
    /// The median queue per level, shares: an opening book.
    pub depth: Vec<u64>,
    /// The median spread, ticks.
    pub spread: Ticks,
    /// Shares executed per second (the visible executions).
    pub volume_per_second: f64,
    /// Limit order sizes, shares: quantiles.
    pub limit_sizes: Vec<u64>,
    /// Market order sizes (the executions of one instant summed), shares:
    /// quantiles.
    pub market_sizes: Vec<u64>,
}

/// What the flow does next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QrEvent {
    /// A limit order of `qty` shares at `price` ticks.
    Limit {
        /// Its side.
        side: Side,
        /// Its price, ticks.
        price: Ticks,
        /// Shares.
        qty: u64,
    },
    /// A cancel of one of the flow's own orders resting at `price` on
    /// `side` (none there: nothing happens).
    Cancel {
        /// The queue's side.
        side: Side,
        /// Its price, ticks.
        price: Ticks,
    },
    /// A market order of `qty` shares taking from `side`'s best.
    Market {
        /// The side it takes from (a market buy takes from the asks).
        side: Side,
        /// Shares.
        qty: u64,
    },
}

/// Which kind of event, before its price and size are drawn.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Join(usize),
    Cancel(usize),
    Market,
    Inside,
    Behind,
}

impl QueueReactive {
    /// Levels per side whose queues it models.
    pub fn levels(&self) -> usize {
        self.unit.len()
    }

    /// The bin of a queue of `qty` shares at level `i`.
    pub fn bin(&self, i: usize, qty: u64) -> usize {
        bin(qty, self.unit[i])
    }

    /// The sum of all its event rates in `book` now, per second, times
    /// `scale` (the minute's activity on bar data; 1 on the calibrated
    /// day); leaves in `buffer` what [`QueueReactive::each_rate`] lists
    /// them from (each modelled queue's bin, the levels there, the
    /// spread's rate of orders inside it).
    fn rates(&self, book: &OrderBook, scale: f64, buffer: &mut QrRates) -> f64 {
        let k = self.levels();
        if buffer.bins.len() != 2 * k {
            buffer.bins = vec![BinMemo::NONE; 2 * k];
            buffer.read = [None; 2];
        }
        let spread = book.spread().unwrap_or(self.spread).max(1) as usize;
        buffer.inside = self.inside[spread.min(self.inside.len() - 1)];
        buffer.scale = scale;
        for (s, side) in [Side::Bid, Side::Ask].into_iter().enumerate() {
            // A side the book has not changed since it was read keeps its
            // bins and levels: an event changes one side, seldom both.
            let changes = book.side_changes(side);
            if buffer.read[s] == Some(changes) {
                continue;
            }
            let mut there = 0;
            for (i, l) in book.levels(side).take(k).enumerate() {
                buffer.bins[s * k + i].bin(l.qty, self.unit[i]);
                there += 1;
            }
            buffer.there[s] = there;
            buffer.read[s] = Some(changes);
        }
        let mut total = 0.0;
        self.each_rate(buffer, |_, _, rate| {
            total += rate;
            false
        });
        total
    }

    /// Each event rate `buffer` holds, in one fixed order, as (side, kind,
    /// rate times the scale), until `stop` says so: the sum and the draw
    /// go through the rates alike, so that the draw lands where the sum
    /// puts it, to the last bit. (No list of them is written: this runs
    /// twice on every event of the flow, over up to 46 rates.)
    fn each_rate(&self, buffer: &QrRates, mut stop: impl FnMut(Side, Kind, f64) -> bool) {
        let (k, scale) = (self.levels(), buffer.scale);
        for (s, side) in [Side::Bid, Side::Ask].into_iter().enumerate() {
            let there = buffer.there[s];
            for i in 0..there {
                let b = buffer.bins[s * k + i].bin;
                if stop(side, Kind::Join(i), self.limit[i][b] * scale)
                    || stop(side, Kind::Cancel(i), self.cancel[i][b] * scale)
                    || (i == 0 && stop(side, Kind::Market, self.market[b] * scale))
                {
                    return;
                }
            }
            // A level not there: its empty queue's rate of limit orders
            // opens it.
            for i in there..k {
                if stop(side, Kind::Join(i), self.limit[i][0] * scale) {
                    return;
                }
            }
            if stop(side, Kind::Inside, buffer.inside * scale)
                || stop(side, Kind::Behind, self.behind * scale)
            {
                return;
            }
        }
    }

    /// The seconds to the flow's next event in `book` and that event, its
    /// rates times `scale`; `None` when every rate is 0. `rates` is a
    /// buffer the caller keeps between calls.
    pub fn next_event<R: Rng>(
        &self,
        book: &OrderBook,
        scale: f64,
        last_mid: f64,
        rates: &mut QrRates,
        rng: &mut R,
    ) -> Option<(f64, QrEvent)> {
        let wait = self.wait(book, scale, rates, rng)?;
        Some((wait, self.pick(book, last_mid, rates, rng)))
    }

    /// The seconds to the flow's next event in `book`, its rates times
    /// `scale` (exponential: the flow is memoryless, so a caller may draw
    /// again whenever the book or the scale changed); `None` when every
    /// rate is 0. Leaves the rates in `rates` for [`QueueReactive::pick`].
    pub fn wait<R: Rng>(
        &self,
        book: &OrderBook,
        scale: f64,
        rates: &mut QrRates,
        rng: &mut R,
    ) -> Option<f64> {
        rates.total = self.rates(book, scale, rates);
        let total = rates.total;
        if total <= 0.0 || !total.is_finite() {
            return None;
        }
        Some(-(1.0 - rng.random::<f64>()).ln() / total)
    }

    /// Which event happens, by the rates [`QueueReactive::wait`] left in
    /// `rates`, drawn in `book` as it is now.
    pub fn pick<R: Rng>(
        &self,
        book: &OrderBook,
        last_mid: f64,
        rates: &QrRates,
        rng: &mut R,
    ) -> QrEvent {
        let mut u = rng.random::<f64>() * rates.total;
        // The last rate where rounding leaves `u` past them all.
        let mut pick = (Side::Ask, Kind::Behind);
        self.each_rate(rates, |side, kind, rate| {
            pick = (side, kind);
            let here = u < rate;
            u -= rate;
            here
        });
        let (side, kind) = pick;
        self.event(book, side, kind, last_mid, rng)
    }

    fn event<R: Rng>(
        &self,
        book: &OrderBook,
        side: Side,
        kind: Kind,
        last_mid: f64,
        rng: &mut R,
    ) -> QrEvent {
        let sign: Ticks = if side == Side::Bid { 1 } else { -1 };
        let level = |i: usize| book.levels(side).nth(i).map(|l| l.price);
        match kind {
            Kind::Market => QrEvent::Market {
                side,
                qty: draw(&self.market_sizes, rng),
            },
            Kind::Cancel(i) => QrEvent::Cancel {
                side,
                price: level(i).unwrap_or(0),
            },
            Kind::Join(i) => {
                let price = match level(i) {
                    Some(p) => p,
                    None => self.opened(book, side, last_mid),
                };
                self.limit(book, side, price, rng)
            }
            Kind::Inside => {
                let (own, other) = (book.best(side), book.best(side.opposite()));
                let price = match (own, other) {
                    (Some(o), Some(p)) => {
                        let spread = (p.price - o.price).abs();
                        let at = self.inside_at[rng.random_range(0..self.inside_at.len())];
                        let d = ((at * spread as f64).round() as Ticks).clamp(1, spread - 1);
                        o.price + sign * d
                    }
                    _ => self.touch(book, side, last_mid),
                };
                self.limit(book, side, price, rng)
            }
            Kind::Behind => {
                let touch = self.touch(book, side, last_mid);
                let mut price = touch - sign * draw(&self.behind_depth, rng).max(1);
                // Never at a modelled level's price: that would be a
                // limit order joining its queue, which has its own rate.
                // (Asked of the book itself rather than collected: this
                // runs on every such event.)
                let modelled =
                    |p: Ticks| book.levels(side).take(self.levels()).any(|l| l.price == p);
                while modelled(price) {
                    price -= sign;
                }
                self.limit(book, side, price, rng)
            }
        }
    }

    /// A limit order at `price`, never through the other side's best.
    fn limit<R: Rng>(&self, book: &OrderBook, side: Side, price: Ticks, rng: &mut R) -> QrEvent {
        let sign: Ticks = if side == Side::Bid { 1 } else { -1 };
        let mut price = price.max(1);
        if let Some(o) = book.best(side.opposite()) {
            if sign * (price - o.price) >= 0 {
                price = o.price - sign;
            }
        }
        QrEvent::Limit {
            side,
            price: price.max(1),
            qty: draw(&self.limit_sizes, rng),
        }
    }

    /// The side's best, or where it would be: the other side's best less
    /// the median spread, or the last mid less half of it.
    fn touch(&self, book: &OrderBook, side: Side, last_mid: f64) -> Ticks {
        let sign: Ticks = if side == Side::Bid { 1 } else { -1 };
        match (book.best(side), book.best(side.opposite())) {
            (Some(l), _) => l.price,
            (None, Some(o)) => o.price - sign * self.spread,
            (None, None) => (last_mid - sign as f64 * self.spread as f64 / 2.0).round() as Ticks,
        }
    }

    /// Where a level not there opens: its median gap behind the last
    /// modelled level there is, or at the touch on an empty side.
    fn opened(&self, book: &OrderBook, side: Side, last_mid: f64) -> Ticks {
        let sign: Ticks = if side == Side::Bid { 1 } else { -1 };
        let there = book.levels(side).take(self.levels()).count();
        match book.levels(side).nth(there.saturating_sub(1)) {
            Some(last) if there > 0 => last.price - sign * self.gap[there].max(1),
            _ => self.touch(book, side, last_mid),
        }
    }

    /// The same flow with every size in shares (orders, queue units,
    /// opening depth, volume) times `k`, its rates as they are.
    pub fn scale_sizes(&mut self, k: f64) {
        let scale = |q: &mut u64| *q = ((*q as f64 * k).round() as u64).max(1);
        self.limit_sizes.iter_mut().for_each(scale);
        self.market_sizes.iter_mut().for_each(scale);
        self.depth.iter_mut().for_each(scale);
        self.unit.iter_mut().for_each(|u| *u = (*u * k).max(1.0));
        self.volume_per_second *= k;
    }

    /// The same flow with every distance in ticks (spread, gaps, depths
    /// behind the best) times `f`, rounded and at least a tick, and the
    /// rate of orders inside a spread of `s` ticks the model's at `s / f`:
    /// a stock that quotes `f` times as many ticks wide.
    pub fn scale_prices(&mut self, f: f64) {
        if !f.is_finite() || f <= 0.0 || (f - 1.0).abs() < 0.25 {
            return;
        }
        let scale = |d: &mut Ticks| *d = ((*d as f64 * f).round() as Ticks).max(1);
        scale(&mut self.spread);
        self.gap.iter_mut().for_each(scale);
        self.behind_depth.iter_mut().for_each(scale);
        let old = self.inside.clone();
        for (s, rate) in self.inside.iter_mut().enumerate() {
            *rate = old[((s as f64 / f).round() as usize).min(old.len() - 1)];
        }
        // A one-tick spread leaves no room inside it.
        self.inside[..2].fill(0.0);
    }

    /// The opening book: each modelled level's median queue at its median
    /// gap, around `mid` ticks, as (side, price, shares).
    pub fn opening_book(&self, mid: f64) -> Vec<(Side, Ticks, u64)> {
        let half = (self.spread as f64 / 2.0).max(0.5);
        let mut out = Vec::new();
        for side in [Side::Bid, Side::Ask] {
            let sign: Ticks = if side == Side::Bid { 1 } else { -1 };
            let mut price = if side == Side::Bid {
                (mid - half).floor() as Ticks
            } else {
                (mid + half).ceil() as Ticks
            };
            for i in 0..self.levels() {
                if i > 0 {
                    price -= sign * self.gap[i].max(1);
                }
                if price > 0 && self.depth[i] > 0 {
                    out.push((side, price, self.depth[i]));
                }
            }
        }
        out
    }

    /// Checks a model read from a file: its format, and that its tables
    /// agree in size and hold finite, non-negative rates.
    pub fn check(&self) -> Result<(), String> {
        if self.format != FORMAT {
            return Err(format!(
                "format {} (this serl reads {FORMAT}): calibrate it again with `serl simulate calibrate`",
                self.format
            ));
        }
        let k = self.unit.len();
        if k == 0 {
            return Err("no level is modelled (`unit` is empty)".into());
        }
        let rows = [("limit", &self.limit), ("cancel", &self.cancel)];
        for (name, t) in rows {
            if t.len() != k || t.iter().any(|r| r.len() != MAX_BIN + 1) {
                return Err(format!(
                    "`{name}` must be {k} rows of {} rates",
                    MAX_BIN + 1
                ));
            }
        }
        if self.market.len() != MAX_BIN + 1 || self.inside.len() != MAX_SPREAD + 1 {
            return Err(format!(
                "`market` must hold {} rates and `inside` {}",
                MAX_BIN + 1,
                MAX_SPREAD + 1
            ));
        }
        if self.gap.len() != k || self.depth.len() != k {
            return Err(format!("`gap` and `depth` must hold {k} values"));
        }
        let all = self.limit.iter().chain(&self.cancel).flatten();
        let rates = all.chain(&self.market).chain(&self.inside);
        if rates
            .chain([&self.behind])
            .any(|r| !r.is_finite() || *r < 0.0)
        {
            return Err("a rate is negative or not a number".into());
        }
        if self.volume_per_second.is_nan() || self.volume_per_second <= 0.0 {
            return Err("`volume_per_second` is not positive".into());
        }
        if self.unit.iter().any(|u| u.is_nan() || *u <= 0.0) {
            return Err("a level's `unit` is not positive".into());
        }
        let empty = [
            ("inside_at", self.inside_at.is_empty()),
            ("behind_depth", self.behind_depth.is_empty()),
            ("limit_sizes", self.limit_sizes.is_empty()),
            ("market_sizes", self.market_sizes.is_empty()),
        ];
        if let Some((name, _)) = empty.iter().find(|e| e.1) {
            return Err(format!("`{name}` is empty"));
        }
        Ok(())
    }

    /// Reads and checks a model written by `serl simulate calibrate`.
    pub fn read(path: &std::path::Path) -> Result<QueueReactive, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let model: QueueReactive = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a queue-reactive model: {e}", path.display()))?;
        model
            .check()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(model)
    }
}

/// A buffer for [`QueueReactive::next_event`], kept with one book: what
/// its rates are read from and their sum, and each modelled queue's bin as
/// last computed: an event changes one or two queues, and the others' bins
/// are not computed again (a division and a rounding each, half the rates'
/// time on a ten-level model), nor a side's levels read again while the
/// book has not changed that side.
#[derive(Debug, Default, Clone)]
pub struct QrRates {
    total: f64,
    /// The rates' factor (the minute's activity).
    scale: f64,
    /// By side (bids first), then level.
    bins: Vec<BinMemo>,
    /// The modelled levels there, per side (bids first).
    there: [usize; 2],
    /// The book's count of changes to each side when it was last read
    /// (`OrderBook::side_changes`): a buffer serves one book.
    read: [Option<u64>; 2],
    /// The rate of orders inside the spread, per side, unscaled.
    inside: f64,
}

/// A queue's bin, for the size and unit it was computed from.
#[derive(Debug, Clone, Copy)]
struct BinMemo {
    qty: u64,
    unit: f64,
    bin: usize,
}

impl BinMemo {
    const NONE: BinMemo = BinMemo {
        qty: u64::MAX,
        unit: f64::NAN,
        bin: 0,
    };

    /// [`bin`] of `qty` in units of `unit`, computed again only when
    /// either changed (the same number either way).
    #[inline]
    fn bin(&mut self, qty: u64, unit: f64) -> usize {
        if qty != self.qty || unit.to_bits() != self.unit.to_bits() {
            *self = BinMemo {
                qty,
                unit,
                bin: bin(qty, unit),
            };
        }
        self.bin
    }
}

/// One of the orders resting at `price` on `side` that `keep` accepts,
/// each as likely: the order a cancel event of a flow takes. Counted,
/// then the drawn one found, so that no event collects the queue (this
/// runs on every cancel); `None` where none is kept.
pub(crate) fn draw_resting(
    book: &OrderBook,
    (side, price): (Side, Ticks),
    keep: impl Fn(&RestingOrder) -> bool,
    rng: &mut impl Rng,
) -> Option<OrderId> {
    let kept = || book.queue_iter(side, price).filter(|o| keep(o));
    let n = kept().count();
    if n == 0 {
        return None;
    }
    kept().nth(rng.random_range(0..n)).map(|o| o.id)
}

/// The bin of a queue of `qty` shares in units of `unit`.
fn bin(qty: u64, unit: f64) -> usize {
    if qty == 0 {
        return 0;
    }
    // `f64::ceil` is a library call on a baseline x86-64 target (no
    // SSE4.1 `roundsd`), and this runs for every modelled queue on every
    // event; truncating and stepping up when something was cut off is the
    // same ceiling for a positive quotient.
    let x = qty as f64 / unit;
    if x >= MAX_BIN as f64 {
        return MAX_BIN;
    }
    let floor = x as usize;
    let ceil = if (floor as f64) < x { floor + 1 } else { floor };
    ceil.clamp(1, MAX_BIN)
}

/// A value of `q` (quantiles), each as likely.
fn draw<T: Copy, R: Rng>(q: &[T], rng: &mut R) -> T {
    q[rng.random_range(0..q.len())]
}
