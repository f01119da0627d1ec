//! Per-session arrays that the environments read every step, built once.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use chrono::NaiveDate;
use serl_data::{historical_profile, spread_estimate, DataConfig, Dataset, Session};

use crate::order::adv_before;
use serl_market::{OrderFlow, Scenario};

/// One symbol-session prepared for execution: minute prices, spreads,
/// volumes and the look-back statistics a strategy may use.
#[derive(Debug, Clone)]
pub struct SessionView {
    /// The stock.
    pub symbol: Arc<str>,
    /// The session's date.
    pub date: NaiveDate,
    /// Each bar's minute, minutes after midnight, ascending (minutes
    /// without trades have no bar).
    pub minute: Vec<u16>,
    /// The price a bar's volume traded at (VWAP, else (H+L+C)/3).
    pub price: Vec<f64>,
    /// Each bar's close.
    pub close: Vec<f64>,
    /// Each bar's low, for the fills of resting buys.
    pub low: Vec<f64>,
    /// Each bar's high, for the fills of resting sells.
    pub high: Vec<f64>,
    /// Each bar's traded volume, shares.
    pub volume: Vec<f64>,
    /// Half the bid-ask spread, in price units, per bar: from quotes where
    /// the session has them, else the session's estimated spread.
    pub half_spread: Vec<f64>,
    /// Quoted bid size at the touch per bar, shares, where the session
    /// has quotes.
    pub bid_size: Option<Vec<f64>>,
    /// Quoted ask size at the touch per bar, shares, where the session
    /// has quotes.
    pub ask_size: Option<Vec<f64>>,
    /// 1-minute log returns of the close, in bps (0 for the first bar).
    pub ret_bps: Vec<f64>,
    /// A planted forecast of each bar's coming return, where the data
    /// carries one (`serl data plant`).
    pub signal: Option<Vec<f64>>,
    /// Average daily volume over the look-back before this day.
    pub adv: f64,
    /// `adv` spread over the session's minutes.
    pub avg_minute_volume: f64,
    /// The day's estimated spread in bps.
    pub spread_bps: f64,
    /// One cent in bps of the opening price: the tick.
    pub tick_bps: f64,
    /// Realised 1-minute volatility of earlier sessions (this one for the
    /// first), in bps.
    pub minute_vol_bps: f64,
    /// Mean intraday volume profile of earlier sessions, per
    /// `profile_bucket` minutes from the open (uniform without history).
    pub profile: Vec<f64>,
    /// Width of a `profile` bucket, minutes.
    pub profile_bucket: u16,
    /// The session's open, minutes after midnight (from the data
    /// config's session hours; 09:30 when unset).
    pub open_minute: u16,
    /// The session's real order flow, where message data exists (a
    /// LOBSTER day): the dynamic market then takes its order sizes,
    /// cancels, limit-order depths (the noise traders' and the makers'
    /// levels) and gap between messages from it ([`crate::calibrate`]).
    pub order_flow: Option<Arc<OrderFlow>>,
    /// The simulated market's fitted noise rates, per market config (its
    /// debug form): fitted once per session, shared by every episode.
    pub(crate) noise_fits: NoiseFits,
    /// Where fits are kept between runs ([`MarketData::with_fit_cache`]).
    pub(crate) fit_dir: Option<Arc<std::path::Path>>,
}

pub(crate) type NoiseFits = Arc<Mutex<HashMap<String, Arc<Vec<f64>>>>>;

impl SessionView {
    /// Prepares `sessions[i]`, using `sessions[..i]` as the look-back.
    pub fn build(sessions: &[Session], i: usize, cfg: &DataConfig) -> Self {
        let s = &sessions[i];
        let n = s.len();
        let price = s.minute_prices();
        let (spread_bps, _) = spread_estimate(s);
        let half_spread: Vec<f64> = match &s.quotes {
            Some(q) => (0..n)
                .map(|j| {
                    let (b, a) = (q.bid[j], q.ask[j]);
                    if b.is_finite() && a.is_finite() && a >= b && b > 0.0 {
                        (a - b) / 2.0
                    } else {
                        price[j] * spread_bps / 2e4
                    }
                })
                .collect(),
            None => price.iter().map(|p| p * spread_bps / 2e4).collect(),
        };
        let ret_bps = minute_returns_bps(&s.close);
        let look = &sessions[i.saturating_sub(cfg.stats.adv_lookback)..i];
        let adv = adv_before(sessions, i, cfg.stats.adv_lookback);
        let open = cfg.session.open_minute().unwrap_or(570);
        let close = cfg.session.close_minute().unwrap_or(960);
        let session_minutes = (close - open).max(1) as f64;
        let vol_source: &[Session] = if look.is_empty() {
            &sessions[i..=i]
        } else {
            look
        };
        let minute_vol = vol_source
            .iter()
            .map(|x| serl_data::realized_vol(x).1)
            .sum::<f64>()
            / vol_source.len() as f64;
        let bucket = cfg.stats.profile_bucket_minutes;
        let profile = historical_profile(look, &cfg.session, bucket).unwrap_or_else(|| {
            let k = (close - open).div_ceil(bucket) as usize;
            vec![1.0 / k as f64; k]
        });
        SessionView {
            symbol: s.symbol.clone(),
            date: s.date,
            minute: s.minute.clone(),
            close: s.close.clone(),
            low: s.low.clone(),
            high: s.high.clone(),
            volume: s.volume.clone(),
            half_spread,
            bid_size: s.quotes.as_ref().map(|q| q.bid_size.clone()),
            ask_size: s.quotes.as_ref().map(|q| q.ask_size.clone()),
            ret_bps,
            signal: s.signal.clone(),
            adv,
            avg_minute_volume: adv / session_minutes,
            spread_bps,
            tick_bps: 0.01 / price.first().copied().unwrap_or(1.0) * 1e4,
            minute_vol_bps: minute_vol * 1e4,
            profile,
            profile_bucket: bucket,
            open_minute: open,
            price,
            order_flow: None,
            noise_fits: NoiseFits::default(),
            fit_dir: None,
        }
    }

