//! Building a simulator: the day's fundamental, arrival rates and sizes
//! derived from the calibration, the population, and the opening wake-ups.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::LogNormal;
use serl_lob::{LobsterRecorder, OrderBook, SelfTradePolicy, Ticks};

use super::agents::population;
use super::queue_flow::{QrDay, QrRun};
use super::{
    AgentKind, Calibration, MarketConfig, MinuteStats, NoiseSplit, Recording, Scenario, Simulator,
    US_PER_MIN,
};

/// A calibration's value for minute `m`, or `default` past its end.
fn at(v: &[f64], m: usize, default: f64) -> f64 {
    v.get(m).copied().unwrap_or(default)
}

/// The fundamental per minute, ticks: the real path filled in by the path
/// model between anchors, with the scenario's volatility, drift and jumps.
fn fundamental(cal: &Calibration, cfg: &MarketConfig, seed: u64, real: &[f64]) -> Vec<f64> {
    let minutes = real.len();
    let sc = &cfg.scenario;
    let p0 = real[0];
    // The path has its own random stream so that changing an agent
    // population does not change the day's fundamental.
    let mut path_rng = SmallRng::seed_from_u64(seed ^ 0x005e_ed0f_fa7e_u64);
    let path = cfg.path.log_path(real, &mut path_rng);
    (0..minutes)
        .map(|m| {
            let dev = (path[m] - p0.ln()) * sc.volatility_mult + sc.shift_bps(m, minutes) / 1e4;
            p0 * dev.exp() / cal.tick
        })
        .collect()
}

/// The fundamental's moves off the straight line within each minute, one
/// per second, ticks: a Brownian bridge from 0 to 0 over the minute whose
/// variance is `scale`² times the day's mean squared minute move (what a
/// random walk known only at the minutes does between them). Empty at
/// scale 0. Its own random stream, so that the agents draw as before.
fn bridge(fundamental: &[f64], scale: f64, seed: u64) -> Vec<f64> {
    if scale <= 0.0 || fundamental.len() < 2 {
        return Vec::new();
    }
    let moves = fundamental.windows(2).map(|w| (w[1] - w[0]).powi(2));
    let minute_var = moves.sum::<f64>() / (fundamental.len() - 1) as f64;
    let step = rand_distr::Normal::new(0.0, scale * (minute_var / 60.0).sqrt())
        .expect("a finite standard deviation");
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x00b1_d9e5_u64);
    let mut out = Vec::with_capacity(fundamental.len() * 60);
    let mut walk = [0.0; 61];
    for _ in 0..fundamental.len() {
        for k in 1..=60 {
            walk[k] = walk[k - 1] + rand_distr::Distribution::sample(&step, &mut rng);
        }
        let end = walk[60];
        out.extend((0..60).map(|k| walk[k] - end * k as f64 / 60.0));
    }
    out
}

/// When each minute's move happens, as a share of the minute: a whole
/// second drawn uniformly, from a stream of its own (`fundamental_steps`;
/// empty when off).
fn steps(minutes: usize, on: bool, seed: u64) -> Vec<f64> {
    if !on {
        return Vec::new();
    }
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x57e9_5a7e_u64);
    (0..minutes)
        .map(|_| f64::from(rng.random_range(0..60u8)) / 60.0)
        .collect()
}

/// The noise arrival rate per minute, per noise trader, per microsecond.
///
/// Noise market orders are sized to the real volume; the other takers'
/// trades are largely offset by what the noise traders' limit orders no
/// longer meet (measured: the day's volume lands within about 15% of the
/// real one).
fn noise_rates(
    cal: &Calibration,
    cfg: &MarketConfig,
    minutes: usize,
    n_noise: usize,
    mean_size: f64,
    split: &NoiseSplit,
) -> Vec<f64> {
    let sc = &cfg.scenario;
    (0..minutes)
        .map(|m| {
            let v =
                at(&cal.minute_volume, m, 0.0) * sc.liquidity_mult * at(&cal.noise_scale, m, 1.0);
            let orders_per_min = v / mean_size / cfg.market_order_share.max(1e-3);
            orders_per_min * split.rate_mult / n_noise as f64 / US_PER_MIN as f64
        })
        .collect()
}

