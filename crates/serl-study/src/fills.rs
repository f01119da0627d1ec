//! The passive-fill study (`serl simulate fills`): the same resting child
//! orders (both sides, at the touch and a tick behind, several sizes,
//! posted through the day) in the real queue of a LOBSTER day, in the
//! static replay's bar rule on the same day's minute bars, and in the
//! dynamic venue's market calibrated to the day two ways: with its order
//! flow (sizes, cancels, limit-order depths for noise orders and makers'
//! levels, gaps between makers' messages; as `serl backtest --lobster`
//! calibrates it) and from its minute bars alone (as on bar data, the
//! training venue). Each venue's fill
//! probability within 1, 5 and 30 minutes, time to fill and adverse
//! move after a fill are set beside the real queue's.
//!
//! In the real queue and the bar rule the probes do not touch the book,
//! so every one is played on the one day. In a simulated market a probe
//! moves the book, so each simulated day rests one probe at a time: probes
//! [`WINDOW_MINUTES`] apart, the rest of the schedule on other days of
//! the same seed.

use std::path::PathBuf;

use rayon::prelude::*;
use serde::Serialize;
use serl_env::{probe_bars, probe_market, FillModel, LobsterDay, Probe, ProbeFill, SessionView};
use serl_lob::{read_days, sample_files, LobsterDayFiles};
use serl_market::{Calibration, MarketConfig, QueueReactive, Simulator};

use crate::config::{read_toml, SimulateFile};
use crate::error::{Context, Result, StudyError};
use crate::realism::minute_seconds;
pub use crate::realism::Progress;

/// Levels probed: at the touch and a tick behind it.
pub const LEVELS: [(u16, &str); 2] = [(0, "touch"), (1, "touch+1")];
/// How long a probe rests, seconds.
pub const HORIZON_SECONDS: f64 = 1_800.0;
/// A simulated day's probes are this many minutes apart: the horizon and
/// the five minutes after a fill that the adverse move reads.
pub const WINDOW_MINUTES: usize = 35;
/// The fill probabilities reported: within 1, 5 and 30 minutes.
pub const WITHIN_SECONDS: [f64; 3] = [60.0, 300.0, 1_800.0];
/// The (level, horizon) pairs the fill aim is judged on: both levels at
/// 1, 5 and 30 minutes.
pub const AIM_PAIRS: usize = LEVELS.len() * WITHIN_SECONDS.len();
/// The adverse aim: the 5-minute adverse move after a fill at the touch
/// within this factor of the LOBSTER queue's, either way.
pub const ADVERSE_AIM_FACTOR: f64 = 2.0;

/// The venues, the reference first.
pub const VENUES: [&str; 5] = [
    "LOBSTER queue",
    "dynamic market (day's order flow)",
    "dynamic market (bars only)",
    "bar rule",
    "queue-reactive flow (day's messages)",
];

/// What the fill study is asked.
pub struct FillsRequest {
    /// A LOBSTER sample zip, or a directory of them.
    pub lobster: PathBuf,
    /// Only these symbols of the directory.
    pub symbols: Vec<String>,
    /// Simulated days per probe in each market (at least 1).
    pub seeds: u64,
    /// The first seed.
    pub seed: u64,
    /// Minutes between probe times (from 09:35 to 15:25).
    pub every_minutes: usize,
    /// Probe sizes, shares.
    pub sizes: Vec<u64>,
    /// A TOML with [data] and [market] tables (see configs/market.toml).
    pub config: Option<PathBuf>,
    /// The directory the reports are written to.
    pub out: PathBuf,
}

/// One probe's outcome in one venue.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeRecord {
    /// The venue ([`VENUES`]).
    pub venue: &'static str,
    /// The simulated day's seed (`None` for the real day).
    pub seed: Option<u64>,
    /// The probe.
    pub probe: Probe,
    /// What it filled; `None` when the venue had no two-sided book then.
    pub fill: Option<ProbeFill>,
}

