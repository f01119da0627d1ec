//! `serl simulate`: a real symbol-day in the multi-agent market, checked
//! against the real day and against the stylized facts of real markets.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use serl_data::DataConfig;
use serl_env::{calibrate, MarketConfig, MarketData};
use serl_lob::{parse_messages, LobsterInput};
use serl_market::Simulator;
use serl_market::{impact_study, impact_summary, ImpactSpec, ImpactStudy};
use serl_market::{stylized_facts, Check};
use serl_market::{Calibration, FitEffort, OrderStats, Recording};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SimulateArgs {
    #[command(subcommand)]
    pub command: Option<SimulateCommand>,
    #[command(flatten)]
    pub session: SessionArgs,
    /// Simulated days (seeds) the checks pool over.
    #[arg(long, default_value_t = 20)]
    pub seeds: u64,
    #[arg(long, required = true)]
    pub out: Option<PathBuf>,
}

#[derive(clap::Subcommand)]
pub enum SimulateCommand {
    /// The metaorder impact study: TWAP buys and sells of 1-20% of the
    /// day's volume against the same seeds without them.
    Impact(ImpactArgs),
    /// Realism of the simulated order flow against real LOBSTER days: the
    /// agent-based market and a parametric Poisson baseline, each
    /// calibrated to the same symbol-day, scored statistic by statistic
    /// (L1 and Wasserstein-1 with bootstrap CIs).
    Realism(super::realism::RealismArgs),
}

/// Which real session to simulate.
#[derive(Args)]
pub struct SessionArgs {
    #[arg(long, required = true)]
    pub data: Option<PathBuf>,
    #[arg(long, required = true)]
    pub symbol: Option<String>,
    /// The session, YYYY-MM-DD.
    #[arg(long, required = true)]
    pub date: Option<chrono::NaiveDate>,
    /// A TOML with [data] and [market] tables (see configs/market.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A LOBSTER sample (zip or message CSV) to calibrate the noise
    /// traders' order size and cancellation rate from.
    #[arg(long)]
    pub lobster: Option<PathBuf>,
    /// Who simulates the seeds (overrides `[cluster] engine`): here, or
    /// one task per seed on a cluster, planned in the output directory
    /// (`docs/cluster.md`).
    #[arg(long, value_enum)]
    pub engine: Option<super::evolve::EngineChoice>,
}

#[derive(Args)]
pub struct ImpactArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// Seeds per metaorder size (each runs a buy and a sell).
    #[arg(long, default_value_t = 30)]
    pub seeds: u64,
    /// Metaorder sizes as shares of the day's volume.
    #[arg(long, value_delimiter = ',', default_value = "0.01,0.02,0.05,0.1,0.2")]
    pub sizes: Vec<f64>,
    /// The execution window, minutes since the open.
    #[arg(long, default_value_t = 30)]
    pub start_minute: usize,
    #[arg(long, default_value_t = 150)]
    pub end_minute: usize,
    #[arg(long)]
    pub out: PathBuf,
}

/// A `serl simulate` config: the data layer and the market.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct SimulateFile {
    pub(super) data: DataConfig,
    pub(super) market: MarketConfig,
    /// Where the seeds are simulated (`[cluster] engine`).
    pub(super) cluster: serl_cluster::ClusterConfig,
}

#[derive(Serialize)]
struct Summary {
    symbol: String,
    date: String,
    seeds: u64,
    calibration: Vec<Check>,
    stylized_facts: Vec<Check>,
}

/// A real session turned into the simulator's calibration.
struct Session {
    symbol: String,
    date: chrono::NaiveDate,
    data: PathBuf,
    seed: u64,
    cal: Calibration,
    market: MarketConfig,
    spread_bps: f64,
    /// Order statistics taken from LOBSTER, when given.
    lobster: Option<(PathBuf, OrderStats)>,
    /// `[cluster]`, with `--engine` applied.
    cluster: serl_cluster::ClusterConfig,
}

