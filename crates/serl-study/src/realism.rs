//! The realism study (`serl simulate realism`): the agent-based market, the
//! queue-reactive flow and a parametric Poisson baseline, all calibrated on the first part of a real LOBSTER
//! symbol-day ([`Split`], [`calibrate`]), scored statistic by statistic
//! against the held-out second part and, in sample, against the first.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::config::{read_toml, SimulateFile};
use crate::error::{Context, Result, StudyError};
use serl_lob::{lobster_name, read_days, sample_files, LobsterDayFiles, LobsterRecorder};
use serl_market::{
    fit_noise_volume, forecast_calibration, lobster_calibration_window, minute_of_session,
    realism_score, row_mid, Calibration, DayFeatures, FitEffort, MarketConfig, OrderFlow,
    ParametricFlow, QueueReactive, RealismRow, Simulator, StatKind, LOBSTER_OPEN_SECONDS,
    RESPONSE_LAGS,
};
use serl_report::Table;

/// One tick of a cent in LOBSTER's units (dollars × 10,000).
const CENT: i64 = 100;
const AGENT_BASED: &str = "agent-based";
const QUEUE_REACTIVE: &str = "queue-reactive";
const PARAMETRIC: &str = "parametric";
/// The models scored, the baseline last.
pub const MODELS: [&str; 3] = [AGENT_BASED, QUEUE_REACTIVE, PARAMETRIC];
const HELD_OUT: &str = "held out";
const IN_SAMPLE: &str = "in sample";

/// What the realism study is asked.
pub struct RealismRequest {
    /// A LOBSTER sample zip, or a directory of them (the deepest file of
    /// each symbol is used).
    pub lobster: PathBuf,
    /// Only these symbols of the directory.
    pub symbols: Vec<String>,
    /// Simulated days per model and symbol.
    pub seeds: u64,
    /// The first seed.
    pub seed: u64,
    /// A TOML with a [market] table (see configs/market.toml).
    pub config: Option<PathBuf>,
    /// Also write each model's first simulated day as LOBSTER message and
    /// order-book files under OUT/lobster/.
    pub export: bool,
    /// The directory the reports are written to.
    pub out: PathBuf,
}

/// Where a day is cut: the first part calibrates both models, the second
/// is held out. The middle of the minutes the day's messages span (12:45
/// on a whole session).
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// The calibration part's minutes of the session (0: 09:30).
    pub seen: Range<usize>,
    /// The held-out part's minutes.
    pub held_out: Range<usize>,
}

impl Split {
    /// The split of the minutes `day`'s messages span; `None` with fewer
    /// than two minutes.
    pub fn of(day: &LobsterDayFiles) -> Option<Split> {
        let (first, last) = (day.messages.first()?, day.messages.last()?);
        let (a, b) = (
            minute_of_session(first.time),
            minute_of_session(last.time) + 1,
        );
        let mid = (a + b) / 2;
        (mid > a && b > mid).then_some(Split {
            seen: a..mid,
            held_out: mid..b,
        })
    }

    /// The cut, seconds after midnight.
    pub fn seconds(&self) -> f64 {
        minute_seconds(self.held_out.start)
    }
}

/// The start of `minute` of the session, seconds after midnight.
pub fn minute_seconds(minute: usize) -> f64 {
    LOBSTER_OPEN_SECONDS + 60.0 * minute as f64
}

/// `HH:MM` of a minute of the session.
pub fn clock(minute: usize) -> String {
    let m = 9 * 60 + 30 + minute;
    format!("{:02}:{:02}", m / 60, m % 60)
}

/// Both models, calibrated to the first part of a day alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibrated {
    /// The agent-based market over the first part: its minute mids,
    /// executed volume and spread, as in `serl simulate --lobster`.
    pub seen: Calibration,
    /// The agent-based market's noise rates over the held-out part, fitted
    /// to its forecast from the first part ([`forecast_calibration`]; each
    /// simulated day draws its own price path, these rates shared).
    pub forecast_noise: Vec<f64>,
    /// The population, with the first part's order size and cancel rate.
    pub market: MarketConfig,
    /// The parametric baseline fitted to the first part.
    pub flow: ParametricFlow,
    /// The queue-reactive flow fitted to the first part.
    pub queue_reactive: QueueReactive,
    /// The first part's last book row: where the baseline's held-out part
    /// starts.
    pub last_row: Vec<i64>,
}

