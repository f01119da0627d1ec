//! The observation layout shared by every environment, so that one policy
//! runs in all of them.
//!
//! | index | feature | scale |
//! |---|---|---|
//! | 0 | time left, 1 − t/T | [0, 1] |
//! | 1 | inventory left, I_t / Q | [0, 1] |
//! | 2..7 | bid prices of levels 1–5, bps from mid | ÷ 10 |
//! | 7..12 | bid sizes of levels 1–5 | ÷ average minute volume |
//! | 12..17 | ask prices of levels 1–5, bps from mid | ÷ 10 |
//! | 17..22 | ask sizes of levels 1–5 | ÷ average minute volume |
//! | 22..27 | returns over the last 1, 5, 15, 30 and 60 minutes, bps, signed against the order | ÷ 10 |
//! | 27 | last minute's volume | ÷ average minute volume |
//! | 28 | spread, bps | ÷ 10 |
//!
//! Everything is known at the decision time: market features come from
//! the last completed minute.
//!
//! Returns are signed from the trader's side: positive is a move against
//! the order (up for a buy, down for a sell). One policy then serves buys
//! and sells, and a signal such as "the price has been running away from
//! me" means the same thing for both; with raw returns a policy that does
//! not know its side can only time buys and sells alike, which gains
//! nothing on average. The horizons reach back to the previous decision at
//! the usual cadences (5 and 30 minutes) and beyond.

/// Book levels per side in the observation.
pub const LEVELS: usize = 5;
/// Horizons of the return features, minutes.
pub const RETURN_HORIZONS: [usize; 5] = [1, 5, 15, 30, 60];
/// Number of return features, one per horizon.
pub const RETURNS: usize = RETURN_HORIZONS.len();
/// Width of the default observation.
pub const OBS_DIM: usize = 2 + 4 * LEVELS + RETURNS + 2;

/// Feature names in layout order, for reports and the state-space module.
pub fn feature_names() -> Vec<String> {
    let mut v = vec!["time_left".to_string(), "inventory_left".to_string()];
    for (what, n) in [
        ("bid_price", LEVELS),
        ("bid_size", LEVELS),
        ("ask_price", LEVELS),
        ("ask_size", LEVELS),
    ] {
        for k in 1..=n {
            v.push(format!("{what}_{k}"));
        }
    }
    for h in RETURN_HORIZONS {
        v.push(format!("ret_{h}"));
    }
    v.push("volume".into());
    v.push("spread".into());
    v
}

/// Width of what designed features and broadcast programs read: the
/// observation, the resting order's queue state and the planted signal.
pub const DESIGN_DIM: usize = OBS_DIM + crate::QueueState::COLUMNS + 1;

/// The design column of a planted forecast ([`crate::Decision::signal`]):
/// the last of [`design_names`].
pub const SIGNAL: &str = "signal";

/// What [`SIGNAL`] means, as a designer is told.
pub const SIGNAL_DOC: &str = "a forecast of the price move over the coming step, in standard units, signed against the order (positive: the price is expected to move against you, so trading now is cheaper than later); 0 where the data carries none";

/// The columns designed features may name ([`DESIGN_DIM`] of them): the
/// observation's ([`feature_names`]), then the resting order's,
/// `queue_ahead` and `minutes_resting` ([`crate::QueueState`]), which read
/// 0 for an agent that does not place orders (nothing of its rests), and
/// last the planted `signal` ([`SIGNAL`]), which reads 0 on data without
/// one. The default observation carries neither the signal nor, for an
/// agent that does not place orders, the queue.
pub fn design_names() -> Vec<String> {
    let mut v = feature_names();
    v.extend(crate::QueueState::NAMES.iter().map(|n| n.to_string()));
    v.push(SIGNAL.into());
    v
}

/// A top-of-book-and-depth picture, in bps from mid and in shares.
#[derive(Debug, Clone, Copy, Default)]
pub struct BookPicture {
    /// Bid prices of levels 1–5, bps from mid (negative).
    pub bid_bps: [f64; LEVELS],
    /// Bid sizes of levels 1–5, shares.
    pub bid_size: [f64; LEVELS],
    /// Ask prices of levels 1–5, bps from mid (positive).
    pub ask_bps: [f64; LEVELS],
    /// Ask sizes of levels 1–5, shares.
    pub ask_size: [f64; LEVELS],
}

/// What an observation is made of, before scaling: both venues fill one
/// in and [`write_obs`] writes it.
#[derive(Debug, Clone)]
pub struct MarketNow<'a> {
    /// The share of the episode's time left, in [0, 1].
    pub time_left: f64,
    /// The share of the order left to trade, in [0, 1].
    pub inventory_left: f64,
    /// The book's first levels.
    pub book: &'a BookPicture,
    /// The returns over each horizon, bps, signed for the order's side.
    pub returns_bps: &'a [f64; RETURNS],
    /// The last minute's volume, shares.
    pub last_volume: f64,
    /// The spread, bps.
    pub spread_bps: f64,
    /// The session's mean volume a minute, shares (the volumes' scale).
    pub avg_minute_volume: f64,
}

/// Writes the observation of `now` into `out` (length [`OBS_DIM`]).
pub fn write_obs(out: &mut [f32], now: &MarketNow) {
    let MarketNow {
        time_left,
        inventory_left,
        book,
        returns_bps,
        last_volume,
        spread_bps,
        avg_minute_volume,
    } = *now;
    let v = avg_minute_volume.max(1.0);
    out[0] = time_left as f32;
    out[1] = inventory_left as f32;
    for k in 0..LEVELS {
        out[2 + k] = (book.bid_bps[k] / 10.0) as f32;
        out[7 + k] = (book.bid_size[k] / v) as f32;
        out[12 + k] = (book.ask_bps[k] / 10.0) as f32;
        out[17 + k] = (book.ask_size[k] / v) as f32;
    }
    for k in 0..RETURNS {
        out[22 + k] = (returns_bps[k] / 10.0) as f32;
    }
    out[27] = (last_volume / v) as f32;
    out[28] = (spread_bps / 10.0) as f32;
}
