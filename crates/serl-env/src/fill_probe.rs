//! Passive-fill probes: one resting child order, posted at a given time at
//! or behind the touch and withdrawn after a horizon, in each venue serl
//! fills resting orders in. The same probe in the real queue
//! ([`LobsterDay::probe`]), in the static replay's bar rule
//! ([`probe_bars`]) and in the simulated market ([`probe_market`]) says
//! how far each venue's fills are from the real book's: how likely the
//! order fills, how soon, and how the mid moves after it filled (adverse
//! selection).

use serde::Serialize;
use serl_data::Session;
use serl_lob::Side;
use serl_market::{Simulator, EXECUTION_OWNER};

use crate::dynamic_env::limit_ticks;
use crate::lobster_queue::LobsterDay;
use crate::placement::{adverse_bps, FillModel, Placement};

/// Seconds after a fill at which the mid is read again for the adverse
/// move: 1 and 5 minutes.
pub const ADVERSE_AFTER: [f64; 2] = [60.0, 300.0];

/// A resting order to probe a venue with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Probe {
    /// A buy (resting on the bid side) or a sell.
    pub buy: bool,
    /// Ticks behind the touch: 0 joins the best bid (ask).
    pub ticks_behind: u16,
    /// Shares.
    pub size: u64,
    /// When it is posted, seconds after midnight.
    pub post: f64,
    /// How long it rests before it is withdrawn, seconds.
    pub horizon: f64,
}

impl Probe {
    /// +1 for a buy, −1 for a sell.
    pub fn sign(&self) -> f64 {
        if self.buy {
            1.0
        } else {
            -1.0
        }
    }

    /// Where it rests: `ticks_behind` the touch.
    pub fn placement(&self) -> Placement {
        Placement::Passive {
            ticks: self.ticks_behind,
        }
    }

    /// Its limit price, dollars, from the mid and half spread when posted.
    pub fn price(&self, mid: f64, half: f64) -> f64 {
        self.placement()
            .limit_price(self.sign(), mid, half)
            .expect("a passive placement has a price")
    }
}

/// What became of a probe.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProbeFill {
    /// Its limit price, dollars.
    pub price: f64,
    /// The mid when it was posted, dollars.
    pub mid: f64,
    /// Seconds from posting to its first fill, within the horizon.
    pub first_fill: Option<f64>,
    /// Seconds from posting until it had filled in full, within the
    /// horizon.
    pub full_fill: Option<f64>,
    /// Shares filled within the horizon.
    pub filled: f64,
    /// For a full fill: the mid's move [`ADVERSE_AFTER`] its last fill,
    /// bps of the mid then, signed against the order (positive: a buy's
    /// mid fell, a sell's rose, so the fill was adversely selected).
    pub adverse_bps: [Option<f64>; 2],
}

impl ProbeFill {
    fn new(price: f64, mid: f64) -> Self {
        ProbeFill {
            price,
            mid,
            first_fill: None,
            full_fill: None,
            filled: 0.0,
            adverse_bps: [None, None],
        }
    }

    /// Adds `qty` shares filled `after` seconds from posting, for an order
    /// of `size`.
    fn add(&mut self, after: f64, qty: f64, size: u64) {
        if qty <= 0.0 {
            return;
        }
        self.first_fill.get_or_insert(after);
        self.filled += qty;
        if self.full_fill.is_none() && self.filled >= size as f64 {
            self.full_fill = Some(after);
        }
    }

    /// Sets the adverse moves of a full fill from the mid at the fill and
    /// the mids [`ADVERSE_AFTER`] it.
    fn adverse(&mut self, sign: f64, at_fill: f64, after: [Option<f64>; 2]) {
        if self.full_fill.is_none() || at_fill <= 0.0 {
            return;
        }
        for (slot, later) in self.adverse_bps.iter_mut().zip(after) {
            *slot = later.map(|m| adverse_bps(sign, at_fill, m));
        }
    }
}