    /// The planted forecast a decision at `from` may know (the last
    /// completed bar's), signed against an order on `side` as the returns
    /// in the observation are: positive forecasts a move against it. 0
    /// where the data carries none.
    pub fn signal_before(&self, from: u16, side: crate::OrderSide) -> f64 {
        let Some(signal) = &self.signal else {
            return 0.0;
        };
        match self.minute.partition_point(|&m| m < from) {
            0 => 0.0,
            k => signal[k - 1] * side.sign(),
        }
    }

    /// Bar indices with minutes in `[from, to)`.
    pub fn range(&self, from: u16, to: u16) -> std::ops::Range<usize> {
        self.minute.partition_point(|&m| m < from)..self.minute.partition_point(|&m| m < to)
    }

    /// This day as `scenario` imagines it, for the static replay: every
    /// price's deviation from the open scaled by `volatility_mult`, plus the
    /// drift and jumps reached by its minute; volumes and quoted sizes
    /// scaled by `liquidity_mult`; spreads kept in bps. The look-back
    /// statistics stay the real ones: the agent meets an unusual day, not
    /// an unusual stock. The same transformation as the dynamic market's.
    pub fn imagined(&self, scenario: &Scenario) -> SessionView {
        let mut day = self.clone();
        day.noise_fits = NoiseFits::default();
        let Some(&first) = self.price.first() else {
            return day;
        };
        let base = first.ln();
        let minutes = self
            .minute
            .last()
            .map_or(1, |&m| usize::from(m.saturating_sub(self.open_minute)) + 1);
        let reshape = |p: f64, minute: u16| {
            let m = usize::from(minute.saturating_sub(self.open_minute));
            let dev =
                (p.ln() - base) * scenario.volatility_mult + scenario.shift_bps(m, minutes) / 1e4;
            (base + dev).exp()
        };
        for (i, &minute) in self.minute.iter().enumerate() {
            day.price[i] = reshape(self.price[i], minute);
            day.close[i] = reshape(self.close[i], minute);
            day.low[i] = reshape(self.low[i], minute);
            day.high[i] = reshape(self.high[i], minute);
            day.half_spread[i] = self.half_spread[i] * day.price[i] / self.price[i];
            day.volume[i] = self.volume[i] * scenario.liquidity_mult;
        }
        for sizes in [&mut day.bid_size, &mut day.ask_size].into_iter().flatten() {
            sizes.iter_mut().for_each(|s| *s *= scenario.liquidity_mult);
        }
        day.ret_bps = minute_returns_bps(&day.close);
        day
    }

    /// The historical volume share expected in `[from, to)`, from the
    /// look-back profile, assuming volume is even within a bucket.
    pub fn expected_share(&self, from: u16, to: u16) -> f64 {
        let b = self.profile_bucket as f64;
        let mut share = 0.0;
        for (k, p) in self.profile.iter().enumerate() {
            let lo = self.open_minute as f64 + k as f64 * b;
            let hi = lo + b;
            let overlap = (hi.min(to as f64) - lo.max(from as f64)).max(0.0);
            share += p * overlap / b;
        }
        share
    }
}

/// 1-minute log returns of `close`, in bps; the first bar's is 0.
fn minute_returns_bps(close: &[f64]) -> Vec<f64> {
    let mut ret = vec![0.0; close.len()];
    for (r, w) in ret.iter_mut().skip(1).zip(close.windows(2)) {
        *r = (w[1] / w[0]).ln() * 1e4;
    }
    ret
}

/// The session an episode replays: borrowed from [`MarketData`], or an
/// imagined day ([`SessionView::imagined`]) that the episode owns.
#[derive(Debug, Clone)]
pub enum ViewRef<'a> {
    /// A session of [`MarketData`].
    Borrowed(&'a SessionView),
    /// An imagined day, owned by the episode.
    Owned(Arc<SessionView>),
}

impl Deref for ViewRef<'_> {
    type Target = SessionView;

    fn deref(&self) -> &SessionView {
        match self {
            ViewRef::Borrowed(v) => v,
            ViewRef::Owned(v) => v,
        }
    }
}