/// A market maker's size at the touch per minute, shares: a share of the
/// minute's volume, never below the median order.
fn mm_sizes(cal: &Calibration, cfg: &MarketConfig, minutes: usize, median: f64) -> Vec<f64> {
    (0..minutes)
        .map(|m| {
            (at(&cal.minute_volume, m, 0.0) * cfg.mm_depth_share * cfg.scenario.liquidity_mult)
                .max(median)
        })
        .collect()
}

/// The real day's volatility: the root of its summed squared minute log
/// returns.
fn day_volatility(real: &[f64]) -> f64 {
    real.windows(2)
        .map(|w| (w[1] / w[0]).ln().powi(2))
        .sum::<f64>()
        .sqrt()
}

/// Each minute's volume over the day's mean minute volume, bounded to
/// [0.05, 20].
fn activity(cal: &Calibration, sc: &Scenario, minutes: usize, daily_volume: f64) -> Vec<f64> {
    (0..minutes)
        .map(|m| {
            let v = at(&cal.minute_volume, m, 0.0);
            (v * sc.liquidity_mult.max(1e-9) * minutes as f64 / daily_volume.max(1.0))
                .clamp(0.05, 20.0)
        })
        .collect()
}

impl MinuteStats {
    /// All zeros for a day of `minutes` minutes.
    fn zeroed(minutes: usize) -> Self {
        MinuteStats {
            volume: vec![0.0; minutes],
            mid: vec![0.0; minutes],
            vwap: vec![0.0; minutes],
            spread: vec![0.0; minutes],
            depth: [0.0; 5],
        }
    }
}

impl Simulator {
    pub(super) fn build(
        cal: &Calibration,
        cfg: &MarketConfig,
        seed: u64,
        recording: Option<Recording>,
        lobster: Option<(LobsterRecorder, f64)>,
    ) -> Self {
        let minutes = cal.minute_price.len().max(1);
        let sc = &cfg.scenario;
        let p0 = cal.minute_price.first().copied().unwrap_or(100.0);
        let real: Vec<f64> = (0..minutes).map(|m| at(&cal.minute_price, m, p0)).collect();
        let n_noise = cfg.noise_agents.max(1);
        let median = cfg.order_size.max(1.0);
        let (sizes, mean_size) = if cfg.size_quantiles.is_empty() {
            let d = LogNormal::new(median.ln(), 0.8).expect("valid lognormal");
            (
                super::SizeDraw::LogNormal(d),
                median * (0.8f64 * 0.8 / 2.0).exp(),
            )
        } else {
            let q: Box<[u64]> = cfg.size_quantiles.iter().map(|&s| s.max(1)).collect();
            let mean = q.iter().sum::<u64>() as f64 / q.len() as f64;
            (super::SizeDraw::Quantiles(q), mean)
        };
        let spread_ticks = (p0 * cal.spread_bps / 1e4 / cal.tick).max(1.0);
        let split = NoiseSplit::new(cfg);
        let acting = split.acting(n_noise);
        let daily_volume: f64 = cal.minute_volume.iter().sum::<f64>() * sc.liquidity_mult.max(1e-9);
        let fundamental = fundamental(cal, cfg, seed, &real);
        let mut sim = Simulator {
            bridge: bridge(&fundamental, cfg.fundamental_bridge, seed),
            steps: steps(fundamental.len(), cfg.fundamental_steps, seed),
            book: OrderBook::with_capacity(SelfTradePolicy::Allow, 1 << 14),
            agents: population(cfg, n_noise),
            queue: Default::default(),
            noise_clock: None,
            seq: 0,
            now: 0,
            minute_now: 0,
            minute_span: super::minute_span(0, minutes),
            rng: SmallRng::seed_from_u64(seed),
            cfg: cfg.clone(),
            tick: cal.tick,
            fundamental,
            noise_rate: noise_rates(cal, cfg, minutes, acting, mean_size, &split),
            noise_split: split,
            n_noise: acting as u32,
            mm_size: mm_sizes(cal, cfg, minutes, median),
            spread_ticks,
            grid: (spread_ticks / 4.0).floor().max(1.0) as i64,
            maker_depths: maker_depths(&cfg.depth_quantiles, cfg.mm_levels),
            flow: 0.0,
            flow_at: 0,
            shift_cache: std::cell::Cell::new(super::NO_SHIFT),
            flow_scale: cfg.flow_impact * day_volatility(&real) * p0 / cal.tick,
            daily_volume: daily_volume.max(1.0),
            minute_volume: (0..minutes)
                .map(|m| at(&cal.minute_volume, m, 0.0) * sc.liquidity_mult)
                .collect(),
            activity: activity(cal, sc, minutes, daily_volume),
            next_id: 1,
            sizes,
            stats: MinuteStats::zeroed(minutes),
            pv: 0.0,
            minutes,
            events: 0,
            recording,
            lobster_open: lobster
                .as_ref()
                .map_or(crate::LOBSTER_OPEN_SECONDS, |l| l.1),
            lobster: lobster.map(|l| Box::new(l.0)),
            queue_reactive: None,
        };
        if let Some(model) = &cfg.queue_reactive {
            let per_second = daily_volume / (minutes as f64 * 60.0);
            let day = QrDay {
                activity: &sim.activity,
                volume: per_second,
                spread: spread_ticks,
            };
            sim.queue_reactive = Some(QrRun::new(model.clone(), day, &cal.noise_scale));
            sim.open_queue_reactive(0);
        }
        sim.open();
        sim
    }

