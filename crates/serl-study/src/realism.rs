//! The realism study (`serl simulate realism`): the agent-based market and a parametric
//! Poisson baseline, each calibrated to a real LOBSTER symbol-day, scored
//! against it statistic by statistic.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::config::{read_toml, SimulateFile};
use crate::error::{Context, Result, StudyError};
use serl_lob::{lobster_name, sample_files, LobsterDayFiles, LobsterRecorder};
use serl_market::{
    lobster_calibration, realism_score, DayFeatures, FitEffort, MarketConfig, OrderStats,
    ParametricFlow, RealismRow, Simulator, StatKind, RESPONSE_LAGS,
};

/// One tick of a cent in LOBSTER's units (dollars × 10,000).
const CENT: i64 = 100;
const AGENT_BASED: &str = "agent-based";
const PARAMETRIC: &str = "parametric";

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

/// The agent-based market calibrated to the real day, as in `serl simulate
/// --lobster`: the day's mids, volume and spread, the sample's order size
/// and cancel rate, and the noise rates fitted to the volume.
fn agent_market(
    day: &LobsterDayFiles,
    base: &MarketConfig,
) -> Result<(serl_market::Calibration, MarketConfig)> {
    let mut cal = lobster_calibration(&day.messages, &day.rows, CENT);
    let mut market = base.clone();
    let stats = OrderStats::from_messages(&day.messages)
        .with_context(|| format!("{} has no order submissions", day.file.display()))?;
    let daily: f64 = cal.minute_volume.iter().sum();
    stats.apply(&mut market, daily);
    cal.noise_scale = serl_market::fit_noise_volume(&cal, &market, 0, FitEffort::Full);
    Ok((cal, market))
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
}

/// Scores the agent-based market and the parametric baseline against
/// each real day of `a`, and writes `realism.json` and the report into
/// `a.out`. `progress` hears the days to simulate in all, then each one
/// done with the symbol at hand.
pub fn realism(a: &RealismRequest, progress: &dyn Fn(Progress)) -> Result<Vec<SymbolReport>> {
    let base: MarketConfig = match &a.config {
        Some(p) => read_toml::<SimulateFile>(p)?.market,
        None => MarketConfig::default(),
    };
    let files = sample_files(&a.lobster, &a.symbols)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let seeds = a.seeds.max(1);
    progress(Progress::Days(files.len() as u64 * (1 + 2 * seeds)));
    let mut reports = Vec::new();
    for (symbol, file) in files {
        progress(Progress::Symbol(&symbol));
        let day = LobsterDayFiles::read(symbol, file.clone())
            .with_context(|| format!("reading {}", file.display()))?;
        let real = DayFeatures::measure(&day.messages, &day.rows, CENT);
        let (cal, market) = agent_market(&day, &base)?;
        let flow =
            ParametricFlow::fit(&real, &day.messages, &day.rows, CENT).with_context(|| {
                format!(
                    "{}: too little order flow to fit the parametric baseline",
                    day.file.display()
                )
            })?;
        progress(Progress::Done);
        let levels = day.rows.levels();
        let (mut abm, mut cst, mut counts) = (Vec::new(), Vec::new(), [0usize; 2]);
        for k in 0..seeds {
            let seed = a.seed + k;
            let (_, rec) =
                Simulator::recording_lobster(&cal, &market, seed, levels).finish_lobster();
            if a.export && k == 0 {
                export(&a.out, &day, AGENT_BASED, &rec)?;
            }
            let (f, n) = measured(rec);
            abm.push(f);
            counts[0] += n;
            progress(Progress::Done);
            let rec = flow.simulate(seed);
            if a.export && k == 0 {
                export(&a.out, &day, PARAMETRIC, &rec)?;
            }
            let (f, n) = measured(rec);
            cst.push(f);
            counts[1] += n;
            progress(Progress::Done);
        }
        let models = vec![
            (AGENT_BASED.to_string(), abm),
            (PARAMETRIC.to_string(), cst),
        ];
        let rows = realism_score(std::slice::from_ref(&real), &models, a.seed);
        let messages = [
            day.messages.len(),
            counts[0] / seeds as usize,
            counts[1] / seeds as usize,
        ];
        reports.push(SymbolReport {
            day,
            levels,
            rows,
            messages,
        });
    }
    write_reports(a, &reports)?;
    Ok(reports)
}