impl<'a> From<&'a SessionView> for ViewRef<'a> {
    fn from(v: &'a SessionView) -> Self {
        ViewRef::Borrowed(v)
    }
}

impl<'a> From<&'a Arc<SessionView>> for ViewRef<'a> {
    fn from(v: &'a Arc<SessionView>) -> Self {
        ViewRef::Borrowed(v)
    }
}

impl From<SessionView> for ViewRef<'_> {
    fn from(v: SessionView) -> Self {
        ViewRef::Owned(Arc::new(v))
    }
}

/// Every session of a dataset prepared once, looked up by symbol and date.
#[derive(Debug, Clone, Default)]
pub struct MarketData {
    views: Vec<Arc<SessionView>>,
    index: HashMap<(Arc<str>, NaiveDate), usize>,
}

impl MarketData {
    /// Prepares every session of `ds` (in parallel), each with the
    /// sessions of its symbol before it as the look-back.
    pub fn new(ds: &Dataset, cfg: &DataConfig) -> Self {
        use rayon::prelude::*;
        let symbols = ds.symbols();
        let views: Vec<Arc<SessionView>> = symbols
            .par_iter()
            .flat_map_iter(|sym| symbol_views(ds.symbol_sessions(sym), cfg))
            .collect();
        Self::of_views(views)
    }

    /// [`MarketData::new`] from a dataset no longer needed: each symbol's
    /// bars are freed as soon as its views are built, so the peak is the
    /// views' memory, not the bars' and the views' together (at the scale
    /// fixture's 49 M bars, 2 GB less; docs/data.md, "Scale"). The same
    /// views, in the same order.
    pub fn from_dataset(ds: Dataset, cfg: &DataConfig) -> Self {
        use rayon::prelude::*;
        let mut groups: Vec<Vec<Session>> = Vec::new();
        for s in ds.sessions {
            match groups.last_mut() {
                Some(g) if g[0].symbol == s.symbol => g.push(s),
                _ => groups.push(vec![s]),
            }
        }
        let views: Vec<Arc<SessionView>> = groups
            .into_par_iter()
            .flat_map_iter(|ss| symbol_views(&ss, cfg))
            .collect();
        Self::of_views(views)
    }

    fn of_views(views: Vec<Arc<SessionView>>) -> Self {
        let index = views
            .iter()
            .enumerate()
            .map(|(i, v)| ((v.symbol.clone(), v.date), i))
            .collect();
        MarketData { views, index }
    }

    /// Keeps the dynamic market's fitted noise rates in `dir` (created
    /// when first written) and reads them back from there: a run on data
    /// an earlier run has simulated skips the pilot day each new session
    /// costs, with the same numbers.
    pub fn with_fit_cache(mut self, dir: &std::path::Path) -> Self {
        let dir: Arc<std::path::Path> = Arc::from(dir);
        for v in &mut self.views {
            Arc::make_mut(v).fit_dir = Some(dir.clone());
        }
        self
    }

    /// Gives the sessions of `flows` (by symbol and date) their real order
    /// flow, for the dynamic market ([`SessionView::order_flow`]).
    pub fn with_order_flow(
        mut self,
        flows: impl IntoIterator<Item = (Arc<str>, NaiveDate, Arc<OrderFlow>)>,
    ) -> Self {
        for (symbol, date, flow) in flows {
            if let Some(&i) = self.index.get(&(symbol, date)) {
                Arc::make_mut(&mut self.views[i]).order_flow = Some(flow);
            }
        }
        self
    }

    /// The session of `symbol` on `date`, if the data has it.
    pub fn get(&self, symbol: &str, date: NaiveDate) -> Option<&Arc<SessionView>> {
        self.index
            .get(&(Arc::from(symbol), date))
            .map(|&i| &self.views[i])
    }

    /// Whether its sessions carry a planted forecast (`serl data
    /// plant`): designs may then read it as `signal`.
    pub fn has_signal(&self) -> bool {
        self.views.iter().any(|v| v.signal.is_some())
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.views.len()
    }

    /// Whether there are no sessions.
    pub fn is_empty(&self) -> bool {
        self.views.is_empty()
    }
}

/// One symbol's views, each session with the ones before it as its
/// look-back (`ss`: the symbol's sessions in date order).
fn symbol_views(ss: &[Session], cfg: &DataConfig) -> Vec<Arc<SessionView>> {
    (0..ss.len())
        .map(|i| Arc::new(SessionView::build(ss, i, cfg)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built from the dataset it consumes, the market holds the same
    /// views, in the same order, as built from a borrowed one (debug
    /// prints compare every field, look-back statistics included).
    #[test]
    fn views_from_a_consumed_dataset_equal_those_from_a_borrowed_one() {
        let cfg = DataConfig::default();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/lean");
        let ds = serl_data::load(&path, &cfg).unwrap();
        let borrowed = MarketData::new(&ds, &cfg);
        let consumed = MarketData::from_dataset(ds, &cfg);
        assert!(borrowed.len() > 5);
        assert_eq!(borrowed.len(), consumed.len());
        for (a, b) in borrowed.views.iter().zip(&consumed.views) {
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
        }
        assert_eq!(borrowed.index, consumed.index);
    }
}
