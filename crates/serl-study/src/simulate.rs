//! Simulating a real symbol-day in the multi-agent market: the calibrated
//! session, its days checked against the real day and the stylized facts
//! (`serl simulate`), and the metaorder impact study (`serl simulate
//! impact`), here or one task per seed on a cluster.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serl_cluster::EngineKind;
use serl_env::{calibrate, MarketConfig, MarketData};
use serl_lob::{parse_messages, LobsterInput};
use serl_market::{
    impact_study, impact_summary, stylized_facts, Calibration, Check, FitEffort, ImpactSpec,
    ImpactStudy, OrderStats, Recording, Simulator,
};
use serl_report::{table_cell, Table};

use crate::config::{read_toml, SimulateFile};
use crate::error::{Context, Result, StudyError};

/// Which real session to simulate, and how.
pub struct SessionRequest {
    /// The bar data holding the session.
    pub data: PathBuf,
    /// The symbol (any case).
    pub symbol: String,
    /// The session.
    pub date: chrono::NaiveDate,
    /// A TOML with [data] and [market] tables (see configs/market.toml).
    pub config: Option<PathBuf>,
    /// The first seed.
    pub seed: u64,
    /// A LOBSTER sample to calibrate the noise traders' order size and
    /// cancellation rate from.
    pub lobster: Option<PathBuf>,
    /// Overrides `[cluster] engine`.
    pub engine: Option<EngineKind>,
}

/// What `checks.json` holds: the calibration checks against the real day
/// and the stylized facts over all seeds.
#[derive(Serialize)]
pub struct Summary {
    /// The symbol simulated.
    pub symbol: String,
    /// The session's date, `YYYY-MM-DD`.
    pub date: String,
    /// Simulated days.
    pub seeds: u64,
    /// The simulated days checked against the real one.
    pub calibration: Vec<Check>,
    /// The stylized facts, over all simulated days.
    pub stylized_facts: Vec<Check>,
}

/// A real session turned into the simulator's calibration.
pub struct Session {
    /// The symbol, upper case.
    pub symbol: String,
    /// The session.
    pub date: chrono::NaiveDate,
    data: PathBuf,
    /// The first seed.
    pub seed: u64,
    /// The real day's numbers the simulator is calibrated to.
    pub cal: Calibration,
    /// The market's population, with LOBSTER's order statistics applied
    /// when given.
    pub market: MarketConfig,
    spread_bps: f64,
    /// Order statistics taken from LOBSTER, when given.
    lobster: Option<(PathBuf, OrderStats)>,
    /// `[cluster]`, with `--engine` applied.
    cluster: serl_cluster::ClusterConfig,
}

/// The session of `s`, calibrated; `warn` hears what is worth a warning.
pub fn load_session(s: SessionRequest, warn: &dyn Fn(&str)) -> Result<Session> {
    let SessionRequest {
        data, symbol, date, ..
    } = &s;
    let mut cfg: SimulateFile = match &s.config {
        Some(p) => read_toml(p)?,
        None => SimulateFile::default(),
    };
    if let Some(e) = s.engine {
        cfg.cluster.engine = e;
    }
    cfg.cluster.validate()?;
    let ds = crate::data::load_data(data, &cfg.data, warn)?;
    let sym = symbol.to_uppercase();
    if ds.symbol_sessions(&sym).is_empty() {
        crate::bail!("unknown symbol `{symbol}` in {}", data.display());
    }
    let md = MarketData::new(&ds, &cfg.data);
    let Some(view) = md.get(&sym, *date) else {
        let dates: Vec<String> = ds
            .symbol_sessions(&sym)
            .iter()
            .map(|s| s.date.to_string())
            .collect();
        crate::bail!("no session of {sym} on {date}; it has {}", dates.join(", "));
    };
    let (mut cal, mut market) = calibrate(view, &cfg.market);
    let lobster = match &s.lobster {
        Some(path) => {
            let input = LobsterInput::open(path, None)
                .with_context(|| format!("reading LOBSTER sample {}", path.display()))?;
            let rows = parse_messages(&input.message_name, &input.messages)?;
            let stats = OrderStats::from_messages(&rows)
                .with_context(|| format!("{} has no order submissions", input.message_name))?;
            // Order sizes differ between stocks far more than cancellation
            // habits do: a sample of another stock is allowed, but said.
            let name = path.file_name().map(|n| n.to_string_lossy().to_uppercase());
            if !name.is_some_and(|n| n.contains(&format!("_{sym}_"))) {
                warn(&format!(
                    "{} is not a sample of {sym}; its order sizes may not carry over",
                    path.display()
                ));
            }
            let daily: f64 = cal.minute_volume.iter().sum();
            stats.apply(&mut market, daily);
            Some((path.clone(), stats))
        }
        None => None,
    };
    // The environments' quick fit (one pilot day) is refitted in full (four)
    // for the day that is checked, and for a population LOBSTER changed.
    cal.noise_scale = Vec::new();
    cal.noise_scale = serl_market::fit_noise_volume(&cal, &market, 0, FitEffort::Full);
    Ok(Session {
        cluster: cfg.cluster,
        lobster,
        symbol: sym,
        date: *date,
        data: data.clone(),
        seed: s.seed,
        cal,
        market,
        spread_bps: view.spread_bps,
    })
}

