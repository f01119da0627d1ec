//! Writing a backtest's results: per-order CSV, `summary.json`,
//! `report.md` and a self-contained `report.html` with SVG plots.

use std::fmt::Write as _;
use std::path::Path;

use serl_report::{bars_chart, html, lines_chart, Chart, Table};

use crate::horizons::horizons_table;
use crate::metrics::{OrderResult, PairedDiff, Summary};
use crate::report_data::ReportData;
use crate::significance::DayTest;

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Per-order results as CSV.
pub fn write_orders_csv(path: &Path, results: &[OrderResult]) -> std::io::Result<()> {
    let mut s = String::from(
        "env,strategy,order_id,symbol,date,side,qty,filled,avg_price,bench_price,arrival_price,pa_bps,pa_filled_bps,is_bps,unfilled,reward,horizon_min,passive_share,spread_captured_bps,adverse_1m_bps,adverse_5m_bps,final_cross_share,final_cross_bps,horizon_price\n",
    );
    for r in results {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{:.6},{},{:.6},{:.6},{},{},{:.6},{:.6},{}",
            r.env,
            csv_field(&r.strategy),
            r.order_id,
            csv_field(&r.symbol),
            r.date,
            r.side,
            r.qty,
            r.filled,
            r.avg_price.map_or(String::new(), |p| format!("{p:.6}")),
            r.bench_price,
            r.arrival_price,
            r.pa_bps,
            r.pa_filled_bps,
            r.is_bps,
            r.unfilled,
            r.reward,
            r.horizon_min,
            r.placement.passive_share,
            r.placement.spread_captured_bps,
            opt6(r.placement.adverse_1m_bps),
            opt6(r.placement.adverse_5m_bps),
            r.placement.final_cross_share,
            r.placement.final_cross_bps,
            r.horizon_price,
        );
    }
    std::fs::write(path, s)
}

/// An optional number for the CSV: empty when absent.
fn opt6(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| format!("{x:.6}"))
}

/// Per-order results as Parquet (the same columns as the CSV).
pub fn write_orders_parquet(path: &Path, results: &[OrderResult]) -> std::io::Result<()> {
    use polars::prelude::*;
    let col_f = |f: &dyn Fn(&OrderResult) -> f64| results.iter().map(f).collect::<Vec<f64>>();
    let col_s = |f: &dyn Fn(&OrderResult) -> String| results.iter().map(f).collect::<Vec<String>>();
    let col_o = |f: &dyn Fn(&OrderResult) -> Option<f64>| {
        results.iter().map(f).collect::<Vec<Option<f64>>>()
    };
    let df = DataFrame::new_infer_height(vec![
        Column::new("env".into(), col_s(&|r| r.env.clone())),
        Column::new("strategy".into(), col_s(&|r| r.strategy.clone())),
        Column::new(
            "order_id".into(),
            results.iter().map(|r| r.order_id).collect::<Vec<u64>>(),
        ),
        Column::new("symbol".into(), col_s(&|r| r.symbol.clone())),
        Column::new("date".into(), col_s(&|r| r.date.to_string())),
        Column::new("side".into(), col_s(&|r| r.side.to_string())),
        Column::new("qty".into(), col_f(&|r| r.qty)),
        Column::new("filled".into(), col_f(&|r| r.filled)),
        Column::new(
            "avg_price".into(),
            results
                .iter()
                .map(|r| r.avg_price)
                .collect::<Vec<Option<f64>>>(),
        ),
        Column::new("bench_price".into(), col_f(&|r| r.bench_price)),
        Column::new("arrival_price".into(), col_f(&|r| r.arrival_price)),
        Column::new("pa_bps".into(), col_f(&|r| r.pa_bps)),
        Column::new("pa_filled_bps".into(), col_f(&|r| r.pa_filled_bps)),
        Column::new("is_bps".into(), col_f(&|r| r.is_bps)),
        Column::new("unfilled".into(), col_f(&|r| r.unfilled)),
        Column::new("reward".into(), col_f(&|r| r.reward)),
        Column::new(
            "horizon_min".into(),
            results
                .iter()
                .map(|r| r.horizon_min as u32)
                .collect::<Vec<u32>>(),
        ),
        Column::new(
            "passive_share".into(),
            col_f(&|r| r.placement.passive_share),
        ),
        Column::new(
            "spread_captured_bps".into(),
            col_f(&|r| r.placement.spread_captured_bps),
        ),
        Column::new(
            "adverse_1m_bps".into(),
            col_o(&|r| r.placement.adverse_1m_bps),
        ),
        Column::new(
            "adverse_5m_bps".into(),
            col_o(&|r| r.placement.adverse_5m_bps),
        ),
        Column::new(
            "final_cross_share".into(),
            col_f(&|r| r.placement.final_cross_share),
        ),
        Column::new(
            "final_cross_bps".into(),
            col_f(&|r| r.placement.final_cross_bps),
        ),
        Column::new("horizon_price".into(), col_f(&|r| r.horizon_price)),
    ]);
    let mut df = df.map_err(std::io::Error::other)?;
    let file = std::fs::File::create(path)?;
    ParquetWriter::new(file)
        .finish(&mut df)
        .map_err(std::io::Error::other)?;
    Ok(())
}

