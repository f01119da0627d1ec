//! Order statistics read from a LOBSTER message file, to calibrate the
//! noise traders' order size and cancellation rate from real order flow.

use serde::Serialize;
use serl_lob::{BookRows, LobsterEvent, MessageRow};

use crate::quantiles::evenly_spaced_quantiles;
use crate::realism::DayFeatures;
use crate::MarketConfig;

/// Quantiles of the new limit orders' depth behind the touch that the
/// noise traders place at ([`OrderFlow`]).
pub const DEPTH_QUANTILES: usize = 64;

/// A real day's order flow as the market takes it: its order statistics
/// (sizes, cancels, round lots) and where its new limit orders go.
#[derive(Debug, Clone, PartialEq)]
pub struct OrderFlow {
    /// The order statistics.
    pub stats: OrderStats,
    /// The new limit orders' depths behind their side's best price, ticks,
    /// at [`DEPTH_QUANTILES`] quantiles.
    pub depth_quantiles: Vec<i64>,
    /// The median gap between consecutive messages (those that change
    /// the visible book), microseconds.
    pub median_gap_us: f64,
}

impl OrderFlow {
    /// Measures a LOBSTER day (`rows[i]` the book after `messages[i]`,
    /// `tick` one tick in LOBSTER units); `None` without submissions.
    pub fn measure(messages: &[MessageRow], rows: &BookRows, tick: i64) -> Option<OrderFlow> {
        let features = DayFeatures::measure(messages, rows, tick);
        Self::from_features(messages, &features)
    }

    /// [`OrderFlow::measure`] with the day's features already measured.
    pub fn from_features(messages: &[MessageRow], features: &DayFeatures) -> Option<OrderFlow> {
        // The messages a simulator writes, as the inter-arrival statistic
        // counts them: hidden executions, crosses and halts left out.
        let times: Vec<f64> = messages
            .iter()
            .filter(|m| {
                matches!(
                    m.kind,
                    LobsterEvent::Submit
                        | LobsterEvent::Cancel
                        | LobsterEvent::Delete
                        | LobsterEvent::Execute
                )
            })
            .map(|m| m.time)
            .collect();
        let mut gaps: Vec<f64> = times.windows(2).map(|w| (w[1] - w[0]).max(0.0)).collect();
        gaps.sort_by(f64::total_cmp);
        Some(OrderFlow {
            stats: OrderStats::from_messages(messages)?,
            depth_quantiles: features.limit_depth_quantiles(DEPTH_QUANTILES),
            median_gap_us: gaps.get(gaps.len() / 2).map_or(0.0, |g| g * 1e6),
        })
    }

    /// Carries the day's order flow into `cfg` for a day trading
    /// `daily_volume` shares ([`OrderStats::apply`]) with its depth profile
    /// and its gap between messages (a maker's re-quote spread out).
    pub fn apply(&self, cfg: &mut MarketConfig, daily_volume: f64) {
        cfg.depth_quantiles = self.depth_quantiles.clone();
        cfg.mm_message_gap_us = self.median_gap_us;
        self.stats.apply(cfg, daily_volume);
    }
}

/// What a day of LOBSTER messages says about order flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrderStats {
    /// New limit orders (type 1).
    pub submissions: u64,
    /// Partial cancels and deletions (types 2 and 3).
    pub cancels: u64,
    /// Shares executed against visible orders (type 4) and hidden ones
    /// (type 5).
    pub executed_shares: u64,
    /// Median size of a new limit order, shares.
    pub median_size: f64,
    /// Mean size of a new limit order, shares.
    pub mean_size: f64,
    /// Cancels per submission.
    pub cancel_ratio: f64,
    /// Share of new limit orders whose size is a whole number of round
    /// lots (multiples of 100 shares).
    pub round_lot_share: f64,
    /// The new limit orders' sizes at [`SIZE_QUANTILES`] evenly spaced
    /// quantiles, shares: the sample's size distribution (empty: not
    /// measured).
    pub size_quantiles: Vec<i64>,
}

/// Quantiles of the order sizes kept ([`OrderStats::size_quantiles`]).
pub const SIZE_QUANTILES: usize = 64;

/// A market maker quotes a level as up to this many orders when the day's
/// order sizes are known ([`OrderStats::apply`]).
const ORDERS_PER_LEVEL: usize = 6;

/// The round lot of US equities, shares.
const ROUND_LOT: i64 = 100;

impl OrderStats {
    /// Measures a day of parsed LOBSTER message rows; `None` when they
    /// hold no submissions to measure.
    pub fn from_messages(rows: &[MessageRow]) -> Option<OrderStats> {
        let mut sizes: Vec<i64> = rows
            .iter()
            .filter(|r| r.kind == LobsterEvent::Submit && r.size > 0)
            .map(|r| r.size)
            .collect();
        if sizes.is_empty() {
            return None;
        }
        sizes.sort_unstable();
        let cancels = rows
            .iter()
            .filter(|r| matches!(r.kind, LobsterEvent::Cancel | LobsterEvent::Delete))
            .count() as u64;
        let executed_shares = rows
            .iter()
            .filter(|r| matches!(r.kind, LobsterEvent::Execute | LobsterEvent::ExecuteHidden))
            .map(|r| r.size.max(0) as u64)
            .sum();
        let n = sizes.len();
        Some(OrderStats {
            submissions: n as u64,
            cancels,
            executed_shares,
            median_size: sizes[n / 2] as f64,
            mean_size: sizes.iter().sum::<i64>() as f64 / n as f64,
            cancel_ratio: cancels as f64 / n as f64,
            round_lot_share: sizes.iter().filter(|s| *s % ROUND_LOT == 0).count() as f64 / n as f64,
            size_quantiles: evenly_spaced_quantiles(&sizes, SIZE_QUANTILES),
        })
    }