/// Simulates `seeds` days of `session` (here, or a task per seed on its
/// cluster), checks them, and writes the report, the tape, the book and
/// the checks into `out`. `tick` hears each day simulated here; `say`
/// what is planned on a cluster.
pub fn simulate(
    session: &Session,
    seeds: u64,
    out: &Path,
    tick: &dyn Fn(),
    say: &dyn Fn(&str),
) -> Result<Summary> {
    let (cal, mcfg) = (&session.cal, &session.market);
    // The first seed's day also leaves its tape and book snapshots.
    let first = Simulator::recording(cal, mcfg, session.seed, 5);
    let fundamental = first.fundamental();
    let (day0, recording) = first.finish_recorded();
    tick();
    let mut days = vec![day0];
    let rest = (1..seeds.max(1)).map(|k| session.seed + k);
    match crate::cluster::cluster_of(&session.cluster, out)? {
        Some(cluster) => {
            days.extend(crate::tasks::simulate::days(
                &cluster, cal, mcfg, rest, say,
            )?);
        }
        None => {
            for seed in rest {
                days.push(Simulator::new(cal, mcfg, seed).finish());
                tick();
            }
        }
    }
    let compared = serl_market::compare_days(cal, &days, session.spread_bps);
    let (calibration, profile) = (compared.checks, compared.profile);
    let facts = stylized_facts(
        &serl_market::minute_returns_bps(&days),
        &serl_market::mean_depth(&days),
    );
    let outputs = Outputs {
        out,
        session,
        day: &days[0],
        fundamental: &fundamental,
        recording: &recording,
        profile: &profile,
        seeds,
    };
    outputs.write(&calibration, &facts)?;
    let summary = Summary {
        symbol: session.symbol.clone(),
        date: session.date.to_string(),
        seeds,
        calibration,
        stylized_facts: facts,
    };
    // What the simulator was given, so that a day can be re-run or studied
    // without the data layer.
    std::fs::write(
        out.join("calibration.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "calibration": &session.cal,
            "market": &session.market,
        }))?,
    )?;
    std::fs::write(
        out.join("checks.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    Ok(summary)
}

/// What the report of one simulated session is made of.
struct Outputs<'a> {
    out: &'a Path,
    session: &'a Session,
    day: &'a serl_market::MinuteStats,
    fundamental: &'a [f64],
    recording: &'a Recording,
    profile: &'a [(usize, f64, f64)],
    seeds: u64,
}

