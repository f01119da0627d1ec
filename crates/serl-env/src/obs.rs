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
//! | 22..27 | the last 5 one-minute returns, bps | ÷ 10 |
//! | 27 | last minute's volume | ÷ average minute volume |
//! | 28 | spread, bps | ÷ 10 |
//!
//! Everything is known at the decision time: market features come from
//! the last completed minute.

pub const LEVELS: usize = 5;
pub const RETURN_LAGS: usize = 5;
/// Width of the default observation.
pub const OBS_DIM: usize = 2 + 4 * LEVELS + RETURN_LAGS + 2;

/// Feature names in layout order, for reports and the state-space module.
pub fn feature_names() -> Vec<String> {
    let mut v = vec!["time_left".to_string(), "inventory_left".to_string()];
    for (what, n) in [
        ("bid_price", LEVELS),
        ("bid_size", LEVELS),
        ("ask_price", LEVELS),
        ("ask_size", LEVELS),
        ("ret", RETURN_LAGS),
    ] {
        for k in 1..=n {
            v.push(format!("{what}_{k}"));
        }
    }
    v.push("volume".into());
    v.push("spread".into());
    v
}

/// A top-of-book-and-depth picture, in bps from mid and in shares.
#[derive(Debug, Clone, Copy, Default)]
pub struct BookPicture {
    pub bid_bps: [f64; LEVELS],
    pub bid_size: [f64; LEVELS],
    pub ask_bps: [f64; LEVELS],
    pub ask_size: [f64; LEVELS],
}

/// Writes the observation into `out` (length [`OBS_DIM`]).
#[allow(clippy::too_many_arguments)]
pub fn write_obs(
    out: &mut [f32],
    time_left: f64,
    inventory_left: f64,
    book: &BookPicture,
    returns_bps: &[f64; RETURN_LAGS],
    last_volume: f64,
    spread_bps: f64,
    avg_minute_volume: f64,
) {
    let v = avg_minute_volume.max(1.0);
    out[0] = time_left as f32;
    out[1] = inventory_left as f32;
    for k in 0..LEVELS {
        out[2 + k] = (book.bid_bps[k] / 10.0) as f32;
        out[7 + k] = (book.bid_size[k] / v) as f32;
        out[12 + k] = (book.ask_bps[k] / 10.0) as f32;
        out[17 + k] = (book.ask_size[k] / v) as f32;
    }
    for k in 0..RETURN_LAGS {
        out[22 + k] = (returns_bps[k] / 10.0) as f32;
    }
    out[27] = (last_volume / v) as f32;
    out[28] = (spread_bps / 10.0) as f32;
}