/// Bins of the PA distribution plot.
const PA_BINS: usize = 40;

fn histogram(values: &[f64], lo: f64, hi: f64, bins: usize) -> Vec<(f64, f64)> {
    let w = (hi - lo) / bins as f64;
    let mut counts = vec![0.0; bins];
    for &v in values {
        let k = (((v - lo) / w).floor() as isize).clamp(0, bins as isize - 1) as usize;
        counts[k] += 1.0;
    }
    let n = values.len().max(1) as f64;
    counts
        .into_iter()
        .enumerate()
        .map(|(k, c)| (lo + (k as f64 + 0.5) * w, c / n))
        .collect()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((q * (sorted.len() - 1) as f64).round() as usize).min(sorted.len() - 1)]
}

/// The report's plots, as SVG strings with titles.
fn plots(results: &[OrderResult], data: &ReportData) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for env in data.pa_by_symbol.keys() {
        out.extend(pa_distribution(results, data, env));
        out.extend(pa_per_symbol(data, env));
    }
    out.extend(inventory_paths(results));
    out
}

/// The distribution of PA at venue `env`, one series per strategy.
fn pa_distribution(
    results: &[OrderResult],
    data: &ReportData,
    env: &str,
) -> Option<(String, String)> {
    let rows: Vec<&OrderResult> = results.iter().filter(|r| r.env == env).collect();
    let mut all: Vec<f64> = rows
        .iter()
        .filter(|r| r.strategy != "oracle")
        .map(|r| r.pa_bps)
        .collect();
    all.sort_by(f64::total_cmp);
    let (lo, hi) = (quantile(&all, 0.01), quantile(&all, 0.99));
    let mut series = Vec::new();
    for s in data.pa_by_symbol[env].keys() {
        let v: Vec<f64> = rows
            .iter()
            .filter(|r| &r.strategy == s)
            .map(|r| r.pa_bps)
            .collect();
        series.push((s.clone(), histogram(&v, lo, hi.max(lo + 1e-6), PA_BINS)));
    }
    let mut svg = String::new();
    // The range leaves the oracle out, so its tail is clipped: say so
    // only where there is one.
    let title = if data.pa_by_symbol[env].contains_key("oracle") {
        format!("PA distribution ({env}); oracle clipped to the others' range")
    } else {
        format!("PA distribution ({env})")
    };
    let chart = Chart::new(&title, "PA (bps)", "share of orders");
    let bin_width = (hi.max(lo + 1e-6) - lo) / PA_BINS as f64;
    bars_chart(&mut svg, &chart, &series, bin_width)
        .is_ok()
        .then_some((title, svg))
}