fn load_session(s: SessionArgs) -> Result<Session> {
    let (Some(data), Some(symbol), Some(date)) = (s.data, s.symbol, s.date) else {
        bail!("--data, --symbol and --date are required");
    };
    let mut cfg: SimulateFile = match &s.config {
        Some(p) => super::read_toml(p)?,
        None => SimulateFile::default(),
    };
    if let Some(e) = s.engine {
        cfg.cluster.engine = e.into();
    }
    cfg.cluster.validate()?;
    let ds = super::load_data(&data, &cfg.data)?;
    let sym = symbol.to_uppercase();
    if ds.symbol_sessions(&sym).is_empty() {
        bail!("unknown symbol `{symbol}` in {}", data.display());
    }
    let md = MarketData::new(&ds, &cfg.data);
    let Some(view) = md.get(&sym, date) else {
        let dates: Vec<String> = ds
            .symbol_sessions(&sym)
            .iter()
            .map(|s| s.date.to_string())
            .collect();
        bail!("no session of {sym} on {date}; it has {}", dates.join(", "));
    };
    let (mut cal, mut market) = calibrate(view, &cfg.market);
    let lobster = match s.lobster {
        Some(path) => {
            let input = LobsterInput::open(&path, None)
                .with_context(|| format!("reading LOBSTER sample {}", path.display()))?;
            let rows = parse_messages(&input.message_name, &input.messages)?;
            let stats = OrderStats::from_messages(&rows)
                .with_context(|| format!("{} has no order submissions", input.message_name))?;
            // Order sizes differ between stocks far more than cancellation
            // habits do: a sample of another stock is allowed, but said.
            let name = path.file_name().map(|n| n.to_string_lossy().to_uppercase());
            if !name.is_some_and(|n| n.contains(&format!("_{sym}_"))) {
                eprintln!(
                    "warning: {} is not a sample of {sym}; its order sizes may not carry over",
                    path.display()
                );
            }
            let daily: f64 = cal.minute_volume.iter().sum();
            stats.apply(&mut market, daily);
            Some((path, stats))
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
        date,
        data,
        seed: s.seed,
        cal,
        market,
        spread_bps: view.spread_bps,
    })
}

pub fn run(a: SimulateArgs) -> Result<ExitCode> {
    match a.command {
        Some(SimulateCommand::Impact(i)) => return run_impact(i),
        Some(SimulateCommand::Realism(r)) => return super::realism::run(r),
        None => {}
    }
    let out = a.out.clone().context("--out is required")?;
    let session = load_session(a.session)?;
    let (cal, mcfg) = (&session.cal, &session.market);
    let sym = session.symbol.clone();
    let bar = indicatif::ProgressBar::new(a.seeds);
    // The first seed's day also leaves its tape and book snapshots.
    let first = Simulator::recording(cal, mcfg, session.seed, 5);
    let fundamental = first.fundamental();
    let (day0, recording) = first.finish_recorded();
    bar.inc(1);
    let mut days = vec![day0];
    let rest = (1..a.seeds.max(1)).map(|k| session.seed + k);
    match super::evolve::cluster_of(&session.cluster, &out)? {
        Some(cluster) => {
            bar.finish_and_clear();
            days.extend(super::sim_tasks::days(&cluster, cal, mcfg, rest)?);
        }
        None => {
            for seed in rest {
                days.push(Simulator::new(cal, mcfg, seed).finish());
                bar.inc(1);
            }
            bar.finish_and_clear();
        }
    }
    let compared = serl_market::compare_days(cal, &days, session.spread_bps);
    let (calibration, profile) = (compared.checks, compared.profile);
    let facts = stylized_facts(
        &serl_market::minute_returns_bps(&days),
        &serl_market::mean_depth(&days),
    );
    let outputs = Outputs {
        out: &out,
        session: &session,
        day: &days[0],
        fundamental: &fundamental,
        recording: &recording,
        profile: &profile,
        seeds: a.seeds,
    };
    outputs.write(&calibration, &facts)?;
    let summary = Summary {
        symbol: sym.clone(),
        date: session.date.to_string(),
        seeds: a.seeds,
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
    for c in summary.calibration.iter().chain(&summary.stylized_facts) {
        println!(
            "{} {:<55} {:<40} target {}",
            if c.pass { "PASS" } else { "FAIL" },
            c.name,
            c.value,
            c.target
        );
    }
    println!("report: {}", out.join("report.html").display());
    Ok(ExitCode::SUCCESS)
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
        for (k, (_, s)) in svgs.iter().enumerate() {
            std::fs::write(out.join(format!("plot{k}.svg")), s)?;
        }
        let mut md = String::new();
        let _ = writeln!(md, "# serl simulate: {sym} {}\n", session.date);
        let _ = writeln!(md, "{} simulated days (seeds {}..{}) of the multi-agent market calibrated to the real session in `{}`.\n", self.seeds, seed, seed + self.seeds.max(1) - 1, session.data.display());
        if let Some((path, st)) = &session.lobster {
            let _ = writeln!(
                md,
                "Noise order flow calibrated from LOBSTER `{}`: {} submissions (median {:.0}, mean {:.0} shares), {:.2} cancels per submission, {} shares executed, {:.0}% of orders in round lots; hence `order_size` {:.0} shares, `cancel_share` {:.3} and `round_lot` {} for this day.\n",
                path.display(),
                st.submissions,
                st.median_size,
                st.mean_size,
                st.cancel_ratio,
                st.executed_shares,
                100.0 * st.round_lot_share,
                session.market.order_size,
                session.market.cancel_share,
                session.market.round_lot
            );
        }
        for (title, checks) in [
            ("Calibration against the real day", calibration),
            ("Stylized facts over all seeds", facts),
        ] {
            let _ = writeln!(md, "## {title}\n");
            let _ = writeln!(md, "| check | value | target | result |\n|---|---|---|---|");
            for c in checks {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} |",
                    serl_report::table_cell(&c.name),
                    serl_report::table_cell(&c.value),
                    serl_report::table_cell(&c.target),
                    if c.pass { "pass" } else { "**fail**" }
                );
            }
            let _ = writeln!(md);
        }
        let _ = writeln!(md, "## Plots\n\n![{t1}](plot0.svg)\n\n![{t2}](plot1.svg)\n");
        std::fs::write(out.join("report.md"), &md)?;
        std::fs::write(out.join("report.html"), serl_report::html(&md, &svgs))?;
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
        .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
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
        .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
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

