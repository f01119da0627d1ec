//! The fill study's files: `fills.json` (each venue's summary per symbol,
//! level and size), `probes.csv` (every probe) and the report with a plot
//! of each symbol's fill probability over the horizon.

use std::fmt::Write as _;

use serl_report::Table;

use crate::error::{Context, Result, StudyError};
use crate::fills::{
    FillSummary, FillsRequest, SymbolFills, ADVERSE_AIM_FACTOR, AIM_PAIRS, HORIZON_SECONDS, LEVELS,
    VENUES, WITHIN_SECONDS,
};

/// Writes the study's files into `a.out`: `fills.json`, `probes.csv`,
/// `report.md` with its plots, and `report.html`.
pub fn write(a: &FillsRequest, all: &[SymbolFills]) -> Result<()> {
    write_json(a, all)?;
    write_csv(a, all)?;
    let mut md = String::from("# serl simulate fills\n\n");
    let _ = writeln!(
        md,
        "The same resting child orders in each venue: buys and sells, at the touch and one tick behind it, \
         of {:?} shares, posted every {} minutes from 09:35 to 15:25 and withdrawn after {} minutes. \
         **LOBSTER queue** rests them in the real day's queue, message by message (behind every share \
         shown at the price when posted); **bar rule** is the static replay's fill rule on the same day's \
         minute bars, at the same prices; the two dynamic markets are the dynamic venue's agent-based market \
         calibrated to the day with its order flow (order sizes, cancels, limit-order depths for noise orders \
         and makers' levels, and the gap between makers' messages, as \
         `serl backtest --lobster` calibrates it) and from its minute bars alone (as on bar data, where \
         agents train), {} simulated days per probe, one probe resting at a time. Every venue is \
         calibrated to the day it is scored on: this study measures fills, it does not choose anything. \
         A level-1 file (AAPL's) shows only the touch, so a probe a tick behind it starts with nobody \
         ahead in the real queue: an optimistic reference there. Fill: filled in full. Adverse move: the mid's move 1 and 5 minutes after the \
         fill, bps, against the order (positive: the price went the way that made the fill a loss). \
         The aim: the fill probability at 5 and 30 minutes within 5 percentage points of the LOBSTER \
         queue's.\n",
        a.sizes,
        a.every_minutes,
        HORIZON_SECONDS / 60.0,
        a.seeds.max(1)
    );
    let mut svgs = Vec::new();
    for s in all {
        symbol_section(&mut md, s);
        svgs.push(curve_plot(s)?);
        let _ = writeln!(
            md,
            "![{}](plot{}.svg)\n",
            svgs[svgs.len() - 1].0,
            svgs.len() - 1
        );
    }
    serl_report::write_pages(&a.out, &md, &svgs)
        .with_context(|| format!("writing the report into {}", a.out.display()))?;
    Ok(())
}