impl Outputs<'_> {
    fn write(&self, calibration: &[Check], facts: &[Check]) -> Result<()> {
        let Outputs { out, session, .. } = *self;
        let (sym, seed) = (&session.symbol, session.seed);
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        self.write_minutes()?;
        self.write_tape()?;
        let svgs = self.plots()?;
        let (t1, t2) = (&svgs[0].0, &svgs[1].0);
        let mut md = String::new();
        let _ = writeln!(md, "# serl simulate: {sym} {}\n", session.date);
        let _ = writeln!(md, "{} simulated days (seeds {}..{}) of the multi-agent market calibrated to the real session in `{}`.\n", self.seeds, seed, seed + self.seeds.max(1) - 1, session.data.display());
        if let Some((path, st)) = &session.lobster {
            let _ = writeln!(
                md,
                "Noise order flow calibrated from LOBSTER `{}`: {} submissions (median {:.0}, mean {:.0} shares), {:.2} cancels per submission, {} shares executed, {:.0}% of orders in round lots; hence `order_size` {:.0} shares, `cancel_share` {:.3} and `round_lot` {} for this day, every trader's sizes drawn from the sample's {} size quantiles (scaled to this day: {}) and each market-maker level quoted as up to {} orders.\n",
                path.display(),
                st.submissions,
                st.median_size,
                st.mean_size,
                st.cancel_ratio,
                st.executed_shares,
                100.0 * st.round_lot_share,
                session.market.order_size,
                session.market.cancel_share,
                session.market.round_lot,
                session.market.size_quantiles.len(),
                quantile_text(&session.market.size_quantiles),
                session.market.mm_orders_per_level
            );
        }
        for (title, checks) in [
            ("Calibration against the real day", calibration),
            ("Stylized facts over all seeds", facts),
        ] {
            let _ = writeln!(md, "## {title}\n");
            let mut t = Table::new(["check", "value", "target", "result"]);
            for c in checks {
                t.row([
                    table_cell(&c.name),
                    table_cell(&c.value),
                    table_cell(&c.target),
                    (if c.pass { "pass" } else { "**fail**" }).to_string(),
                ]);
            }
            let _ = writeln!(md, "{}", t.markdown());
        }
        let _ = writeln!(md, "## Plots\n\n![{t1}](plot0.svg)\n\n![{t2}](plot1.svg)\n");
        serl_report::write_pages(out, &md, &svgs)?;
        Ok(())
    }

    /// `minutes.csv`: the real and simulated day, minute by minute.
    fn write_minutes(&self) -> Result<()> {
        let (cal, day) = (&self.session.cal, self.day);
        let mut csv =
            String::from("minute,real_price,sim_mid,sim_vwap,real_volume,sim_volume,sim_spread\n");
        for m in 0..cal.minute_price.len() {
            let _ = writeln!(
                csv,
                "{m},{},{},{},{},{},{}",
                cal.minute_price[m],
                day.mid[m],
                day.vwap[m],
                cal.minute_volume[m],
                day.volume[m],
                day.spread[m]
            );
        }
        std::fs::write(self.out.join("minutes.csv"), csv)?;
        Ok(())
    }

    /// The report's two plots, (title, SVG): the day's prices, and the
    /// volume profile.
    fn plots(&self) -> Result<Vec<(String, String)>> {
        let Outputs {
            session,
            day,
            profile,
            ..
        } = *self;
        let (cal, sym, seed) = (&session.cal, &session.symbol, session.seed);
        let mut svgs = Vec::new();
        let real: Vec<(f64, f64)> = cal
            .minute_price
            .iter()
            .enumerate()
            .map(|(m, p)| (m as f64, *p))
            .collect();
        let sim: Vec<(f64, f64)> = day
            .mid
            .iter()
            .enumerate()
            .map(|(m, p)| (m as f64, *p))
            .collect();
        let fund: Vec<(f64, f64)> = self
            .fundamental
            .iter()
            .enumerate()
            .map(|(m, p)| (m as f64, *p))
            .collect();
        let mut svg = String::new();
        let t1 = format!(
            "{sym} {}: real minute price and simulated mid (seed {})",
            session.date, seed
        );
        serl_report::lines_chart(
            &mut svg,
            &serl_report::Chart::new(&t1, "minute from the open", "price ($)"),
            &[
                ("real".into(), real),
                ("simulated mid".into(), sim),
                ("fundamental".into(), fund),
            ],
        )
        .map_err(|e| StudyError::msg(format!("plot: {e}")))?;
        svgs.push((t1.clone(), svg));
        let mut svg = String::new();
        let t2 = "Volume per half hour: real and simulated (mean over seeds)".to_string();
        let r: Vec<(f64, f64)> = profile.iter().map(|(h, r, _)| (*h as f64, *r)).collect();
        let s: Vec<(f64, f64)> = profile.iter().map(|(h, _, s)| (*h as f64, *s)).collect();
        serl_report::lines_chart(
            &mut svg,
            &serl_report::Chart::new(&t2, "half hour from the open", "shares").integer_x(),
            &[("real".into(), r), ("simulated".into(), s)],
        )
        .map_err(|e| StudyError::msg(format!("plot: {e}")))?;
        svgs.push((t2.clone(), svg));
        Ok(svgs)
    }

    /// The first seed's trade tape and its minute-end book snapshots.
    fn write_tape(&self) -> Result<()> {
        let rec = self.recording;
        let mut tape = String::from("time_us,price,qty,aggressor,taker_owner,maker_owner\n");
        for t in &rec.trades {
            let side = match t.aggressor {
                serl_lob::Side::Bid => "buy",
                serl_lob::Side::Ask => "sell",
            };
            let _ = writeln!(
                tape,
                "{},{:.4},{},{side},{},{}",
                t.time_us, t.price, t.qty, t.taker_owner, t.maker_owner
            );
        }
        std::fs::write(self.out.join("tape.csv"), tape)?;
        let mut book = String::from("minute");
        for side in ["bid", "ask"] {
            for k in 1..=rec.levels {
                let _ = write!(book, ",{side}{k}_price,{side}{k}_qty");
            }
        }
        book.push('\n');
        for snap in &rec.snapshots {
            let _ = write!(book, "{}", snap.minute);
            for levels in [&snap.bids, &snap.asks] {
                for k in 0..rec.levels {
                    match levels.get(k) {
                        Some((p, q)) => {
                            let _ = write!(book, ",{p:.4},{q}");
                        }
                        None => book.push_str(",,"),
                    }
                }
            }
            book.push('\n');
        }
        std::fs::write(self.out.join("book.csv"), book)?;
        Ok(())
    }
}