impl LobsterDay {
    /// Rests `probe` in the day's real queue (behind every share shown at
    /// its price when posted, as [`crate::LobsterVenue`] does) and returns
    /// what it filled; `None` when the book is not two-sided then.
    pub fn probe(&self, probe: &Probe) -> Option<ProbeFill> {
        // Before the first message there is no book to join.
        self.mid_after(probe.post)?;
        let (mid, half) = self.quote_at(probe.post)?;
        let price = probe.price(mid, half);
        let mut out = ProbeFill::new(price, mid);
        let mut track = self.join_queue(probe.sign(), price, probe.post);
        let size = probe.size as f64;
        let fills = self.work_queue(&mut track, size, probe.post + probe.horizon, size);
        for &(t, qty, _) in &fills {
            out.add(t - probe.post, qty, probe.size);
        }
        if let Some(done) = out.full_fill {
            // The mid just after the fill, and after the messages of the
            // minutes that follow it.
            let t = probe.post + done;
            let at_fill = self.mid_after(t).unwrap_or(0.0);
            let after = ADVERSE_AFTER.map(|d| self.mid_after(t + d));
            out.adverse(probe.sign(), at_fill, after);
        }
        Some(out)
    }
}

/// Rests `probe` at `price` (the mid then `mid`) in the static replay's
/// minute bars of `session` under `model`'s rule ([`FillModel::bar_fill`],
/// no participation cap): a fill counts at the end of its bar, and the
/// mids are the bars' closing quotes.
pub fn probe_bars(
    session: &Session,
    model: &FillModel,
    probe: &Probe,
    (price, mid): (f64, f64),
) -> ProbeFill {
    let mut out = ProbeFill::new(price, mid);
    let posted_in = (probe.post / 60.0).floor() as u16;
    let end = probe.post + probe.horizon;
    let mut left = probe.size as f64;
    for (k, &minute) in session.minute.iter().enumerate() {
        let bar_end = f64::from(minute + 1) * 60.0;
        if minute < posted_in || (minute == posted_in && !model.placement_bar) {
            continue;
        }
        if bar_end > end + 1e-9 || left <= 0.0 {
            break;
        }
        let bar = (session.low[k], session.high[k], session.volume[k]);
        let got = model.bar_fill(probe.sign(), price, bar, f64::INFINITY, left);
        left -= got;
        out.add(bar_end - probe.post, got, probe.size);
    }
    if let Some(done) = out.full_fill {
        let minute = ((probe.post + done) / 60.0).round() as u16 - 1;
        let at_fill = bar_mid(session, minute).unwrap_or(0.0);
        let after = ADVERSE_AFTER.map(|d| bar_mid(session, minute + (d / 60.0) as u16));
        out.adverse(probe.sign(), at_fill, after);
    }
    out
}

/// The mid of the last quotes at or before `minute`'s end; `None` past the
/// session's last bar.
fn bar_mid(session: &Session, minute: u16) -> Option<f64> {
    let q = session.quotes.as_ref()?;
    if session.minute.last().is_none_or(|&last| minute > last) {
        return None;
    }
    let k = session
        .minute
        .partition_point(|&m| m <= minute)
        .checked_sub(1)?;
    let mid = (q.bid[k] + q.ask[k]) / 2.0;
    (mid.is_finite() && q.ask[k] > q.bid[k]).then_some(mid)
}

/// Seconds between the simulated market's looks at a resting probe.
const POLL_SECONDS: f64 = 1.0;