fn write_json(a: &FillsRequest, all: &[SymbolFills]) -> Result<()> {
    let symbols: Vec<_> = all
        .iter()
        .map(|s| {
            let venues: serde_json::Map<String, serde_json::Value> = VENUES
                .iter()
                .map(|&v| {
                    let mut levels = serde_json::Map::new();
                    for (ticks, name) in LEVELS {
                        let by_size: serde_json::Map<_, _> = a
                            .sizes
                            .iter()
                            .map(|&size| {
                                let f = s.fills(v, |p| p.ticks_behind == ticks && p.size == size);
                                (size.to_string(), serde_json::json!(FillSummary::of(f)))
                            })
                            .collect();
                        levels.insert(
                            name.to_string(),
                            serde_json::json!({"all": s.summary(v, ticks), "by_size": by_size}),
                        );
                    }
                    (v.to_string(), serde_json::Value::Object(levels))
                })
                .collect();
            serde_json::json!({"symbol": s.symbol, "file": s.file, "venues": venues})
        })
        .collect();
    let json = serde_json::json!({
        "seeds": a.seeds.max(1), "seed": a.seed, "every_minutes": a.every_minutes, "sizes": a.sizes,
        "horizon_seconds": HORIZON_SECONDS, "within_seconds": WITHIN_SECONDS, "symbols": symbols,
    });
    let path = a.out.join("fills.json");
    serl_report::write_atomic(&path, serde_json::to_string_pretty(&json)?.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn write_csv(a: &FillsRequest, all: &[SymbolFills]) -> Result<()> {
    let mut csv = String::from(
        "symbol,venue,seed,side,ticks_behind,size,post,price,mid,first_fill,full_fill,filled,adverse_1m_bps,adverse_5m_bps\n",
    );
    let opt = |x: Option<f64>| x.map_or_else(String::new, |v| format!("{v}"));
    let seed = |x: Option<u64>| x.map_or_else(String::new, |v| v.to_string());
    for s in all {
        for r in &s.records {
            let p = &r.probe;
            let side = if p.buy { "buy" } else { "sell" };
            let _ = write!(
                csv,
                "{},{},{},{side},{},{},{}",
                s.symbol,
                r.venue,
                seed(r.seed),
                p.ticks_behind,
                p.size,
                p.post
            );
            match &r.fill {
                Some(f) => {
                    let _ = writeln!(
                        csv,
                        ",{},{},{},{},{},{},{}",
                        f.price,
                        f.mid,
                        opt(f.first_fill),
                        opt(f.full_fill),
                        f.filled,
                        opt(f.adverse_bps[0]),
                        opt(f.adverse_bps[1])
                    );
                }
                None => csv.push_str(",,,,,,,\n"),
            }
        }
    }
    let path = a.out.join("probes.csv");
    serl_report::write_atomic(&path, csv.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn symbol_section(md: &mut String, s: &SymbolFills) {
    let _ = writeln!(md, "## {} (`{}`)\n", s.symbol, s.file.display());
    let mut t = Table::new([
        "level",
        "venue",
        "probes",
        "filled ≤ 1 min",
        "≤ 5 min",
        "≤ 30 min",
        "median time to fill (s)",
        "adverse 1 min (bps)",
        "adverse 5 min (bps)",
    ])
    .right(2..9);
    let num = |x: Option<f64>, d: usize| x.map_or_else(|| "–".to_string(), |v| format!("{v:.d$}"));
    for (ticks, level) in LEVELS {
        let reference = s.summary(VENUES[0], ticks);
        for venue in VENUES {
            let f = s.summary(venue, ticks);
            let cell = |k: usize| {
                let p = percent(f.filled_within[k]);
                let gap = f.filled_within[k] - reference.filled_within[k];
                if venue == VENUES[0] || !gap.is_finite() {
                    p
                } else {
                    format!("{p} ({:+.1})", 100.0 * gap)
                }
            };
            t.row([
                level.to_string(),
                venue.to_string(),
                f.probes.to_string(),
                cell(0),
                cell(1),
                cell(2),
                num(f.median_seconds, 0),
                num(f.adverse_bps[0], 2),
                num(f.adverse_bps[1], 2),
            ]);
        }
    }
    md.push_str(&t.markdown());
    let _ = writeln!(
        md,
        "\nIn brackets: percentage points from the LOBSTER queue. Within 5 points at 1, 5 and 30 minutes: \
         the market with the day's order flow on **{} of {AIM_PAIRS}** (level, horizon) pairs, the market \
         from bars only (the training venue) on **{} of {AIM_PAIRS}**, the queue-reactive flow on **{} of \
         {AIM_PAIRS}**. The adverse move 5 minutes after a fill at the touch against the queue's: {}, {} \
         and {} (the aim: within {ADVERSE_AIM_FACTOR}x, either way).\n",
        s.within_aim(VENUES[1]),
        s.within_aim(VENUES[2]),
        s.within_aim(VENUES[4]),
        ratio(s.adverse_ratio(VENUES[1])),
        ratio(s.adverse_ratio(VENUES[2])),
        ratio(s.adverse_ratio(VENUES[4])),
    );
}

/// Each venue's fill probability over the horizon, at the touch.
fn curve_plot(s: &SymbolFills) -> Result<(String, String)> {
    let title = format!(
        "{}: probes at the touch filled in full within t minutes",
        s.symbol
    );
    let series: Vec<(String, Vec<(f64, f64)>)> = VENUES
        .iter()
        .map(|&v| {
            let fills = s.fills(v, |p| p.ticks_behind == 0);
            let points = (0..=(HORIZON_SECONDS / 60.0) as u32)
                .map(|m| {
                    let t = f64::from(m);
                    (t, FillSummary::curve(&fills, 60.0 * t))
                })
                .filter(|(_, y)| y.is_finite())
                .collect();
            (v.to_string(), points)
        })
        .collect();
    let mut svg = String::new();
    serl_report::lines_chart(
        &mut svg,
        &serl_report::Chart::new(&title, "minutes after posting", "filled in full"),
        &series,
    )
    .map_err(|e| StudyError::msg(format!("plotting {title}: {e}")))?;
    Ok((title, svg))
}

/// `x` (a share) as a percentage with one decimal; a dash for none.
fn percent(x: f64) -> String {
    if x.is_finite() {
        format!("{:.1}%", 100.0 * x)
    } else {
        "–".to_string()
    }
}

/// A ratio of adverse moves, or `-` where there is none.
fn ratio(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("**{x:.1}x**"))
}
