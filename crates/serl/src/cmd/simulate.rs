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
use serl_market::facts::{stylized_facts, Check};
use serl_market::Simulator;

#[derive(Args)]
pub struct SimulateArgs {
    #[arg(long)]
    pub data: PathBuf,
    #[arg(long)]
    pub symbol: String,
    /// The session, YYYY-MM-DD.
    #[arg(long)]
    pub date: chrono::NaiveDate,
    /// A TOML with [data] and [market] tables (see configs/market.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulated days (seeds) the checks pool over.
    #[arg(long, default_value_t = 20)]
    pub seeds: u64,
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct SimulateFile {
    data: DataConfig,
    market: MarketConfig,
}

#[derive(Serialize)]
struct Summary {
    symbol: String,
    date: String,
    seeds: u64,
    calibration: Vec<Check>,
    stylized_facts: Vec<Check>,
}

fn rel(a: f64, b: f64) -> f64 {
    (a / b - 1.0).abs()
}

pub fn run(a: SimulateArgs) -> Result<ExitCode> {
    let cfg: SimulateFile = match &a.config {
        Some(p) => {
            let t =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            toml::from_str(&t).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
        }
        None => SimulateFile::default(),
    };
    let ds = serl_data::load(&a.data, &cfg.data)
        .with_context(|| format!("loading {}", a.data.display()))?;
    let sym = a.symbol.to_uppercase();
    if ds.symbol_sessions(&sym).is_empty() {
        bail!("unknown symbol `{}` in {}", a.symbol, a.data.display());
    }
    let md = MarketData::new(&ds, &cfg.data);
    let Some(view) = md.get(&sym, a.date) else {
        let dates: Vec<String> = ds
            .symbol_sessions(&sym)
            .iter()
            .map(|s| s.date.to_string())
            .collect();
        bail!(
            "no session of {sym} on {}; it has {}",
            a.date,
            dates.join(", ")
        );
    };
    let (cal, mcfg) = calibrate(view, &cfg.market);
    let minutes = cal.minute_price.len();
    let bar = indicatif::ProgressBar::new(a.seeds);
    let mut days = Vec::new();
    for k in 0..a.seeds.max(1) {
        days.push(Simulator::new(&cal, &mcfg, a.seed + k).finish());
        bar.inc(1);
    }
    bar.finish_and_clear();
    let returns: Vec<Vec<f64>> = days
        .iter()
        .map(|d| d.mid.windows(2).map(|w| (w[1] / w[0]).ln() * 1e4).collect())
        .collect();
    let mut depth = [0.0; 5];
    for d in &days {
        for (acc, v) in depth.iter_mut().zip(d.depth) {
            *acc += v / days.len() as f64;
        }
    }
    // Calibration: seed-averaged day against the real one.
    let n = days.len() as f64;
    let avg = |f: &dyn Fn(&serl_market::MinuteStats) -> f64| days.iter().map(f).sum::<f64>() / n;
    let open_err = rel(avg(&|d| d.mid[0]), cal.minute_price[0]);
    let half_hours = minutes.div_ceil(30);
    let bucket = |v: &[f64], h: usize| v[h * 30..((h + 1) * 30).min(v.len())].iter().sum::<f64>();
    let real_total: f64 = cal.minute_volume.iter().sum();
    let sim_total = avg(&|d| d.volume.iter().sum());
    let mut worst = 0.0f64;
    let mut profile = Vec::new();
    for h in 0..half_hours {
        let r = bucket(&cal.minute_volume, h);
        let s = avg(&|d| bucket(&d.volume, h));
        profile.push((h, r, s));
        if r > 0.0 {
            worst = worst.max(rel(s, r));
        }
    }
    let rv = |p: &[f64]| {
        p.windows(2)
            .map(|w| (w[1] / w[0]).ln().powi(2))
            .sum::<f64>()
            .sqrt()
    };
    let real_rv = rv(&cal.minute_price);
    let sim_rv = avg(&|d| rv(&d.mid));
    let sim_spread_bps = avg(&|d| {
        let s: Vec<f64> = d
            .spread
            .iter()
            .zip(&d.mid)
            .filter(|(s, _)| **s > 0.0)
            .map(|(s, m)| s / m * 1e4)
            .collect();
        s.iter().sum::<f64>() / s.len().max(1) as f64
    });
    let calibration = vec![
        Check {
            name: "opening price level".into(),
            value: format!("{:.3}% off", open_err * 100.0),
            target: "within 1%".into(),
            pass: open_err < 0.01,
        },
        Check {
            name: "daily volume".into(),
            value: format!("{sim_total:.0} vs {real_total:.0}"),
            target: "within 20%".into(),
            pass: rel(sim_total, real_total) < 0.2,
        },
        Check {
            name: "volume per half hour (U shape)".into(),
            value: format!("worst bucket {:.1}% off", worst * 100.0),
            target: "within 20% per half hour".into(),
            pass: worst < 0.2,
        },
        Check {
            name: "realised volatility".into(),
            value: format!("{:.1} vs {:.1} bps", sim_rv * 1e4, real_rv * 1e4),
            target: "within 25%".into(),
            pass: rel(sim_rv, real_rv) < 0.25,
        },
        Check {
            name: "typical spread".into(),
            value: format!("{sim_spread_bps:.2} vs {:.2} bps", view.spread_bps),
            target: "within 50%".into(),
            pass: rel(sim_spread_bps, view.spread_bps) < 0.5,
        },
    ];
    let facts = stylized_facts(&returns, &depth);
    write_outputs(
        &a.out,
        &cal,
        &days[0],
        &profile,
        &calibration,
        &facts,
        &sym,
        &a,
    )?;
    let summary = Summary {
        symbol: sym.clone(),
        date: a.date.to_string(),
        seeds: a.seeds,
        calibration,
        stylized_facts: facts,
    };
    std::fs::write(
        a.out.join("checks.json"),
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
    println!("report: {}", a.out.join("report.html").display());
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::too_many_arguments)]
fn write_outputs(
    out: &Path,
    cal: &serl_market::Calibration,
    day: &serl_market::MinuteStats,
    profile: &[(usize, f64, f64)],
    calibration: &[Check],
    facts: &[Check],
    sym: &str,
    a: &SimulateArgs,
) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
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
    std::fs::write(out.join("minutes.csv"), csv)?;
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
    let mut svg = String::new();
    let t1 = format!(
        "{sym} {}: real minute price and simulated mid (seed {})",
        a.date, a.seed
    );
    serl_eval::report::lines_chart(
        &mut svg,
        &t1,
        "minute from the open",
        "price ($)",
        &[("real".into(), real), ("simulated".into(), sim)],
        false,
    )
    .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    svgs.push((t1.clone(), svg));
    let mut svg = String::new();
    let t2 = "Volume per half hour: real and simulated (mean over seeds)".to_string();
    let r: Vec<(f64, f64)> = profile.iter().map(|(h, r, _)| (*h as f64, *r)).collect();
    let s: Vec<(f64, f64)> = profile.iter().map(|(h, _, s)| (*h as f64, *s)).collect();
    serl_eval::report::lines_chart(
        &mut svg,
        &t2,
        "half hour from the open",
        "shares",
        &[("real".into(), r), ("simulated".into(), s)],
        false,
    )
    .map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    svgs.push((t2.clone(), svg));
    for (k, (_, s)) in svgs.iter().enumerate() {
        std::fs::write(out.join(format!("plot{k}.svg")), s)?;
    }
    let mut md = String::new();
    let _ = writeln!(md, "# serl simulate: {sym} {}\n", a.date);
    let _ = writeln!(md, "{} simulated days (seeds {}..{}) of the multi-agent market calibrated to the real session in `{}`.\n", a.seeds, a.seed, a.seed + a.seeds - 1, a.data.display());
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
                c.name,
                c.value,
                c.target,
                if c.pass { "pass" } else { "**fail**" }
            );
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md, "## Plots\n\n![{t1}](plot0.svg)\n\n![{t2}](plot1.svg)\n");
    std::fs::write(out.join("report.md"), &md)?;
    std::fs::write(out.join("report.html"), serl_eval::report::html(&md, &svgs))?;
    Ok(())
}