/// Mean PA per symbol at venue `env`, symbols sorted by TWAP's (or the
/// first strategy's) PA.
fn pa_per_symbol(data: &ReportData, env: &str) -> Option<(String, String)> {
    let by = &data.pa_by_symbol[env];
    let key = if by.contains_key("twap") {
        "twap".to_string()
    } else {
        by.keys().next().cloned().unwrap_or_default()
    };
    let mut syms: Vec<(&String, f64)> = by
        .get(&key)
        .map(|m| m.iter().map(|(s, v)| (s, *v)).collect())
        .unwrap_or_default();
    syms.sort_by(|a, b| a.1.total_cmp(&b.1));
    let series: Vec<(String, Vec<(f64, f64)>)> = by
        .iter()
        .map(|(s, m)| {
            let pts = syms
                .iter()
                .enumerate()
                .filter_map(|(i, (sym, _))| m.get(*sym).map(|v| (i as f64, *v)))
                .collect();
            (s.clone(), pts)
        })
        .collect();
    let mut svg = String::new();
    let title = format!("Mean PA per symbol ({env}), symbols ordered by {key}");
    let chart = Chart::new(&title, "symbol", "PA (bps)")
        .points()
        .x_labels(syms.iter().map(|(sym, _)| sym.to_string()).collect());
    lines_chart(&mut svg, &chart, &series)
        .is_ok()
        .then_some((title, svg))
}

/// Example trajectories: inventory left over the episode, per strategy,
/// for the first two orders that kept one.
fn inventory_paths(results: &[OrderResult]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut ids: Vec<u64> = results
        .iter()
        .filter(|r| !r.inventory_path.is_empty())
        .map(|r| r.order_id)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    for id in ids.into_iter().take(2) {
        let rows: Vec<&OrderResult> = results
            .iter()
            .filter(|r| r.order_id == id && r.env == "static" && !r.inventory_path.is_empty())
            .collect();
        let Some(first) = rows.first() else { continue };
        let series: Vec<(String, Vec<(f64, f64)>)> = rows
            .iter()
            .map(|r| {
                let mut pts = vec![(0.0, 1.0)];
                pts.extend(
                    r.inventory_path
                        .iter()
                        .enumerate()
                        .map(|(k, v)| ((k + 1) as f64, *v as f64)),
                );
                (r.strategy.clone(), pts)
            })
            .collect();
        let title = format!(
            "Inventory left: order {} ({} {} {} shares of {})",
            id, first.date, first.side, first.qty, first.symbol
        );
        let mut svg = String::new();
        let chart = Chart::new(&title, "decision step", "inventory left").integer_x();
        if lines_chart(&mut svg, &chart, &series).is_ok() {
            out.push((title, svg));
        }
    }
    out
}

fn glr(v: Option<f64>) -> String {
    v.map_or("-".into(), |g| format!("{g:.2}"))
}

/// The strategy table, the paired differences against TWAP and the
/// illusory gain, under headings of level `h` (`"##"`, `"###"`): the
/// results part of every report that backtests.
pub fn results_tables(data: &ReportData, h: &str) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "{h} Strategies\n");
    let warnings = crate::warnings::warnings(data);
    if !warnings.is_empty() {
        let _ = writeln!(md, "**Warnings**\n");
        for w in &warnings {
            let _ = writeln!(md, "- {w}");
        }
        let _ = writeln!(md);
    }
    let mut t = Table::new([
        "env",
        "strategy",
        "orders",
        "PA (bps) [95% CI]",
        "PA filled (bps)",
        "PA-std",
        "WR",
        "GLR",
        "AFI",
        "fill rate",
        "IS (bps) [95% CI]",
    ]);
    for s in &data.summaries {
        t.row([
            s.env.to_string(),
            s.strategy.to_string(),
            s.orders.to_string(),
            s.pa.to_string(),
            format!("{:.2}", s.pa_filled),
            format!("{:.2}", s.pa_std),
            format!("{:.3}", s.wr),
            glr(s.glr),
            format!("{:.4}", s.afi),
            format!("{:.4}", s.fill_rate),
            s.is.to_string(),
        ]);
    }
    md.push_str(&t.markdown());
    let _ = writeln!(
        md,
        "\n{} {}",
        crate::warnings::LEGEND,
        crate::warnings::IS_LEGEND
    );
    paired_table(
        &mut md,
        &data.paired_vs_twap,
        &format!("{h} Paired differences against TWAP"),
        "Mean of PA(strategy) − PA(TWAP) over the same orders.",
    );
    paired_table(
        &mut md,
        &data.paired_vs_passive,
        &format!("{h} Paired differences against passive TWAP"),
        "Mean of PA(strategy) − PA(twap-passive) over the same orders: what a strategy gains beyond resting each step's share at the touch.",
    );
    placement_table(&mut md, &data.summaries, h);
    horizons_table(&mut md, &data.by_horizon, h);
    day_tests_table(&mut md, &data.day_tests, h);
    let _ = writeln!(md, "\n{h} Illusory gain\n");
    if data.illusory_gain.is_empty() {
        let _ = writeln!(md, "Run with `--env both` to measure it: PA in the static replay minus PA in the dynamic market, on the same orders.");
    } else {
        let mut t = Table::new(["strategy", "PA static", "PA dynamic", "illusory gain (bps)"]);
        for g in &data.illusory_gain {
            t.row([
                g.strategy.clone(),
                format!("{:.2}", g.pa_static),
                format!("{:.2}", g.pa_dynamic),
                format!("{:.2}", g.gain),
            ]);
        }
        md.push_str(&t.markdown());
    }
    md
}