/// Calibrates both models on `seen` (the day's first part, taken whole:
/// nothing of the held-out part is passed in): the agent-based market
/// ([`agent_market`]), its forecast of the held-out part (its path drawn
/// with `seed`), and the baseline.
pub fn calibrate(
    seen: &LobsterDayFiles,
    split: &Split,
    base: &MarketConfig,
    seed: u64,
) -> Result<Calibrated> {
    let features = DayFeatures::measure(&seen.messages, &seen.rows, CENT);
    let (cal, market) = agent_market(seen, &features, split.seen.clone(), base)?;
    let forecast = forecast_calibration(&cal, split.held_out.len(), seed);
    let forecast_noise = fit_noise_volume(&forecast, &market, 0, FitEffort::Full);
    let flow =
        ParametricFlow::fit(&features, &seen.messages, &seen.rows, CENT).with_context(|| {
            format!(
                "{}: too little order flow before {} to fit the parametric baseline",
                seen.file.display(),
                clock(split.held_out.start)
            )
        })?;
    let window = format!(
        "{} before {}",
        seen.file.display(),
        clock(split.held_out.start)
    );
    let queue_reactive = QueueReactive::fit(&seen.messages, &seen.rows, CENT, &window)
        .with_context(|| {
            format!("{window}: too little order flow to fit the queue-reactive flow")
        })?;
    let last_row = seen.rows.row(seen.rows.len() - 1).to_vec();
    Ok(Calibrated {
        seen: cal,
        forecast_noise,
        market,
        flow,
        queue_reactive,
        last_row,
    })
}

/// The agent-based market calibrated to `part` of a LOBSTER day (its
/// `minutes` of the session, `features` measured on it): the minute mids,
/// executed volume and spread, the order sizes and cancel rate, the depth
/// profile of new limit orders, and the noise rates fitted to its volume.
pub fn agent_market(
    part: &LobsterDayFiles,
    features: &DayFeatures,
    minutes: Range<usize>,
    base: &MarketConfig,
) -> Result<(Calibration, MarketConfig)> {
    let mut cal = lobster_calibration_window(&part.messages, &part.rows, CENT, minutes);
    let mut market = base.clone();
    let flow = OrderFlow::from_features(&part.messages, features)
        .with_context(|| format!("{} has no order submissions", part.file.display()))?;
    let daily: f64 = cal.minute_volume.iter().sum();
    flow.apply(&mut market, daily);
    cal.noise_scale = fit_noise_volume(&cal, &market, 0, FitEffort::Full);
    Ok((cal, market))
}

impl Calibrated {
    /// The agent-based market's simulated first part.
    pub fn agent_seen(&self, split: &Split, seed: u64, levels: usize) -> LobsterRecorder {
        let open = minute_seconds(split.seen.start);
        let sim = Simulator::recording_lobster_from(&self.seen, &self.market, seed, levels, open);
        sim.finish_lobster().1
    }

    /// The agent-based market's simulated held-out part: its own forecast
    /// price path (drawn with `seed`), the fitted noise rates.
    pub fn agent_held_out(&self, split: &Split, seed: u64, levels: usize) -> LobsterRecorder {
        let cal = Calibration {
            noise_scale: self.forecast_noise.clone(),
            ..forecast_calibration(&self.seen, split.held_out.len(), seed)
        };
        let sim =
            Simulator::recording_lobster_from(&cal, &self.market, seed, levels, split.seconds());
        sim.finish_lobster().1
    }

    /// The queue-reactive flow's simulated part `minutes`, from the book
    /// `opening` (a LOBSTER row of the day's depth).
    pub fn queue_reactive_day(
        &self,
        minutes: &Range<usize>,
        opening: &[i64],
        seed: u64,
        levels: usize,
    ) -> LobsterRecorder {
        let (open, end) = (minute_seconds(minutes.start), minute_seconds(minutes.end));
        let mid = row_mid(opening, CENT);
        self.queue_reactive
            .simulate((open, end - open), opening, mid, levels, seed)
    }