/// What the impact study asks besides the session.
pub struct ImpactRequest {
    /// Seeds per metaorder size (each runs a buy and a sell).
    pub seeds: u64,
    /// Metaorder sizes as shares of the day's volume.
    pub sizes: Vec<f64>,
    /// The execution window, minutes since the open.
    pub start_minute: usize,
    /// The window's end (exclusive), minutes since the open.
    pub end_minute: usize,
}

impl ImpactRequest {
    /// The study's spec for `session` (at least two seeds, for a spread).
    pub fn spec(&self, session: &Session) -> ImpactSpec {
        ImpactSpec {
            fractions: self.sizes.clone(),
            seeds: self.seeds.max(2),
            first_seed: session.seed,
            start_minute: self.start_minute,
            end_minute: self.end_minute,
            ..ImpactSpec::default()
        }
    }
}

/// What the impact study found: its rows, and the fitted exponent as text
/// with whether it is concave (between 0.3 and 0.7).
pub struct ImpactOutcome {
    /// The study's rows and fit.
    pub study: ImpactStudy,
    /// The fitted exponent δ of `I ∝ (Q/V)^δ`, as text.
    pub delta: String,
    /// Whether δ is concave (between 0.3 and 0.7).
    pub concave: bool,
}

impl ImpactOutcome {
    /// A line per size (the peak with its interval and the last decay)
    /// and the verdict on δ.
    pub fn lines(&self) -> Vec<String> {
        let study = &self.study;
        let last = study.decay_minutes.last().copied().unwrap_or(0);
        let mut lines: Vec<String> = study
            .rows
            .iter()
            .map(|r| {
                format!(
                    "Q/V {:>5.1}%  peak {:>7.2} bps  [{:.2}, {:.2}]  after +{last} min {:.2} bps",
                    r.fraction * 100.0,
                    r.peak_bps,
                    r.peak_ci.0,
                    r.peak_ci.1,
                    r.after_bps.last().copied().unwrap_or(0.0)
                )
            })
            .collect();
        let verdict = if self.concave { "PASS" } else { "FAIL" };
        lines.push(format!(
            "{verdict} δ = {} (concave between 0.3 and 0.7)",
            self.delta
        ));
        lines
    }
}

/// The metaorder impact study of `session` (here, or a task per seed on
/// its cluster), with its report in `out`. `tick` hears each seed done
/// here; `say` what is planned on a cluster.
pub fn impact(
    session: &Session,
    spec: &ImpactSpec,
    out: &Path,
    tick: &(dyn Fn() + Sync),
    say: &dyn Fn(&str),
) -> Result<ImpactOutcome> {
    let context = || format!("impact study of {} {}", session.symbol, session.date);
    let study = match crate::cluster::cluster_of(&session.cluster, out)? {
        Some(cluster) => {
            let paths = crate::tasks::simulate::impact_paths(
                &cluster,
                &session.cal,
                &session.market,
                spec,
                say,
            )?;
            impact_summary(&session.cal, spec, &paths).with_context(context)?
        }
        None => impact_study(&session.cal, &session.market, spec, tick).with_context(context)?,
    };
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::write(
        out.join("impact.json"),
        serde_json::to_string_pretty(&study)?,
    )?;
    let (delta, concave) = match study.delta {
        Some((d, se)) => (
            format!("{d:.2} ± {:.2}", 1.96 * se),
            (0.3..=0.7).contains(&d),
        ),
        None => ("no size moved the price".into(), false),
    };
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# serl simulate impact: {} {}\n",
        session.symbol, session.date
    );
    let _ = writeln!(
        md,
        "TWAP metaorders (one child order every {} s) from minute {} to {} of the session, \
         {} seeds per size, each run as a buy and as a sell against the same seed without \
         the metaorder. Impact is the signed change of the mid against that counterfactual, \
         in bps (positive: the price moved against the trader).\n",
        spec.child_interval_s, spec.start_minute, spec.end_minute, spec.seeds
    );
    impact_table(&mut md, &study);
    let _ = writeln!(
        md,
        "\nFitted exponent δ in I ∝ (Q/V)^δ: **{delta}** (target: concave, between 0.3 and 0.7): **{}**.\n",
        if concave { "pass" } else { "fail" }
    );
    let svgs = impact_plots(&study, out)?;
    let (t1, t2) = (&svgs[0].0, &svgs[1].0);
    let _ = writeln!(md, "![{t1}](impact0.svg)\n\n![{t2}](impact1.svg)\n");
    std::fs::write(out.join("report.md"), &md)?;
    std::fs::write(out.join("report.html"), serl_report::html(&md, &svgs))?;
    Ok(ImpactOutcome {
        study,
        delta,
        concave,
    })
}

