//! Per-session statistics that the market simulator, the environments and
//! the baselines calibrate from.
//!
//! Everything here uses only the session itself, or sessions strictly
//! before it (average daily volume, historical volume profile), so that no
//! statistic peeks at the day it describes.

use chrono::NaiveDate;
use serde::Serialize;

use crate::bars::{Dataset, Session};
use crate::config::{SessionConfig, StatsConfig};

/// Where a spread estimate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpreadSource {
    /// Mean quoted spread of the session's quote bars.
    Quotes,
    /// The Abdi–Ranaldo (2017) close/high/low estimator over consecutive
    /// minutes, floored at one cent.
    HighLow,
}

/// Statistics of one symbol's session, computed from that session and the
/// symbol's earlier ones only.
#[derive(Debug, Clone, Serialize)]
pub struct SessionStats {
    /// The ticker.
    pub symbol: String,
    /// The session's date.
    pub date: NaiveDate,
    /// Number of bars, filled bars included.
    pub bars: usize,
    /// Shares traded in the session.
    pub daily_volume: f64,
    /// Mean daily volume of up to `adv_lookback` earlier sessions; `None` for
    /// a symbol's first session.
    pub adv: Option<f64>,
    /// Share of the day's volume in each `profile_bucket_minutes` bucket
    /// from the open; sums to 1 (all zeros for a day without volume).
    pub volume_profile: Vec<f64>,
    /// Square root of the sum of squared 1-minute log returns of the close.
    pub realized_vol: f64,
    /// Realised volatility per minute (`realized_vol / sqrt(returns)`).
    pub minute_vol: f64,
    /// Typical bid-ask spread, in basis points of the mid (see
    /// [`spread_estimate`]).
    pub spread_bps: f64,
    /// Whether `spread_bps` was quoted or estimated.
    pub spread_source: SpreadSource,
    /// Volume-weighted mean minute price.
    pub price_level: f64,
    /// Open of the first bar (NaN for an empty session).
    pub open_price: f64,
    /// Close of the last bar (NaN for an empty session).
    pub close_price: f64,
}

/// Volume share per bucket of `bucket` minutes from the open. The bar
/// stamped at the close (the closing auction) belongs to the last bucket.
pub fn volume_profile(s: &Session, session: &SessionConfig, bucket: u16) -> Vec<f64> {
    let open = session.open_minute().unwrap_or(570);
    let close = session.close_minute().unwrap_or(960);
    let n = (close - open).div_ceil(bucket).max(1) as usize;
    let mut out = vec![0.0; n];
    for (m, v) in s.minute.iter().zip(&s.volume) {
        let k = ((m.saturating_sub(open)) / bucket) as usize;
        out[k.min(n - 1)] += v;
    }
    let total: f64 = out.iter().sum();
    if total > 0.0 {
        out.iter_mut().for_each(|x| *x /= total);
    }
    out
}

/// The mean volume profile of `history` (earlier sessions), for the VWAP
/// baseline and the simulator's arrival schedule.
pub fn historical_profile(
    history: &[Session],
    session: &SessionConfig,
    bucket: u16,
) -> Option<Vec<f64>> {
    let mut acc: Option<Vec<f64>> = None;
    for s in history {
        let p = volume_profile(s, session, bucket);
        match &mut acc {
            None => acc = Some(p),
            Some(a) => a.iter_mut().zip(&p).for_each(|(x, y)| *x += y),
        }
    }
    acc.map(|mut a| {
        let k = history.len() as f64;
        a.iter_mut().for_each(|x| *x /= k);
        a
    })
}

/// Realised volatility of the session's 1-minute log close returns:
/// (whole session, per minute). The first is the square root of the sum of
/// squared returns, the second that divided by the square root of the
/// number of returns (0 with fewer than two bars).
pub fn realized_vol(s: &Session) -> (f64, f64) {
    let mut sum = 0.0;
    let mut n = 0usize;
    for w in s.close.windows(2) {
        let r = (w[1] / w[0]).ln();
        sum += r * r;
        n += 1;
    }
    let rv = sum.sqrt();
    (rv, if n > 0 { rv / (n as f64).sqrt() } else { 0.0 })
}

/// A typical spread in bps: quoted when the session has quotes, else
/// estimated from bars.
pub fn spread_estimate(s: &Session) -> (f64, SpreadSource) {
    if let Some(q) = &s.quotes {
        let (mut sum, mut n) = (0.0, 0usize);
        for (b, a) in q.bid.iter().zip(&q.ask) {
            if b.is_finite() && a.is_finite() && *a >= *b && *b > 0.0 {
                sum += (a - b) / ((a + b) / 2.0);
                n += 1;
            }
        }
        if n > 0 {
            return (sum / n as f64 * 1e4, SpreadSource::Quotes);
        }
    }
    // Abdi & Ranaldo (2017): s^2 = 4 E[(c_t - eta_t)(c_t - eta_{t+1})], with
    // c the log close and eta the log mid-range.
    let eta = |i: usize| 0.5 * (s.high[i].ln() + s.low[i].ln());
    let (mut sum, mut n) = (0.0, 0usize);
    for i in 0..s.len().saturating_sub(1) {
        let c = s.close[i].ln();
        sum += (c - eta(i)) * (c - eta(i + 1));
        n += 1;
    }
    let s2 = if n > 0 { 4.0 * sum / n as f64 } else { 0.0 };
    let price = s.close.first().copied().unwrap_or(1.0);
    let tick_bps = 0.01 / price * 1e4;
    (
        (s2.max(0.0).sqrt() * 1e4).max(tick_bps),
        SpreadSource::HighLow,
    )
}

/// Statistics of one session, given the symbol's earlier sessions.
pub fn session_stats(
    s: &Session,
    earlier: &[Session],
    session: &SessionConfig,
    cfg: &StatsConfig,
) -> SessionStats {
    let daily_volume = s.total_volume();
    let look = &earlier[earlier.len().saturating_sub(cfg.adv_lookback)..];
    let adv = (!look.is_empty())
        .then(|| look.iter().map(Session::total_volume).sum::<f64>() / look.len() as f64);
    let (realized_vol, minute_vol) = realized_vol(s);
    let (spread_bps, spread_source) = spread_estimate(s);
    let (mut pv, mut v) = (0.0, 0.0);
    for i in 0..s.len() {
        pv += s.minute_price(i) * s.volume[i];
        v += s.volume[i];
    }
    let price_level = if v > 0.0 {
        pv / v
    } else {
        s.close.iter().sum::<f64>() / s.len().max(1) as f64
    };
    SessionStats {
        symbol: s.symbol.to_string(),
        date: s.date,
        bars: s.len(),
        daily_volume,
        adv,
        volume_profile: volume_profile(s, session, cfg.profile_bucket_minutes),
        realized_vol,
        minute_vol,
        spread_bps,
        spread_source,
        price_level,
        open_price: s.open.first().copied().unwrap_or(f64::NAN),
        close_price: s.close.last().copied().unwrap_or(f64::NAN),
    }
}

impl Dataset {
    /// Statistics for every session, in the dataset's (symbol, date) order.
    pub fn session_stats(&self, session: &SessionConfig, cfg: &StatsConfig) -> Vec<SessionStats> {
        use rayon::prelude::*;
        let symbols = self.symbols();
        symbols
            .par_iter()
            .flat_map_iter(|sym| {
                let ss = self.symbol_sessions(sym);
                (0..ss.len()).map(move |i| session_stats(&ss[i], &ss[..i], session, cfg))
            })
            .collect()
    }
}