    /// The baseline's simulated held-out part, from the first part's last
    /// book to the held-out part's end.
    pub fn parametric_held_out(&self, split: &Split, seed: u64) -> LobsterRecorder {
        let end = minute_seconds(split.held_out.end);
        self.flow
            .continued(split.seconds(), end - split.seconds(), &self.last_row)
            .simulate(seed)
    }
}

fn measured(rec: LobsterRecorder) -> (DayFeatures, usize) {
    let (messages, rows) = rec.into_rows();
    (DayFeatures::measure(&messages, &rows, CENT), messages.len())
}

/// How far the realism study is.
pub enum Progress<'a> {
    /// Days to read or simulate in all.
    Days(u64),
    /// The symbol now at work.
    Symbol(&'a str),
    /// One more day done.
    Done,
    /// What the user should hear about a day read (where its book
    /// crossed), with its file.
    Warning(&'a str),
}

/// Scores the agent-based market and the parametric baseline, both
/// calibrated on each real day's first part, against that part (in
/// sample) and against the day's held-out second part, and writes
/// `realism.json` and the report into `a.out`. `progress` hears the days to
/// simulate in all, then each one done with the symbol at hand.
pub fn realism(a: &RealismRequest, progress: &dyn Fn(Progress)) -> Result<Vec<SymbolReport>> {
    let base: MarketConfig = match &a.config {
        Some(p) => read_toml::<SimulateFile>(p)?.market,
        None => MarketConfig::default(),
    };
    let files = sample_files(&a.lobster, &a.symbols)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let seeds = a.seeds.max(1);
    progress(Progress::Days(files.len() as u64 * (1 + 6 * seeds)));
    let mut reports = Vec::new();
    for (symbol, file, day) in read_days(files) {
        progress(Progress::Symbol(&symbol));
        let day = day.with_context(|| format!("reading {}", file.display()))?;
        if let Some(w) = day.warning() {
            progress(Progress::Warning(&w));
        }
        let split = Split::of(&day)
            .with_context(|| format!("{}: the day spans less than two minutes", file.display()))?;
        let levels = day.rows.levels();
        let (symbol, file) = (day.symbol.clone(), day.file.clone());
        let (seen, held) = day.split_at(split.seconds());
        let models = calibrate(&seen, &split, &base, a.seed)?;
        progress(Progress::Done);
        let parts = vec![
            score_part(a, &models, &split, HELD_OUT, &held, progress)?,
            score_part(a, &models, &split, IN_SAMPLE, &seen, progress)?,
        ];
        reports.push(SymbolReport {
            symbol,
            file,
            levels,
            parts,
        });
    }
    write_reports(a, &reports)?;
    Ok(reports)
}

/// Both models' simulated days of one part (`HELD_OUT` or `IN_SAMPLE`) of
/// the day, scored against the real part.
fn score_part(
    a: &RealismRequest,
    models: &Calibrated,
    split: &Split,
    name: &'static str,
    real: &LobsterDayFiles,
    progress: &dyn Fn(Progress),
) -> Result<Part> {
    let (held_out, levels) = (name == HELD_OUT, real.rows.levels());
    let minutes = if held_out {
        split.held_out.clone()
    } else {
        split.seen.clone()
    };
    let seeds = a.seeds.max(1);
    let mut sims = [Vec::new(), Vec::new(), Vec::new()];
    let mut counts = [0usize; 3];
    let opening = if held_out {
        models.last_row.clone()
    } else {
        real.rows.row(0).to_vec()
    };
    for k in 0..seeds {
        let seed = a.seed + k;
        let qr = models.queue_reactive_day(&minutes, &opening, seed, levels);
        let days = if held_out {
            [
                models.agent_held_out(split, seed, levels),
                qr,
                models.parametric_held_out(split, seed),
            ]
        } else {
            [
                models.agent_seen(split, seed, levels),
                qr,
                models.flow.simulate(seed),
            ]
        };
        for (m, rec) in days.into_iter().enumerate() {
            if a.export && k == 0 {
                export(&a.out, real, &minutes, MODELS[m], &rec)?;
            }
            let (f, n) = measured(rec);
            sims[m].push(f);
            counts[m] += n;
            progress(Progress::Done);
        }
    }
    let scored: Vec<(String, Vec<DayFeatures>)> =
        MODELS.iter().map(|m| m.to_string()).zip(sims).collect();
    let features = DayFeatures::measure(&real.messages, &real.rows, CENT);
    Ok(Part {
        name,
        minutes,
        rows: realism_score(std::slice::from_ref(&features), &scored, a.seed),
        messages: [
            real.messages.len(),
            counts[0] / seeds as usize,
            counts[1] / seeds as usize,
            counts[2] / seeds as usize,
        ],
    })
}

/// Writes a simulated part in LOBSTER's file names (the window's start and
/// end in milliseconds after midnight), beside the real one's.
fn export(
    out: &Path,
    day: &LobsterDayFiles,
    minutes: &Range<usize>,
    model: &str,
    rec: &LobsterRecorder,
) -> Result<()> {
    let dir = out.join("lobster").join(model);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let ms = |minute: usize| (minute_seconds(minute) * 1e3) as u64;
    let (from, to) = (ms(minutes.start), ms(minutes.end));
    let name = |what: &str| {
        let date = lobster_name(&day.file).map_or_else(|| "day".to_string(), |n| n.1);
        dir.join(format!(
            "{}_{date}_{from}_{to}_{what}_{}.csv",
            day.symbol,
            day.rows.levels()
        ))
    };
    let open = |p: PathBuf| -> Result<std::io::BufWriter<std::fs::File>> {
        Ok(std::io::BufWriter::new(
            std::fs::File::create(&p).with_context(|| format!("creating {}", p.display()))?,
        ))
    };
    let (mut m, mut o) = (open(name("message"))?, open(name("orderbook"))?);
    rec.write(&mut m, &mut o)
        .context("writing the LOBSTER export")?;
    Ok(())
}

/// One part of a day, scored.
pub struct Part {
    /// `held out` or `in sample`.
    pub name: &'static str,
    /// Its minutes of the session (0: 09:30).
    pub minutes: Range<usize>,
    rows: Vec<RealismRow>,
    /// Messages of the real part and the mean per simulated part of each
    /// of [`MODELS`].
    messages: [usize; 4],
}

impl Part {
    /// Statistics on which `model`'s distance (W1) is strictly below the
    /// parametric baseline's, and how many both scored.
    pub fn wins(&self, model: &str) -> (usize, usize) {
        let w1 =
            |r: &RealismRow, m: &str| r.scores.iter().find(|s| s.model == m).map(|s| s.w1.value);
        let both: Vec<(f64, f64)> = self
            .rows
            .iter()
            .filter_map(|r| Some((w1(r, model)?, w1(r, PARAMETRIC)?)))
            .collect();
        let wins = both.iter().filter(|(m, b)| m < b).count();
        (wins, both.len())
    }

    /// The mean total variation (L1) of `model` over the distributions
    /// every model scored: LOB-Bench's headline figure.
    pub fn mean_l1(&self, model: &str) -> Option<f64> {
        let l1s: Vec<f64> = self
            .rows
            .iter()
            .filter(|r| r.scores.len() == MODELS.len() && r.scores.iter().all(|s| s.l1.is_some()))
            .filter_map(|r| r.scores.iter().find(|s| s.model == model)?.l1)
            .map(|i| i.value)
            .collect();
        (!l1s.is_empty()).then(|| l1s.iter().sum::<f64>() / l1s.len() as f64)
    }

    /// `HH:MM–HH:MM`.
    pub fn window(&self) -> String {
        format!("{}–{}", clock(self.minutes.start), clock(self.minutes.end))
    }
}

/// One symbol's scores: the held-out part first, then the calibration
/// part.
pub struct SymbolReport {
    /// The symbol.
    pub symbol: String,
    /// The real day's file.
    pub file: PathBuf,
    /// The order book levels of the day's files.
    pub levels: usize,
    /// Held out, then in sample.
    pub parts: Vec<Part>,
}

impl SymbolReport {
    /// The held-out part's wins of `model` over the baseline
    /// ([`Part::wins`]).
    pub fn wins(&self, model: &str) -> (usize, usize) {
        self.parts[0].wins(model)
    }

    /// The study's lines for the symbol: for each simulated model, the
    /// statistics on which it is closer than the parametric baseline,
    /// held out and in sample.
    pub fn summary_lines(&self) -> Vec<String> {
        let [held, seen] = [&self.parts[0], &self.parts[1]];
        [AGENT_BASED, QUEUE_REACTIVE]
            .into_iter()
            .map(|model| {
                let ((wins, total), (in_wins, in_total)) = (held.wins(model), seen.wins(model));
                format!(
                    "{} ({} levels), held out {}: the {model} market is closer than the parametric baseline on {wins} of {total} statistics (in sample, {}: {in_wins} of {in_total})",
                    self.symbol,
                    self.levels,
                    held.window(),
                    seen.window()
                )
            })
            .collect()
    }
}

fn write_reports(a: &RealismRequest, reports: &[SymbolReport]) -> Result<()> {
    let json: Vec<_> = reports
        .iter()
        .map(|r| {
            let part = |p: &Part| {
                serde_json::json!({
                    "window": p.window(),
                    "mean_l1": {AGENT_BASED: p.mean_l1(AGENT_BASED), QUEUE_REACTIVE: p.mean_l1(QUEUE_REACTIVE), PARAMETRIC: p.mean_l1(PARAMETRIC)},
                    "messages": {"real": p.messages[0], AGENT_BASED: p.messages[1], QUEUE_REACTIVE: p.messages[2], PARAMETRIC: p.messages[3]},
                    "closer_than_parametric": {AGENT_BASED: p.wins(AGENT_BASED), QUEUE_REACTIVE: p.wins(QUEUE_REACTIVE)},
                    "statistics": p.rows,
                })
            };
            serde_json::json!({
                "symbol": r.symbol, "file": r.file, "levels": r.levels,
                "held_out": part(&r.parts[0]),
                "in_sample": part(&r.parts[1]),
            })
        })
        .collect();
    serl_report::write_atomic(
        &a.out.join("realism.json"),
        serde_json::to_string_pretty(
            &serde_json::json!({"seeds": a.seeds, "seed": a.seed, "symbols": json}),
        )?
        .as_bytes(),
    )?;
    let mut md = String::from("# serl simulate realism\n\n");
    let _ = writeln!(
        md,
        "Each real LOBSTER day is cut in two at the middle of its session (12:45 on a whole day). The \
         three models are calibrated on the first part alone: the agent-based market (its minute mids, executed \
         volume, spread, order size and cancel rate), the queue-reactive flow (Huang, Lehalle & Rosenbaum: \
         each level's limit, cancel and market order rates by its queue's size) and a parametric baseline \
         (Poisson order flow with the part's rates per price level, Cont–Stoikov–Talreja style). Each is scored, over {} simulated days, \
         against the **held-out** second part, of which no calibration reads anything (the agent-based \
         market's mids there are a driftless random walk at the first part's minute volatility, its volume \
         the first part's mean minute; the queue-reactive flow and the baseline start from the first part's last book), and **in \
         sample** against the first part itself (the agent-based market following its real mids). Every \
         part, real or simulated, is read as a LOBSTER file of the same depth, by the same code. \
         L1 is the total variation of the histograms (0 to 1); W1 the Wasserstein-1 distance in the \
         statistic's units; a response row gives the mean absolute deviation from the real curve over lags \
         {:?} messages. Brackets: 95% bootstrap CIs over minutes. **Bold**: the closer model.\n",
        a.seeds, RESPONSE_LAGS
    );
    let mut svgs = Vec::new();
    for r in reports {
        symbol_section(&mut md, r);
        svgs.push(response_plot(r)?);
        let _ = writeln!(
            md,
            "![{}](plot{}.svg)\n",
            svgs.last().map_or("", |s: &(String, String)| &s.0),
            svgs.len() - 1
        );
    }
    serl_report::write_pages(&a.out, &md, &svgs)?;
    Ok(())
}

fn symbol_section(md: &mut String, r: &SymbolReport) {
    let _ = writeln!(
        md,
        "## {} (level {}, `{}`)\n",
        r.symbol,
        r.levels,
        r.file.display()
    );
    for p in &r.parts {
        part_section(md, p);
    }
}

fn l1_text(l1: Option<f64>) -> String {
    l1.map_or_else(|| "–".to_string(), |v| format!("{v:.3}"))
}

fn part_section(md: &mut String, p: &Part) {
    let ((abm, total), (qr, qr_total)) = (p.wins(AGENT_BASED), p.wins(QUEUE_REACTIVE));
    let _ = writeln!(
        md,
        "### {}: {}\n\nMessages: real {}, agent-based {} per day, queue-reactive {} per day, \
         parametric {} per day. Closer than the parametric baseline: the agent-based market on \
         **{abm} of {total}** statistics, the queue-reactive flow on **{qr} of {qr_total}**. Mean L1 \
         over the distributions: agent-based {}, queue-reactive {}, parametric {} (LOB-Bench on \
         GOOG: LOBS5 0.139, Cont 0.475).\n",
        p.name,
        p.window(),
        p.messages[0],
        p.messages[1],
        p.messages[2],
        p.messages[3],
        l1_text(p.mean_l1(AGENT_BASED)),
        l1_text(p.mean_l1(QUEUE_REACTIVE)),
        l1_text(p.mean_l1(PARAMETRIC))
    );
    let mut t = Table::new([
        "statistic",
        "unit",
        "real n",
        "agent-based L1",
        "agent-based W1",
        "queue-reactive L1",
        "queue-reactive W1",
        "parametric L1",
        "parametric W1",
    ])
    .right(2..9);
    for row in &p.rows {
        let best = row.best().map(|b| b.model.clone());
        let cell = |model: &str, l1: bool| {
            let Some(s) = row.scores.iter().find(|s| s.model == model) else {
                return "–".to_string();
            };
            let text = match (l1, s.l1) {
                (true, Some(i)) => i.show(3),
                (true, None) => return "–".to_string(),
                (false, _) => s.w1.show(3),
            };
            if !l1 && best.as_deref() == Some(model) {
                format!("**{text}**")
            } else {
                text
            }
        };
        let kind = match row.kind {
            StatKind::Distribution => "",
            StatKind::Conditional => " (conditional)",
            StatKind::Response => " (curve)",
        };
        t.row([
            format!("{}{kind}", row.statistic),
            serl_report::table_cell(row.unit),
            row.real_samples.to_string(),
            cell(AGENT_BASED, true),
            cell(AGENT_BASED, false),
            cell(QUEUE_REACTIVE, true),
            cell(QUEUE_REACTIVE, false),
            cell(PARAMETRIC, true),
            cell(PARAMETRIC, false),
        ]);
    }
    md.push_str(&t.markdown());
    md.push('\n');
}

/// The mean mid response to market orders that moved the mid: real and
/// every model.
fn response_plot(r: &SymbolReport) -> Result<(String, String)> {
    let held = &r.parts[0];
    let title = format!(
        "{}, held out ({}): mid response to market orders that moved the mid",
        r.symbol,
        held.window()
    );
    let Some(row) = held
        .rows
        .iter()
        .find(|row| row.statistic == "response to market orders, mid moved")
    else {
        return Ok((title, String::new()));
    };
    let curve = |c: &[f64]| -> Vec<(f64, f64)> {
        RESPONSE_LAGS
            .iter()
            .zip(c)
            .filter(|(_, v)| v.is_finite())
            .map(|(l, v)| ((*l as f64).log10(), *v))
            .collect()
    };
    let mut series = vec![("real".to_string(), curve(&row.real_curve))];
    series.extend(
        row.scores
            .iter()
            .map(|s| (s.model.clone(), curve(&s.curve))),
    );
    let mut svg = String::new();
    serl_report::lines_chart(
        &mut svg,
        &serl_report::Chart::new(
            &title,
            "log10 messages after the order",
            "signed mid change (ticks)",
        )
        .points(),
        &series,
    )
    .map_err(|e| StudyError::msg(format!("plotting {title}: {e}")))?;
    Ok((title, svg))
}