    /// Sets the noise traders' order size and cancellation share from these
    /// statistics, and round lots when most of the sample's orders are.
    /// With the sample's size quantiles, every trader draws its sizes from
    /// them (scaled as the median is, a round-lot size kept in round lots)
    /// and a market maker quotes each level as several such orders.
    ///
    /// The size is carried over as a share of the day's executed volume, so
    /// that a 2012 LOBSTER sample can calibrate a 2018 day of another
    /// stock: `order_size = median / executed × daily_volume`. The cancel
    /// share solves cancels per limit submission = c / ((1 − c)(1 − m)),
    /// where m is the market-order share of non-cancel arrivals.
    pub fn apply(&self, cfg: &mut MarketConfig, daily_volume: f64) {
        if self.executed_shares > 0 && daily_volume > 0.0 {
            cfg.order_size =
                (self.median_size / self.executed_shares as f64 * daily_volume).max(1.0);
        }
        let k = self.cancel_ratio * (1.0 - cfg.market_order_share.clamp(0.0, 0.99));
        cfg.cancel_share = (k / (1.0 + k)).clamp(0.0, 0.9);
        let round = self.round_lot_share > 0.5;
        if round {
            cfg.round_lot = ROUND_LOT as u64;
        }
        if !self.size_quantiles.is_empty() && self.executed_shares > 0 && daily_volume > 0.0 {
            let scale = daily_volume / self.executed_shares as f64;
            cfg.size_quantiles = self
                .size_quantiles
                .iter()
                .map(|&q| {
                    let shares = q as f64 * scale;
                    if round && q % ROUND_LOT == 0 {
                        (shares / ROUND_LOT as f64).round().max(1.0) as u64 * ROUND_LOT as u64
                    } else {
                        shares.round().max(1.0) as u64
                    }
                })
                .collect();
            cfg.mm_orders_per_level = ORDERS_PER_LEVEL;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kind: u8, size: i64) -> MessageRow {
        MessageRow {
            time: 0.0,
            kind: LobsterEvent::from_code(kind).unwrap(),
            id: 1,
            size,
            price: 100,
            direction: 1,
        }
    }

    #[test]
    fn a_day_of_messages_sets_size_and_cancel_share() {
        let rows = [
            row(1, 100),
            row(1, 300),
            row(1, 200),
            row(3, 100),
            row(2, 50),
            row(4, 1_000),
        ];
        let s = OrderStats::from_messages(&rows).unwrap();
        assert_eq!((s.submissions, s.cancels, s.executed_shares), (3, 2, 1_000));
        assert_eq!(s.median_size, 200.0);
        let mut cfg = MarketConfig::default();
        s.apply(&mut cfg, 1e6);
        // 200 of 1,000 executed shares, carried to a day of a million.
        assert_eq!(cfg.order_size, 200_000.0);
        // The cancels per limit order the noise traders will produce.
        let c = cfg.cancel_share;
        let per_limit = c / ((1.0 - c) * (1.0 - cfg.market_order_share));
        assert!((per_limit - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(OrderStats::from_messages(&[row(4, 10)]), None);
    }

    /// The kept quantiles reproduce the sample's own quantiles, and a
    /// config takes them scaled like the median, round lots kept round.
    #[test]
    fn the_size_quantiles_reproduce_the_sample_and_scale_with_the_day() {
        // 70% round lots of 100 to 500 shares, 30% odd lots of 1 to 99.
        let mut rows: Vec<MessageRow> = (0..1_000)
            .map(|i| {
                let size = if i % 10 < 7 {
                    100 * (1 + i % 5)
                } else {
                    1 + (i * 37) % 99
                };
                row(1, size)
            })
            .collect();
        rows.push(row(4, 50_000));
        let s = OrderStats::from_messages(&rows).unwrap();
        assert_eq!(s.size_quantiles.len(), SIZE_QUANTILES);
        let mut sizes: Vec<i64> = rows[..1_000].iter().map(|r| r.size).collect();
        sizes.sort_unstable();
        for (i, &q) in s.size_quantiles.iter().enumerate() {
            let p = (i as f64 + 0.5) / SIZE_QUANTILES as f64;
            // Within one order of the sample's own p-quantile.
            let lo = sizes[((p * 1_000.0) as usize).saturating_sub(1)];
            let hi = sizes[((p * 1_000.0) as usize + 1).min(999)];
            assert!(
                (lo..=hi).contains(&q),
                "quantile {p}: {q} not in {lo}..={hi}"
            );
        }
        assert!(s.size_quantiles.windows(2).all(|w| w[0] <= w[1]));
        let mut cfg = MarketConfig::default();
        s.apply(&mut cfg, 100_000.0); // twice the sample's executed volume
        assert_eq!(cfg.mm_orders_per_level, ORDERS_PER_LEVEL);
        for (&q, &c) in s.size_quantiles.iter().zip(&cfg.size_quantiles) {
            if q % 100 == 0 {
                assert_eq!(c, 2 * q as u64, "a round lot stays a round lot");
            } else {
                assert_eq!(c, (2 * q) as u64);
            }
        }
        // Without quantiles (an older record), the log-normal stays.
        let mut plain = MarketConfig::default();
        OrderStats {
            size_quantiles: Vec::new(),
            ..s
        }
        .apply(&mut plain, 100_000.0);
        assert!(plain.size_quantiles.is_empty());
        assert_eq!(plain.mm_orders_per_level, 1);
    }
}