fn run_impact(a: ImpactArgs) -> Result<ExitCode> {
    let session = load_session(a.session)?;
    let spec = ImpactSpec {
        fractions: a.sizes.clone(),
        seeds: a.seeds.max(2),
        first_seed: session.seed,
        start_minute: a.start_minute,
        end_minute: a.end_minute,
        ..ImpactSpec::default()
    };
    let bar = indicatif::ProgressBar::new(spec.seeds).with_style(
        indicatif::ProgressStyle::with_template("impact {bar:30} {pos}/{len} seeds, eta {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let context = || format!("impact study of {} {}", session.symbol, session.date);
    let study = match super::evolve::cluster_of(&session.cluster, &a.out)? {
        Some(cluster) => {
            bar.finish_and_clear();
            let paths =
                super::sim_tasks::impact_paths(&cluster, &session.cal, &session.market, &spec)?;
            impact_summary(&session.cal, &spec, &paths).with_context(context)?
        }
        None => {
            let s = impact_study(&session.cal, &session.market, &spec, &|| bar.inc(1))
                .with_context(context)?;
            bar.finish_and_clear();
            s
        }
    };
    let out = &a.out;
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
    for r in &study.rows {
        println!(
            "Q/V {:>5.1}%  peak {:>7.2} bps  [{:.2}, {:.2}]  after +{} min {:.2} bps",
            r.fraction * 100.0,
            r.peak_bps,
            r.peak_ci.0,
            r.peak_ci.1,
            study.decay_minutes.last().copied().unwrap_or(0),
            r.after_bps.last().copied().unwrap_or(0.0)
        );
    }
    println!(
        "{} δ = {delta} (concave between 0.3 and 0.7)",
        if concave { "PASS" } else { "FAIL" }
    );
    println!("report: {}", out.join("report.html").display());
    Ok(ExitCode::SUCCESS)
}

/// The impact table: peak impact with its interval and the decay after
/// the metaorder, per size.
fn impact_table(md: &mut String, study: &ImpactStudy) {
    let _ = write!(md, "| Q/V | shares | peak impact (bps) | 95% CI |");
    for d in &study.decay_minutes {
        let _ = write!(md, " +{d} min |");
    }
    let _ = write!(md, "\n|---|---|---|---|");
    for _ in &study.decay_minutes {
        let _ = write!(md, "---|");
    }
    md.push('\n');
    for r in &study.rows {
        let _ = write!(
            md,
            "| {:.0}% | {:.0} | {:.2} | [{:.2}, {:.2}] |",
            r.fraction * 100.0,
            r.shares,
            r.peak_bps,
            r.peak_ci.0,
            r.peak_ci.1
        );
        for v in &r.after_bps {
            let _ = write!(md, " {v:.2} |");
        }
        md.push('\n');
    }
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
    .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
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
    .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    svgs.push((t2.clone(), svg));
    for (k, (_, s)) in svgs.iter().enumerate() {
        std::fs::write(out.join(format!("impact{k}.svg")), s)?;
    }
    Ok(svgs)
}