/// A table of paired differences under `heading` (nothing when empty).
fn paired_table(md: &mut String, diffs: &[PairedDiff], heading: &str, what: &str) {
    if diffs.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n{heading}\n\n{what}\n");
    let mut t = Table::new([
        "env",
        "strategy",
        "orders",
        "ΔPA (bps) [95% CI]",
        "significant",
    ]);
    for d in diffs {
        t.row([
            d.env.to_string(),
            d.strategy.to_string(),
            d.orders.to_string(),
            d.diff.to_string(),
            (if d.diff.significant() { "yes" } else { "no" }).to_string(),
        ]);
    }
    md.push_str(&t.markdown());
}

/// What placement earned, when any strategy rested orders: the passive
/// share, the spread captured, the adverse selection after passive fills
/// and the final cross (docs/placement.md).
fn placement_table(md: &mut String, summaries: &[Summary], h: &str) {
    if summaries.iter().all(|s| s.placement.passive_share == 0.0) {
        return;
    }
    let _ = writeln!(md, "\n{h} Placement\n");
    let _ = writeln!(md, "Spread captured: mid minus fill price per filled share, for the order's side (minus half the spread when crossing). Adverse: the mid's move against the order 1 and 5 minutes after a passive fill. Final cross: the share of the order crossed at the horizon and its cost against the benchmark, bps of the order.\n");
    let mut t = Table::new([
        "env",
        "strategy",
        "passive share",
        "spread captured (bps)",
        "adverse 1 min (bps)",
        "adverse 5 min (bps)",
        "final cross share",
        "final cross cost (bps)",
    ]);
    for s in summaries {
        t.row(
            [s.env.to_string(), s.strategy.to_string()]
                .into_iter()
                .chain(placement_cells(&s.placement)),
        );
    }
    md.push_str(&t.markdown());
}

/// Placement's figures as table cells, in the order of the report's
/// placement table: passive share, spread captured, adverse 1 and 5
/// minutes (`-` without passive fills), final cross share and cost.
pub fn placement_cells(p: &serl_env::PlacementStats) -> [String; 6] {
    let opt = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.2}"));
    [
        format!("{:.3}", p.passive_share),
        format!("{:.2}", p.spread_captured_bps),
        opt(p.adverse_1m_bps),
        opt(p.adverse_5m_bps),
        format!("{:.4}", p.final_cross_share),
        format!("{:.2}", p.final_cross_bps),
    ]
}

/// The day-level tests: each strategy against each baseline with the day
/// as the unit.
fn day_tests_table(md: &mut String, tests: &[DayTest], h: &str) {
    if tests.is_empty() {
        return;
    }
    let _ = writeln!(md, "\n{h} Day by day against each baseline\n");
    let _ = writeln!(
        md,
        "PA(strategy) − PA(baseline) averaged per (symbol, day), then per day. p: one-sided Wilcoxon signed-rank test over the days (is the strategy better on a typical day?); q: p corrected for every test in this table (Benjamini–Hochberg); the CI resamples whole days.\n"
    );
    let mut table = Table::new([
        "env",
        "strategy",
        "baseline",
        "horizon",
        "days",
        "days won",
        "daily ΔPA (bps) [95% CI]",
        "p",
        "q",
    ]);
    for t in tests {
        table.row([
            t.env.to_string(),
            t.strategy.to_string(),
            t.reference.to_string(),
            t.horizon_min.map_or("all".into(), crate::horizon_label),
            t.days.to_string(),
            t.days_won.to_string(),
            t.mean_day_diff.to_string(),
            t.p_cell(),
            t.q_cell(),
        ]);
    }
    md.push_str(&table.markdown());
}