/// Writes a simulated day in LOBSTER's file names, beside the real one's.
fn export(out: &Path, day: &LobsterDayFiles, model: &str, rec: &LobsterRecorder) -> Result<()> {
    let dir = out.join("lobster").join(model);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = |what: &str| {
        let date = lobster_name(&day.file).map_or_else(|| "day".to_string(), |n| n.1);
        dir.join(format!(
            "{}_{date}_34200000_57600000_{what}_{}.csv",
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

/// One symbol's scores.
pub struct SymbolReport {
    /// The real day the models were scored against.
    pub day: LobsterDayFiles,
    /// The order book levels of the day's files.
    pub levels: usize,
    rows: Vec<RealismRow>,
    /// Messages of the real day and the mean per simulated day of each model.
    messages: [usize; 3],
}

impl SymbolReport {
    /// Statistics on which the agent-based market's distance is below the
    /// baseline's, and how many both scored.
    pub fn wins(&self) -> (usize, usize) {
        let both: Vec<_> = self.rows.iter().filter(|r| r.scores.len() == 2).collect();
        let wins = both
            .iter()
            .filter(|r| r.best().is_some_and(|b| b.model == AGENT_BASED))
            .count();
        (wins, both.len())
    }
}

fn write_reports(a: &RealismRequest, reports: &[SymbolReport]) -> Result<()> {
    let json: Vec<_> = reports
        .iter()
        .map(|r| {
            serde_json::json!({
                "symbol": r.day.symbol, "file": r.day.file, "levels": r.levels,
                "messages": {"real": r.messages[0], AGENT_BASED: r.messages[1], PARAMETRIC: r.messages[2]},
                "statistics": r.rows,
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
        "Each real LOBSTER day against {} simulated days of the agent-based market (calibrated to the same \
         symbol-day: its minute mids, executed volume, spread, order size and cancel rate) and of a \
         parametric baseline (Poisson order flow with the day's rates per price level, Cont–Stoikov–Talreja \
         style). Every day, real or simulated, is read as a LOBSTER file of the same depth, by the same code. \
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
    std::fs::write(a.out.join("report.md"), &md)?;
    std::fs::write(a.out.join("report.html"), serl_report::html(&md, &svgs))?;
    Ok(())
}

fn symbol_section(md: &mut String, r: &SymbolReport) {
    let (wins, total) = r.wins();
    let _ = writeln!(
        md,
        "## {} (level {}, `{}`)\n\nMessages: real {}, agent-based {} per day, parametric {} per day. \
         The agent-based market is closer on **{wins} of {total}** statistics.\n",
        r.day.symbol,
        r.levels,
        r.day.file.display(),
        r.messages[0],
        r.messages[1],
        r.messages[2]
    );
    md.push_str("| statistic | unit | real n | agent-based L1 | agent-based W1 | parametric L1 | parametric W1 |\n|---|---|---:|---:|---:|---:|---:|\n");
    for row in &r.rows {
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
        let _ = writeln!(
            md,
            "| {}{kind} | {} | {} | {} | {} | {} | {} |",
            row.statistic,
            serl_report::table_cell(row.unit),
            row.real_samples,
            cell(AGENT_BASED, true),
            cell(AGENT_BASED, false),
            cell(PARAMETRIC, true),
            cell(PARAMETRIC, false)
        );
    }
    md.push('\n');
}

/// The mean mid response to market orders that moved the mid: real and
/// both models.
fn response_plot(r: &SymbolReport) -> Result<(String, String)> {
    let title = format!(
        "{}: mid response to market orders that moved the mid",
        r.day.symbol
    );
    let Some(row) = r
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