/// Rests `probe` in the simulated market `sim`, whose day starts `open`
/// seconds after midnight: runs the market to the probe's time, posts it
/// as an outside execution agent, looks at it every second, withdraws it
/// after its horizon and runs on until the adverse moves can be read.
/// `None` when the book is not two-sided at the probe's time or the
/// probe is earlier than the simulator's clock.
pub fn probe_market(sim: &mut Simulator, open: f64, probe: &Probe) -> Option<ProbeFill> {
    let micros = |t: f64| ((t - open).max(0.0) * 1e6).round() as u64;
    let start = micros(probe.post);
    if start < sim.now() {
        return None;
    }
    sim.run_until(start);
    let (ticks, mid) = limit_ticks(sim, probe.sign(), probe.placement())?;
    let side = if probe.buy { Side::Bid } else { Side::Ask };
    let mut out = ProbeFill::new(ticks as f64 * sim.tick(), mid);
    let (id, report) = sim.post_limit(EXECUTION_OWNER, side, ticks, probe.size)?;
    out.add(0.0, report.filled as f64, probe.size);
    let mut resting = report.resting;
    // The mid at every look, for the adverse moves.
    let mut mids = vec![mid];
    let day_end = sim.minutes() as u64 * 60_000_000;
    let mut t = 0.0;
    loop {
        let last = match out.full_fill {
            Some(done) => done + ADVERSE_AFTER[1],
            None => probe.horizon,
        };
        t += POLL_SECONDS;
        if t > last + 1e-9 || micros(probe.post + t) >= day_end {
            break;
        }
        sim.run_until(micros(probe.post + t));
        if resting > 0 {
            let now = sim.book.order(id).map_or(0, |o| o.qty);
            out.add(t, resting.saturating_sub(now) as f64, probe.size);
            resting = now;
            if resting > 0 && t >= probe.horizon - 1e-9 {
                sim.cancel_resting(id);
                resting = 0;
            }
        }
        mids.push(sim.mid_price().unwrap_or(f64::NAN));
    }
    if resting > 0 {
        sim.cancel_resting(id);
    }
    if let Some(done) = out.full_fill {
        let look = |s: f64| {
            mids.get((s / POLL_SECONDS).round() as usize)
                .copied()
                .filter(|m| m.is_finite())
        };
        let after = ADVERSE_AFTER.map(|d| look(done + d));
        out.adverse(probe.sign(), look(done).unwrap_or(0.0), after);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lobster_queue::tests::day;
    use serl_market::{Calibration, MarketConfig};

    fn probe(buy: bool, ticks_behind: u16, size: u64, post: f64) -> Probe {
        Probe {
            buy,
            ticks_behind,
            size,
            post,
            horizon: 1800.0,
        }
    }

    #[test]
    fn the_real_queue_fills_a_probe_once_the_shares_ahead_are_gone() {
        let d = day(&[
            ("34201.0,1,1,100,1000000,1", "1000100,200,1000000,400"),
            // 400 ahead of a bid posted at 34260: 250 trade and 100 leave.
            ("34300.0,4,7,250,1000000,1", "1000100,200,1000000,150"),
            ("34310.0,3,1,100,1000000,1", "1000100,200,1000000,50"),
            // A trade through its price fills 90 shares at once...
            ("34320.0,4,9,90,999900,1", "1000100,200,999900,410"),
            // ...and a later order's trade at its price the rest.
            ("34330.0,1,3,30,1000000,1", "1000100,200,1000000,30"),
            ("34340.0,4,3,10,1000000,1", "1000100,200,1000000,20"),
            // The bid at 100.00 goes: the mid falls half a cent.
            ("34500.0,3,3,20,1000000,1", "1000100,200,999900,410"),
            // A sell far above: the day goes on past five minutes.
            ("34700.0,1,5,10,1000500,-1", "1000100,200,999900,410"),
        ]);
        let got = d.probe(&probe(true, 0, 100, 34260.0)).unwrap();
        assert_eq!((got.price, got.mid), (100.00, 100.005));
        assert_eq!(got.first_fill, Some(60.0));
        assert_eq!(got.full_fill, Some(80.0));
        assert_eq!(got.filled, 100.0);
        // A minute after the fill (34400) the mid is still 100.005; five
        // minutes after, 100.00: half a cent against the buy.
        assert_eq!(got.adverse_bps[0], Some(0.0));
        let five = got.adverse_bps[1].unwrap();
        assert!((five - 0.005 / 100.005 * 1e4).abs() < 1e-9, "{five}");
        // One tick behind, at 99.99, where the level-1 file shows nobody
        // ahead: the 90 shares traded there fill it, and nothing more.
        let behind = d.probe(&probe(true, 1, 100, 34260.0)).unwrap();
        assert!((behind.price - 99.99).abs() < 1e-9, "{}", behind.price);
        assert_eq!(
            (behind.first_fill, behind.full_fill, behind.filled),
            (Some(60.0), None, 90.0)
        );
        // A sell at the ask never trades: nothing reaches 100.01.
        // Before the day's first message there is no book to join.
        assert!(d.probe(&probe(true, 0, 100, 34000.0)).is_none());
        let sell = d.probe(&probe(false, 0, 100, 34260.0)).unwrap();
        assert!(
            (sell.price - 100.01).abs() < 1e-9 && sell.filled == 0.0,
            "{sell:?}"
        );
    }

    fn bars() -> Session {
        let mut s = day(&[("34201.0,1,1,100,1000000,1", "1000100,200,1000000,400")])
            .session()
            .clone();
        // Minutes 570.. 09:30: the bars' lows and volumes.
        s.minute = vec![570, 571, 572, 573];
        s.low = vec![99.99, 100.00, 100.00, 99.98];
        s.high = vec![100.02, 100.02, 100.00, 100.01];
        s.close = vec![100.0; 4];
        s.open = vec![100.0; 4];
        s.volume = vec![5_000.0, 300.0, 200.0, 1_000.0];
        let q = s.quotes.as_mut().unwrap();
        q.bid = vec![100.0, 100.0, 100.0, 99.98];
        q.ask = vec![100.01, 100.01, 100.01, 99.99];
        s
    }

    #[test]
    fn the_bar_rule_fills_a_probe_from_the_bar_after_it_was_posted() {
        let s = bars();
        let model = FillModel::default();
        let p = probe(true, 0, 100, 570.0 * 60.0 + 10.0);
        let got = probe_bars(&s, &model, &p, (100.00, 100.005));
        // The placement bar (570) traded through it but does not count;
        // 571 touches 100.00 over 3 ticks: half of 300 / 3 = 50 shares;
        // 572 only touches, one tick: half of 200 = 100, capped at 50.
        assert_eq!(got.first_fill, Some(110.0));
        assert_eq!(got.full_fill, Some(170.0));
        assert_eq!(got.filled, 100.0);
        // The bar mid at 572's end 100.005, one minute later 99.985.
        let adverse = got.adverse_bps[0].unwrap();
        assert!((adverse - 0.02 / 100.005 * 1e4).abs() < 1e-9, "{adverse}");
        // Five minutes on is past the last bar: nothing to read.
        assert_eq!(got.adverse_bps[1], None);
        // With the placement bar counted, the trade-through fills it there.
        let eager = FillModel {
            placement_bar: true,
            ..model
        };
        let got = probe_bars(&s, &eager, &p, (100.00, 100.005));
        assert_eq!(got.full_fill, Some(50.0));
    }

    fn small_market() -> (Calibration, MarketConfig) {
        let minutes = 60;
        let cal = Calibration {
            tick: 0.01,
            minute_price: (0..minutes)
                .map(|m| 50.0 + 0.02 * (m as f64 / 7.0).sin())
                .collect(),
            minute_volume: vec![20_000.0; minutes],
            spread_bps: 4.0,
            noise_scale: Vec::new(),
        };
        let market = MarketConfig {
            noise_agents: 20,
            value_agents: 5,
            momentum_agents: 2,
            informed_agents: 2,
            ..MarketConfig::default()
        };
        (cal, market)
    }

    #[test]
    fn the_simulated_market_fills_a_probe_in_its_book_and_withdraws_the_rest() {
        let (cal, market) = small_market();
        let open = 34_200.0;
        let run = |p: &[Probe]| {
            let mut sim = Simulator::new(&cal, &market, 7);
            let fills: Vec<_> = p.iter().map(|p| probe_market(&mut sim, open, p)).collect();
            (fills, sim)
        };
        let small = Probe {
            horizon: 600.0,
            ..probe(true, 0, 100, open + 300.0)
        };
        let huge = Probe {
            size: 10_000_000,
            post: open + 1_500.0,
            ..small
        };
        let (fills, sim) = run(&[small, huge]);
        let (a, b) = (fills[0].unwrap(), fills[1].unwrap());
        // Posted at the best bid, below the mid.
        assert!(a.price < a.mid && a.mid - a.price < 0.02, "{a:?}");
        let done = a
            .full_fill
            .expect("100 shares at the touch fill in 10 busy minutes");
        assert!(a.first_fill.unwrap() <= done && done <= 600.0);
        assert_eq!(a.filled, 100.0);
        assert!(a.adverse_bps.iter().all(Option::is_some));
        // Ten million shares do not fill, and what is left is withdrawn.
        assert!(b.full_fill.is_none() && b.filled < 10_000_000.0);
        let resting: u64 = sim.book.levels(Side::Bid).map(|l| l.qty).sum();
        assert!(
            resting < 10_000_000 - b.filled as u64,
            "the probe still rests"
        );
        // Same seed, same probes, same fills; a probe before the clock is
        // refused.
        assert_eq!(run(&[small, huge]).0, fills);
        let (late_first, _) = run(&[huge, small]);
        assert!(late_first[1].is_none());
    }
}