fn markdown(data: &ReportData, plot_titles: &[String]) -> String {
    let mut md = String::new();
    let p = &data.provenance;
    let _ = writeln!(md, "# serl backtest report\n");
    let _ = writeln!(
        md,
        "{} orders from the **{}** split of `{}`. PA is the price advantage over the window's benchmark in bps (positive is better for both sides); CIs are bootstrap 95% intervals of the mean. The oracle has perfect foresight: it is an upper bound that no real strategy can reach.\n",
        p.orders, p.split, p.data_path
    );
    md.push_str(&results_tables(data, "##"));
    let _ = writeln!(md, "\n## PA per symbol\n");
    for (env, by) in &data.pa_by_symbol {
        let strategies: Vec<&String> = by.keys().collect();
        let mut symbols: Vec<&String> = by.values().flat_map(|m| m.keys()).collect();
        symbols.sort();
        symbols.dedup();
        let _ = writeln!(
            md,
            "**{env}**{}\n",
            if symbols.len() > 30 {
                format!(
                    " (first 30 of {} symbols; `summary.json` has all)",
                    symbols.len()
                )
            } else {
                String::new()
            }
        );
        let mut t =
            Table::new(std::iter::once("symbol").chain(strategies.iter().map(|s| s.as_str())));
        for sym in symbols.iter().take(30) {
            t.row(
                std::iter::once(sym.to_string()).chain(
                    strategies
                        .iter()
                        .map(|s| by[*s].get(*sym).map_or("-".into(), |v| format!("{v:.2}"))),
                ),
            );
        }
        md.push_str(&t.markdown());
        let _ = writeln!(md);
    }
    if !plot_titles.is_empty() {
        let _ = writeln!(md, "## Plots\n");
        for (k, t) in plot_titles.iter().enumerate() {
            let _ = writeln!(md, "![{t}](plot{k}.svg)\n");
        }
    }
    let _ = writeln!(md, "## Provenance\n");
    let _ = writeln!(md, "| | |\n|---|---|");
    let _ = writeln!(md, "| data | `{}` |", p.data_path);
    let _ = writeln!(md, "| split | {} |", p.split);
    let _ = writeln!(md, "| seed | {} |", p.seed);
    let _ = writeln!(md, "| orders | {} |", p.order_config);
    let _ = writeln!(md, "| environment | {} |", p.env_config);
    let _ = writeln!(md, "| reward | {} |", p.reward);
    let _ = writeln!(
        md,
        "| serl | {} (commit {}) |",
        p.serl_version, p.git_commit
    );
    let _ = writeln!(md, "| created | {} |", p.created);
    if !p.skipped.is_empty() {
        let _ = writeln!(md, "\n**Skipped while loading** ({}):\n", p.skipped.len());
        for s in &p.skipped {
            let _ = writeln!(md, "- `{s}`");
        }
    }
    if !p.repairs.is_empty() {
        let _ = writeln!(
            md,
            "\n**Repaired: records that could not be read and were recomputed** ({}):\n",
            p.repairs.len()
        );
        for s in &p.repairs {
            let _ = writeln!(md, "- `{s}`");
        }
    }
    md
}

/// Writes `orders.csv`, `orders.parquet`, `summary.json`, `report.md` (with `plotN.svg`
/// beside it) and a self-contained `report.html` into `dir`.
pub fn write_report(dir: &Path, results: &[OrderResult], data: &ReportData) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    write_orders_csv(&dir.join("orders.csv"), results)?;
    write_orders_parquet(&dir.join("orders.parquet"), results)?;
    let json = serde_json::to_string_pretty(data).map_err(std::io::Error::other)?;
    std::fs::write(dir.join("summary.json"), json)?;
    let svgs = plots(results, data);
    for (k, (_, svg)) in svgs.iter().enumerate() {
        std::fs::write(dir.join(format!("plot{k}.svg")), svg)?;
    }
    let titles: Vec<String> = svgs.iter().map(|s| s.0.clone()).collect();
    let md = markdown(data, &titles);
    std::fs::write(dir.join("report.md"), &md)?;
    std::fs::write(dir.join("report.html"), html(&md, &svgs))?;
    Ok(())
}