    /// Schedules every clock's first wake-up and lets the market makers
    /// quote, so that the book opens two-sided.
    fn open(&mut self) {
        // The noise traders arrive as one Poisson stream (the sum of theirs),
        // carried by the first of them, each arrival then acting for one of
        // them at random: the same process, with one clock in the queue
        // instead of hundreds that mostly wake only to redraw.
        for a in 0..self.agents.len() as u32 {
            if self.agents[a as usize].kind == AgentKind::Noise && a != 0 {
                continue;
            }
            let t = self.first_wake(a);
            self.schedule(t, a);
        }
        let mms: Vec<u32> = (0..self.agents.len() as u32)
            .filter(|&a| self.agents[a as usize].kind == AgentKind::MarketMaker)
            .collect();
        for a in mms {
            self.wake(a);
        }
    }
}

/// A market maker's levels from a real day's depth profile (the ticks
/// behind their side's best price at which new limit orders arrive, at
/// evenly spaced quantiles): level k at the profile's (k + ½)/levels
/// quantile of the depths at or behind the touch, each at least a tick
/// behind the one before (the first at the touch), and the deep level a
/// tick behind the deepest the profile reaches. `None` without a profile,
/// or with one that shows nothing behind the touch (a level-1 file's).
fn maker_depths(quantiles: &[i64], levels: usize) -> Option<(Box<[Ticks]>, Ticks)> {
    let behind: Vec<i64> = quantiles.iter().copied().filter(|&d| d >= 0).collect();
    if behind.iter().all(|&d| d == 0) || levels == 0 {
        return None;
    }
    let mut steps: Vec<Ticks> = Vec::with_capacity(levels);
    for k in 0..levels {
        let at = ((k as f64 + 0.5) / levels as f64 * behind.len() as f64) as usize;
        let q = behind[at.min(behind.len() - 1)];
        let step = match steps.last() {
            None => 0,
            Some(&prev) => q.max(prev + 1),
        };
        steps.push(step);
    }
    let deepest = behind.iter().copied().max().unwrap_or(0);
    let deep = (deepest + 1).max(steps[levels - 1] + 1);
    Some((steps.into_boxed_slice(), deep))
}

#[cfg(test)]
mod tests {
    use super::maker_depths;

    #[test]
    fn a_makers_levels_follow_the_days_depth_profile() {
        // Orders inside the spread (−1) are no level of a maker's ladder;
        // the rest crowd the touch and thin out behind it.
        let profile = [-1, 0, 0, 0, 0, 1, 1, 2, 3, 10];
        let (steps, deep) = maker_depths(&profile, 5).unwrap();
        // The touch, then the quantiles 0, 1, 2, 10, each at least a
        // tick behind the last; the deep level a tick past the deepest.
        assert_eq!(&*steps, &[0, 1, 2, 3, 10]);
        assert_eq!(deep, 11);
        assert!(maker_depths(&[], 5).is_none());
        assert!(maker_depths(&[-2, -1], 5).is_none());
        // A level-1 file shows orders at the touch or inside only.
        assert!(maker_depths(&[-1, 0, 0, 0], 5).is_none());
    }
}