/// The probe schedule: every combination of side, level and size at each
/// time, ordered time-major within a combination.
fn schedule(a: &FillsRequest) -> Vec<Vec<Probe>> {
    let (first, last) = (5, 355);
    let every = a.every_minutes.max(1);
    let times: Vec<f64> = (first..=last).step_by(every).map(minute_seconds).collect();
    let mut combos = Vec::new();
    for buy in [true, false] {
        for (ticks_behind, _) in LEVELS {
            for &size in &a.sizes {
                let at = |post| Probe {
                    buy,
                    ticks_behind,
                    size,
                    post,
                    horizon: HORIZON_SECONDS,
                };
                combos.push(times.iter().map(|&t| at(t)).collect());
            }
        }
    }
    combos
}

/// A combination's probes split into simulated days, each day's
/// [`WINDOW_MINUTES`] apart.
fn days_of(probes: &[Probe], every: usize) -> Vec<Vec<Probe>> {
    let phases = WINDOW_MINUTES.div_ceil(every.max(1));
    (0..phases)
        .map(|p| probes.iter().skip(p).step_by(phases).copied().collect())
        .filter(|d: &Vec<Probe>| !d.is_empty())
        .collect()
}

/// A calibrated market and where its day starts (seconds after midnight).
struct Market {
    venue: &'static str,
    cal: Calibration,
    cfg: MarketConfig,
    open: f64,
}

/// The dynamic venue's market on `day`, calibrated as a backtest on
/// LOBSTER days calibrates it (with the day's order flow) and as it is
/// on bar data (its minute bars alone), the data and market settings from
/// `config`.
fn markets(
    day: &LobsterDay,
    config: &SimulateFile,
    queue_reactive: QueueReactive,
) -> Result<Vec<Market>> {
    let bars = SessionView::build(std::slice::from_ref(day.session()), 0, &config.data);
    let mut flow = bars.clone();
    flow.order_flow = Some(day.order_flow().cloned().with_context(|| {
        format!(
            "{} {}: no order submissions to calibrate the dynamic market's order flow from",
            day.symbol(),
            day.date()
        )
    })?);
    let reactive = MarketConfig {
        queue_reactive: Some(Box::new(queue_reactive)),
        ..config.market.clone()
    };
    let abm = &config.market;
    Ok([
        (VENUES[1], flow, abm),
        (VENUES[2], bars.clone(), abm),
        (VENUES[4], bars, &reactive),
    ]
    .into_iter()
    .map(|(venue, view, market)| {
        let (cal, cfg) = serl_env::calibrate(&view, market);
        Market {
            venue,
            cal,
            cfg,
            open: f64::from(view.open_minute) * 60.0,
        }
    })
    .collect())
}