/// The impact table: peak impact with its interval and the decay after
/// the metaorder, per size.
fn impact_table(md: &mut String, study: &ImpactStudy) {
    let header = ["Q/V", "shares", "peak impact (bps)", "95% CI"]
        .map(String::from)
        .into_iter()
        .chain(study.decay_minutes.iter().map(|d| format!("+{d} min")));
    let mut t = Table::new(header);
    for r in &study.rows {
        let fixed = [
            format!("{:.0}%", r.fraction * 100.0),
            format!("{:.0}", r.shares),
            format!("{:.2}", r.peak_bps),
            format!("[{:.2}, {:.2}]", r.peak_ci.0, r.peak_ci.1),
        ];
        t.row(
            fixed
                .into_iter()
                .chain(r.after_bps.iter().map(|v| format!("{v:.2}"))),
        );
    }
    md.push_str(&t.markdown());
}

/// The impact plots (peak against size on log axes, and the mean paths),
/// written beside the report; returns them with their titles.
fn impact_plots(study: &ImpactStudy, out: &Path) -> Result<Vec<(String, String)>> {
    let mut svgs = Vec::new();
    let points: Vec<(f64, f64)> = study
        .rows
        .iter()
        .filter(|r| r.peak_bps > 0.0)
        .map(|r| (r.fraction.log10(), r.peak_bps.log10()))
        .collect();
    let mut series = vec![("peak impact".to_string(), points.clone())];
    if let (Some((d, _)), Some(first)) = (study.delta, points.first()) {
        let line = points
            .iter()
            .map(|(x, _)| (*x, first.1 + d * (x - first.0)))
            .collect();
        series.push((format!("slope δ = {d:.2}"), line));
    }
    let mut svg = String::new();
    let t1 = "Peak impact against metaorder size (log10 axes)".to_string();
    serl_report::lines_chart(
        &mut svg,
        &serl_report::Chart::new(&t1, "log10 Q/V", "log10 impact (bps)"),
        &series,
    )
    .map_err(|e| StudyError::msg(format!("plot: {e}")))?;
    svgs.push((t1.clone(), svg));
    let paths: Vec<(String, Vec<(f64, f64)>)> = study
        .rows
        .iter()
        .map(|r| {
            let pts = r
                .path_bps
                .iter()
                .enumerate()
                .map(|(k, v)| ((study.start_minute + k) as f64, *v))
                .collect();
            (format!("{:.0}% of V", r.fraction * 100.0), pts)
        })
        .collect();
    let mut svg = String::new();
    let t2 = format!(
        "Mean impact path: execution until minute {}, then decay",
        study.end_minute
    );
    serl_report::lines_chart(
        &mut svg,
        &serl_report::Chart::new(&t2, "minute from the open", "impact (bps)"),
        &paths,
    )
    .map_err(|e| StudyError::msg(format!("plot: {e}")))?;
    svgs.push((t2.clone(), svg));
    for (k, (_, s)) in svgs.iter().enumerate() {
        std::fs::write(out.join(format!("impact{k}.svg")), s)?;
    }
    Ok(svgs)
}

/// A few of the size quantiles (min, quartiles, max), shares.
fn quantile_text(q: &[u64]) -> String {
    if q.is_empty() {
        return "none".into();
    }
    let at = |f: f64| q[((q.len() - 1) as f64 * f).round() as usize];
    format!(
        "min {}, quartiles {} / {} / {}, max {}",
        at(0.0),
        at(0.25),
        at(0.5),
        at(0.75),
        at(1.0)
    )
}