/// The probes of one symbol-day in every venue.
fn probe_day(
    a: &FillsRequest,
    real: LobsterDayFiles,
    config: &SimulateFile,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Vec<ProbeRecord>> {
    let source = real.file.display().to_string();
    let queue_reactive = QueueReactive::fit(&real.messages, &real.rows, 100, &source)
        .with_context(|| {
            format!("{source}: too little order flow to fit the queue-reactive flow")
        })?;
    let day = crate::data::lobster_day(real)?;
    let markets = markets(&day, config, queue_reactive)?;
    let combos = schedule(a);
    let mut out = replay(&day, &combos);
    progress(Progress::Done);
    let jobs: Vec<(&Market, u64, Vec<Probe>)> = markets
        .iter()
        .flat_map(|m| (0..a.seeds.max(1)).map(move |k| (m, a.seed + k)))
        .flat_map(|(m, seed)| {
            combos
                .iter()
                .flat_map(|c| days_of(c, a.every_minutes))
                .map(move |d| (m, seed, d))
        })
        .collect();
    let simulated: Vec<Vec<ProbeRecord>> = jobs
        .into_par_iter()
        .map(|(m, seed, probes)| {
            let mut sim = Simulator::new(&m.cal, &m.cfg, seed);
            let records = probes
                .iter()
                .map(|p| ProbeRecord {
                    venue: m.venue,
                    seed: Some(seed),
                    probe: *p,
                    fill: probe_market(&mut sim, m.open, p),
                })
                .collect();
            progress(Progress::Done);
            records
        })
        .collect();
    out.extend(simulated.into_iter().flatten());
    Ok(out)
}

/// Every probe in the real queue and, at the same price, in the bar rule.
fn replay(day: &LobsterDay, combos: &[Vec<Probe>]) -> Vec<ProbeRecord> {
    let model = FillModel::default();
    let mut out = Vec::new();
    for p in combos.iter().flatten() {
        let real = day.probe(p);
        let bars = real.map(|r| probe_bars(day.session(), &model, p, (r.price, r.mid)));
        for (venue, fill) in [(VENUES[0], real), (VENUES[3], bars)] {
            out.push(ProbeRecord {
                venue,
                seed: None,
                probe: *p,
                fill,
            });
        }
    }
    out
}

/// Days to play for one symbol: the replay, then each market's (one per
/// seed, side, level, size and phase of the schedule).
fn days_per_symbol(a: &FillsRequest) -> u64 {
    let per_combo = WINDOW_MINUTES.div_ceil(a.every_minutes.max(1)) as u64;
    let combos = (2 * LEVELS.len() * a.sizes.len()) as u64;
    1 + 3 * a.seeds.max(1) * per_combo * combos
}

/// One symbol's probes.
pub struct SymbolFills {
    /// The symbol.
    pub symbol: String,
    /// The real day's file.
    pub file: PathBuf,
    /// Every probe in every venue.
    pub records: Vec<ProbeRecord>,
}

/// Plays every probe of the study on every symbol of `a.lobster`
/// (`fills_report.rs` writes the files). `progress` hears the
/// days to play in all, then each one done with the symbol at hand.
pub fn probe_all(
    a: &FillsRequest,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Vec<SymbolFills>> {
    if a.sizes.is_empty() || a.sizes.contains(&0) {
        return Err(StudyError::msg(
            "--sizes: give one or more probe sizes of at least one share",
        ));
    }
    let config: SimulateFile = match &a.config {
        Some(p) => read_toml(p)?,
        None => SimulateFile::default(),
    };
    let files = sample_files(&a.lobster, &a.symbols)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    progress(Progress::Days(files.len() as u64 * days_per_symbol(a)));
    let mut all = Vec::new();
    for (symbol, file, real) in read_days(files) {
        progress(Progress::Symbol(&symbol));
        let real = real.with_context(|| format!("reading {}", file.display()))?;
        if let Some(w) = real.warning() {
            progress(Progress::Warning(&w));
        }
        let records = probe_day(a, real, &config, progress)?;
        all.push(SymbolFills {
            symbol,
            file,
            records,
        });
    }
    Ok(all)
}

/// A venue's fills of one set of probes, summed up.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FillSummary {
    /// Probes played (a two-sided book when posted).
    pub probes: usize,
    /// The share of them filled in full within each of [`WITHIN_SECONDS`].
    pub filled_within: [f64; 3],
    /// The median seconds to a full fill, of those filled in the horizon.
    pub median_seconds: Option<f64>,
    /// The mean adverse move 1 and 5 minutes after a full fill, bps.
    pub adverse_bps: [Option<f64>; 2],
}

impl FillSummary {
    /// Sums up `fills`.
    pub fn of<'a>(fills: impl IntoIterator<Item = &'a ProbeFill>) -> Self {
        let fills: Vec<&ProbeFill> = fills.into_iter().collect();
        let n = fills.len();
        let share = |s: f64| Self::curve(&fills, s);
        let mut times: Vec<f64> = fills.iter().filter_map(|f| f.full_fill).collect();
        times.sort_by(f64::total_cmp);
        let median = (!times.is_empty()).then(|| {
            let m = times.len() / 2;
            if times.len() % 2 == 1 {
                times[m]
            } else {
                (times[m - 1] + times[m]) / 2.0
            }
        });
        let mean = |k: usize| {
            let v: Vec<f64> = fills.iter().filter_map(|f| f.adverse_bps[k]).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        FillSummary {
            probes: n,
            filled_within: WITHIN_SECONDS.map(share),
            median_seconds: median,
            adverse_bps: [mean(0), mean(1)],
        }
    }

    /// The share of `fills` filled in full within `seconds`; `NaN` for
    /// none.
    pub fn curve(fills: &[&ProbeFill], seconds: f64) -> f64 {
        let k = fills
            .iter()
            .filter(|f| f.full_fill.is_some_and(|t| t <= seconds))
            .count();
        if fills.is_empty() {
            f64::NAN
        } else {
            k as f64 / fills.len() as f64
        }
    }
}

impl SymbolFills {
    /// The fills of `venue`'s probes that pass `keep`.
    pub fn fills(&self, venue: &str, keep: impl Fn(&Probe) -> bool) -> Vec<&ProbeFill> {
        self.records
            .iter()
            .filter(|r| r.venue == venue && keep(&r.probe))
            .filter_map(|r| r.fill.as_ref())
            .collect()
    }

    /// `venue`'s summary over the probes `ticks_behind` the touch.
    pub fn summary(&self, venue: &str, ticks_behind: u16) -> FillSummary {
        FillSummary::of(self.fills(venue, |p| p.ticks_behind == ticks_behind))
    }

    /// The (level, horizon) pairs, of [`AIM_PAIRS`], on which `venue`'s
    /// fill probability is within 5 percentage points of the LOBSTER
    /// queue's: the fill half of the study's aim.
    pub fn within_aim(&self, venue: &str) -> usize {
        LEVELS
            .iter()
            .map(|&(ticks, _)| {
                let (r, v) = (self.summary(VENUES[0], ticks), self.summary(venue, ticks));
                (0..WITHIN_SECONDS.len())
                    .filter(|&k| (v.filled_within[k] - r.filled_within[k]).abs() <= 0.05)
                    .count()
            })
            .sum()
    }

    /// `venue`'s adverse move 5 minutes after a fill at the touch over
    /// the LOBSTER queue's (`None` where either has no fill, or the
    /// queue's is not a move against the order).
    pub fn adverse_ratio(&self, venue: &str) -> Option<f64> {
        let real = self.summary(VENUES[0], 0).adverse_bps[1].filter(|&r| r > 0.0)?;
        Some(self.summary(venue, 0).adverse_bps[1]? / real)
    }

    /// Whether `venue`'s adverse move is within [`ADVERSE_AIM_FACTOR`] of
    /// the queue's, either way: the adverse half of the study's aim.
    pub fn adverse_within_aim(&self, venue: &str) -> bool {
        self.adverse_ratio(venue).is_some_and(ratio_within_aim)
    }

    /// The study's lines for the symbol: at the touch, the share filled
    /// within 5 and 30 minutes at the LOBSTER queue and in each simulated
    /// venue, and how many (level, horizon) pairs of each are within the
    /// aim; then the adverse move after a fill in each, and whether it is
    /// within the aim.
    pub fn summary_lines(&self) -> [String; 2] {
        // The simulated venues, as the lines name them.
        let simulated = [
            (VENUES[1], "dynamic market with the day's order flow"),
            (VENUES[2], "from bars only (the training venue)"),
            (VENUES[4], "queue-reactive flow"),
        ];
        let pct = |f: &FillSummary| {
            let [_, five, thirty] = f.filled_within.map(|p| 100.0 * p);
            format!("{five:.0}% / {thirty:.0}%")
        };
        let real = self.summary(VENUES[0], 0);
        let bps = |b: Option<f64>| b.map_or("-".into(), |b| format!("{b:.2} bps"));
        let (mut shares, mut pairs, mut moves) = (Vec::new(), Vec::new(), Vec::new());
        for (venue, name) in simulated {
            let at_touch = self.summary(venue, 0);
            shares.push(format!("{name} {}", pct(&at_touch)));
            pairs.push(self.within_aim(venue).to_string());
            let ratio = match self.adverse_ratio(venue) {
                Some(x) if ratio_within_aim(x) => format!("{x:.1}x, within the aim"),
                Some(x) => format!("{x:.1}x"),
                None => "-".into(),
            };
            moves.push(format!("{name} {} ({ratio})", bps(at_touch.adverse_bps[1])));
        }
        let fills = format!(
            "{}: at the touch, filled within 5 / 30 minutes: LOBSTER queue {}, {}; within 5 points of the queue at 1, 5 and 30 minutes on {} of {AIM_PAIRS} (level, horizon) pairs",
            self.symbol,
            pct(&real),
            shares.join(", "),
            pairs.join(", ")
        );
        let adverse = format!(
            "{}: the mid's move against a filled order at the touch 5 minutes on: LOBSTER queue {}, {}; the aim: within {ADVERSE_AIM_FACTOR}x of the queue's",
            self.symbol,
            bps(real.adverse_bps[1]),
            moves.join(", ")
        );
        [fills, adverse]
    }
}

/// Whether an adverse move `ratio` times the queue's is within
/// [`ADVERSE_AIM_FACTOR`] of it, either way.
fn ratio_within_aim(ratio: f64) -> bool {
    (1.0 / ADVERSE_AIM_FACTOR..=ADVERSE_AIM_FACTOR).contains(&ratio)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A probe at `ticks_behind` the touch in `venue`, filled in full
    /// after `seconds` (`None`: not at all), the mid moving `adverse` bps
    /// against it 5 minutes on.
    fn record(
        venue: &'static str,
        ticks_behind: u16,
        seconds: Option<f64>,
        adverse: f64,
    ) -> ProbeRecord {
        let probe = Probe {
            buy: true,
            ticks_behind,
            size: 100,
            post: 36_000.0,
            horizon: HORIZON_SECONDS,
        };
        let fill = ProbeFill {
            price: 99.99,
            mid: 100.0,
            first_fill: seconds,
            full_fill: seconds,
            filled: if seconds.is_some() { 100.0 } else { 0.0 },
            adverse_bps: [None, seconds.map(|_| adverse)],
        };
        ProbeRecord {
            venue,
            seed: None,
            probe,
            fill: Some(fill),
        }
    }

    /// Ten probes a level: `filled` of them within 30 s, the rest never,
    /// each fill followed by `adverse` bps.
    fn venue(venue: &'static str, filled: usize, adverse: f64) -> Vec<ProbeRecord> {
        let at = |i: usize| (i < filled).then_some(30.0);
        (0..2)
            .flat_map(|level| (0..10).map(move |i| record(venue, level, at(i), adverse)))
            .collect()
    }

    #[test]
    fn the_verdict_counts_fills_within_5_points_and_adverse_moves_within_2x() {
        let mut records = venue(VENUES[0], 5, 0.5);
        records.extend(venue(VENUES[1], 5, 0.9)); // the same fills, 1.8x the move
        records.extend(venue(VENUES[4], 6, -0.5)); // 10 points more, a reversal
        let s = SymbolFills {
            symbol: "TEST".into(),
            file: PathBuf::new(),
            records,
        };
        assert_eq!(s.within_aim(VENUES[1]), AIM_PAIRS);
        assert_eq!(s.within_aim(VENUES[4]), 0);
        assert!((s.adverse_ratio(VENUES[1]).unwrap() - 1.8).abs() < 1e-9);
        assert!(s.adverse_within_aim(VENUES[1]));
        // A move the other way is no match for adverse selection.
        assert!(!s.adverse_within_aim(VENUES[4]));
        // A venue with no fills has no ratio.
        assert_eq!(s.adverse_ratio(VENUES[2]), None);
        let [fills, adverse] = s.summary_lines();
        // The venues in order: with the day's flow, from bars (no probes
        // here), queue-reactive.
        assert!(
            fills.contains("on 6, 0, 0 of 6 (level, horizon) pairs"),
            "{fills}"
        );
        let moves = "order flow 0.90 bps (1.8x, within the aim), \
                     from bars only (the training venue) - (-), \
                     queue-reactive flow -0.50 bps (-1.0x)";
        assert!(adverse.contains(moves), "{adverse}");
    }
}
