//! `RUN_DIR/confirm/report.md` (and `.html`, `confirm.json`): the seeds
//! across and one by one, the day tests of their mean, and the
//! walk-forward windows with the day tests of their pooled test days.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serl_eval::walk_forward::Window;
use serl_eval::{
    benjamini_hochberg, day_test, mean, std_dev, DayTest, OrderResult, PairedDiff, Provenance,
    ReportData,
};
use serl_report::{intervals_chart, Chart, Intervals, Table};

use crate::confirm::{mean_label, seed_label, Confirmation, BEST, PLAIN};
use crate::error::{file_err, write_json, EvolveError};

/// A design across its seeds.
#[derive(Debug, Clone, Serialize)]
pub struct AcrossSeeds {
    /// The design's label.
    pub strategy: String,
    /// Seeds trained.
    pub seeds: usize,
    /// Mean over seeds of each seed's test PA, bps.
    pub pa_mean: f64,
    /// Their standard deviation.
    pub pa_std: f64,
    /// Mean over seeds of each seed's paired ΔPA against TWAP, bps.
    pub diff_mean: f64,
    /// Their standard deviation.
    pub diff_std: f64,
    /// Seeds whose ΔPA against TWAP is above zero.
    pub seeds_above_twap: usize,
}

impl AcrossSeeds {
    /// "mean ± std" of the test PA; the mean alone for one seed.
    pub fn pa_text(&self) -> String {
        spread(self.pa_mean, self.pa_std, self.seeds, false)
    }

    /// "mean ± std" of ΔPA against TWAP, signed; the mean alone for one
    /// seed.
    pub fn diff_text(&self) -> String {
        spread(self.diff_mean, self.diff_std, self.seeds, true)
    }
}

fn spread(mean: f64, std: f64, n: usize, signed: bool) -> String {
    let m = if signed {
        format!("{mean:+.2}")
    } else {
        format!("{mean:.2}")
    };
    if n < 2 {
        format!("{m} (one seed)")
    } else {
        format!("{m} ± {std:.2}")
    }
}

impl WindowLine {
    /// `strategy`'s ΔPA against TWAP in this window.
    pub fn diff_of(&self, strategy: &str) -> Option<&PairedDiff> {
        self.vs_twap.iter().find(|d| d.strategy == strategy)
    }
}

/// The venue every confirmation plays: the static replay.
const STATIC: &str = "static";

/// What the confirmation report found, as `confirm.json` keeps it.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ConfirmReport {
    /// The training seeds.
    pub seeds: Vec<u64>,
    /// Each design across its seeds.
    pub across_seeds: Vec<AcrossSeeds>,
    /// The seeds' mean against each baseline and the best design against
    /// plain PPO, day by day (q-values corrected across these rows).
    pub seed_tests: Vec<DayTest>,
    /// Each walk-forward window: its dates, orders, and each policy's
    /// paired ΔPA against TWAP.
    pub windows: Vec<WindowLine>,
    /// The windows' pooled test days, tested like the seeds.
    pub walk_tests: Vec<DayTest>,
}

/// One walk-forward window in the report.
#[derive(Debug, Clone, Serialize)]
pub struct WindowLine {
    /// Its dates.
    pub window: Window,
    /// Orders trained on.
    pub train_orders: usize,
    /// Orders tested on.
    pub test_orders: usize,
    /// The best design's and plain PPO's ΔPA against TWAP.
    pub vs_twap: Vec<PairedDiff>,
}

/// Writes `RUN_DIR/confirm/`'s report, the orders and plots of the seeds
/// (`seeds/`) and of the walk-forward test days (`walk-forward/`).
pub fn write_confirmation(
    run_dir: &Path,
    c: &Confirmation,
    provenance: Provenance,
) -> Result<ConfirmReport, EvolveError> {
    let dir = run_dir.join("confirm");
    let seed = provenance.seed;
    let mut report = ConfirmReport {
        seeds: c.seeds.clone(),
        ..Default::default()
    };
    let mut md = String::from("# Confirming the run's best design\n\n");
    let mut svgs = Vec::new();
    if !c.seed_rows.is_empty() {
        let data = ReportData::new(&c.seed_rows, provenance.clone());
        write_rows(&dir.join("seeds"), &c.seed_rows, &data)?;
        let n = c.seeds.len();
        report.across_seeds = [BEST, PLAIN].map(|d| across(&data, d, n)).to_vec();
        report.seed_tests = headline(
            &c.seed_rows,
            &mean_label(BEST, n),
            &mean_label(PLAIN, n),
            seed,
        );
        let chart = seeds_chart(&data, n);
        seeds_markdown(&mut md, &data, &report, n, chart.is_some());
        write_svg(&dir.join("seeds.svg"), chart.as_ref())?;
        svgs.extend(chart);
    }
    if !c.windows.is_empty() {
        let pooled: Vec<OrderResult> = c.windows.iter().flat_map(|w| w.outcome.clone()).collect();
        let mut prov = provenance;
        prov.split = "walk-forward test days".into();
        prov.orders = pooled.iter().filter(|r| r.strategy == BEST).count();
        let data = ReportData::new(&pooled, prov);
        write_rows(&dir.join("walk-forward"), &pooled, &data)?;
        report.windows = c
            .windows
            .iter()
            .map(|w| {
                let of = |label: &str| -> Vec<&OrderResult> {
                    w.outcome.iter().filter(|r| r.strategy == label).collect()
                };
                let twap = of("twap");
                WindowLine {
                    window: w.window.clone(),
                    train_orders: w.train_orders,
                    test_orders: of(BEST).len(),
                    vs_twap: [BEST, PLAIN]
                        .iter()
                        .filter_map(|d| serl_eval::paired_diff(&of(d), &twap, seed))
                        .collect(),
                }
            })
            .collect();
        report.walk_tests = headline(&pooled, BEST, PLAIN, seed);
        let chart = windows_chart(&report.windows);
        walk_markdown(&mut md, &data, &report, chart.is_some());
        write_svg(&dir.join("windows.svg"), chart.as_ref())?;
        svgs.extend(chart);
    }
    let html = serl_report::html(&md, &svgs);
    for (name, text) in [("report.md", md.as_str()), ("report.html", html.as_str())] {
        let path = dir.join(name);
        serl_report::write_atomic(&path, text.as_bytes()).map_err(|e| file_err(&path, e))?;
    }
    write_json(&dir.join("confirm.json"), &report)?;
    Ok(report)
}

fn write_rows(dir: &Path, rows: &[OrderResult], data: &ReportData) -> Result<(), EvolveError> {
    serl_eval::write_report(dir, rows, data).map_err(|e| file_err(dir, e))
}

/// `design` across its `n` seeds, from the per-seed summaries.
fn across(data: &ReportData, design: &str, n: usize) -> AcrossSeeds {
    let (mut pa, mut diff) = (Vec::new(), Vec::new());
    for k in 1..=n {
        let label = seed_label(design, k);
        if let Some(s) = data.summaries.iter().find(|s| s.strategy == label) {
            pa.push(s.pa.mean);
        }
        if let Some(d) = data.vs_twap(STATIC, &label) {
            diff.push(d.diff.mean);
        }
    }
    AcrossSeeds {
        strategy: design.to_string(),
        seeds: n,
        pa_mean: mean(&pa),
        pa_std: std_dev(&pa),
        diff_mean: mean(&diff),
        diff_std: std_dev(&diff),
        seeds_above_twap: diff.iter().filter(|d| **d > 0.0).count(),
    }
}

/// `best` and `plain` against each baseline present, and `best` against
/// `plain`, day by day; the q-values are corrected across these rows.
fn headline(rows: &[OrderResult], best: &str, plain: &str, seed: u64) -> Vec<DayTest> {
    let of = |label: &str| -> Vec<&OrderResult> {
        rows.iter()
            .filter(|r| r.strategy == label && r.env == STATIC)
            .collect()
    };
    // The baselines as the rows label them (`ac:1e-7`, say), in order.
    let mut baselines: Vec<&str> = Vec::new();
    for r in rows {
        if serl_eval::is_baseline(&r.strategy) && !baselines.contains(&r.strategy.as_str()) {
            baselines.push(&r.strategy);
        }
    }
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for a in [best, plain] {
        for &b in &baselines {
            pairs.push((a, b));
        }
    }
    pairs.push((best, plain));
    let mut tests: Vec<DayTest> = pairs
        .into_iter()
        .filter_map(|(a, b)| {
            let (ra, rb) = (of(a), of(b));
            if ra.is_empty() || rb.is_empty() {
                return None;
            }
            day_test(&ra, &rb, seed)
        })
        .collect();
    let q = benjamini_hochberg(&tests.iter().map(|t| t.p_value).collect::<Vec<_>>());
    for (t, q) in tests.iter_mut().zip(q) {
        t.q_value = q;
    }
    tests
}

fn tests_table(md: &mut String, tests: &[DayTest]) {
    let mut table = Table::new([
        "strategy",
        "against",
        "days won",
        "mean daily ΔPA, bps [95% CI]",
        "p (Wilcoxon)",
        "q (BH)",
    ])
    .right(2..6);
    for t in tests {
        table.row([
            t.strategy.to_string(),
            t.reference.to_string(),
            format!("{} of {}", t.days_won, t.days),
            t.mean_day_diff.to_string(),
            t.p_cell(),
            t.q_cell(),
        ]);
    }
    md.push_str(&table.markdown());
    md.push('\n');
}

fn seeds_markdown(md: &mut String, data: &ReportData, r: &ConfirmReport, n: usize, chart: bool) {
    let orders = data
        .summaries
        .iter()
        .find(|s| s.strategy == "twap")
        .map_or(0, |s| s.orders);
    let _ = writeln!(
        md,
        "## {n} independent seeds\n\nThe run's best design (chosen on the validation split) and plain PPO, each retrained from {n} seeds with the run's final budget and tested on the run's {orders} test orders in the static replay. Seed 1 is the run's own final retraining. Seeds: {}.\n",
        r.seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
    );
    md.push_str("### Across seeds\n\n");
    let mut across = Table::new([
        "strategy",
        "seeds",
        "test PA, mean ± std over seeds",
        "ΔPA vs TWAP, mean ± std",
        "seeds above TWAP",
    ])
    .right(1..5);
    for a in &r.across_seeds {
        across.row([
            a.strategy.to_string(),
            a.seeds.to_string(),
            a.pa_text(),
            a.diff_text(),
            format!("{} of {}", a.seeds_above_twap, a.seeds),
        ]);
    }
    md.push_str(&across.markdown());
    let _ = writeln!(
        md,
        "\n### Day by day: the seeds' mean\n\nEach order's PA averaged over the {n} seeds, then the difference averaged per (symbol, day) and per day; a one-sided Wilcoxon signed-rank test over days, and Benjamini–Hochberg across the rows below (`seeds/report.html` corrects across all of its strategies instead, so its q-values are larger).\n"
    );
    tests_table(md, &r.seed_tests);
    md.push_str("### Seed by seed\n\n");
    let mut by_seed = Table::new([
        "seed",
        "strategy",
        "test PA [95% CI]",
        "ΔPA vs TWAP [95% CI]",
        "days won vs TWAP",
        "p (Wilcoxon)",
    ])
    .right([0, 2, 3, 4, 5]);
    for k in 1..=n {
        for design in [BEST, PLAIN] {
            let label = seed_label(design, k);
            let s = data.summaries.iter().find(|s| s.strategy == label);
            let d = data.vs_twap(STATIC, &label);
            let t = data.day_test(STATIC, &label, "twap");
            by_seed.row([
                k.to_string(),
                design.to_string(),
                s.map_or("–".into(), |s| s.pa.to_string()),
                d.map_or("–".into(), |d| d.diff.to_string()),
                t.map_or("–".into(), |t| format!("{} of {}", t.days_won, t.days)),
                t.map_or("–".into(), |t| t.p_cell()),
            ]);
        }
    }
    md.push_str(&by_seed.markdown());
    if chart {
        md.push_str("\n![ΔPA against TWAP by seed](seeds.svg)\n");
    }
    md.push_str("\nEvery strategy's tables, the seeds' orders and plots: `seeds/report.html`.\n\n");
}

fn walk_markdown(md: &mut String, data: &ReportData, r: &ConfirmReport, chart: bool) {
    let days: usize = r.windows.iter().map(|w| w.window.test.len()).sum();
    let _ = writeln!(
        md,
        "## Walk-forward\n\n{} windows (`[walk_forward]`); in each, the best design and plain PPO are retrained with the final budget on the window's sessions (its last ones select the checkpoint) and trade the sessions after it, so every one of the {days} test days is out of sample for the policy that trades it. The design was chosen once, on the run's validation split; windows whose test days fall before that split's end test the training, not the choice of design.\n",
        r.windows.len()
    );
    let mut windows = Table::new([
        "window",
        "train",
        "test",
        "test orders",
        "serl-best ΔPA vs TWAP",
        "ppo-default ΔPA vs TWAP",
    ])
    .right([0, 3, 4, 5]);
    for w in &r.windows {
        let of = |s: &str| w.diff_of(s).map_or("–".into(), |d| d.diff.to_string());
        windows.row([
            w.window.index.to_string(),
            w.window.train_span().to_string(),
            w.window.test_span().to_string(),
            w.test_orders.to_string(),
            of(BEST),
            of(PLAIN),
        ]);
    }
    md.push_str(&windows.markdown());
    if chart {
        md.push_str("\n![ΔPA against TWAP by window](windows.svg)\n");
    }
    md.push_str("\n### Day by day, over every window's test days\n\n");
    tests_table(md, &r.walk_tests);
    md.push_str(&serl_eval::results_tables(data, "###"));
}

/// A chart beside `report.md`, so that its image link resolves there as
/// it does in the self-contained HTML.
fn write_svg(path: &Path, chart: Option<&(String, String)>) -> Result<(), EvolveError> {
    match chart {
        Some((_, svg)) => {
            serl_report::write_atomic(path, svg.as_bytes()).map_err(|e| file_err(path, e))
        }
        None => Ok(()),
    }
}

/// The chart's title and SVG; `None` when plotting failed (the report
/// then leaves its image out, so later charts keep their places).
fn chart_of(
    title: &str,
    x_desc: &str,
    labels: Vec<String>,
    series: &[Intervals],
) -> Option<(String, String)> {
    let chart = Chart::new(title, x_desc, "ΔPA vs TWAP, bps").x_labels(labels);
    let mut svg = String::new();
    intervals_chart(&mut svg, &chart, series).ok()?;
    Some((title.to_string(), svg))
}

/// A difference as a chart's (mean, low, high); a missing one at zero.
fn interval(d: Option<&PairedDiff>) -> (f64, f64, f64) {
    d.map_or((0.0, 0.0, 0.0), |d| (d.diff.mean, d.diff.lo, d.diff.hi))
}

fn seeds_chart(data: &ReportData, n: usize) -> Option<(String, String)> {
    let series: Vec<Intervals> = [BEST, PLAIN]
        .map(|design| {
            let points = (1..=n)
                .map(|k| seed_label(design, k))
                .chain([mean_label(design, n)])
                .map(|label| interval(data.vs_twap(STATIC, &label)))
                .collect();
            (design.to_string(), points)
        })
        .to_vec();
    let labels = (1..=n)
        .map(|k| format!("seed {k}"))
        .chain(["mean".to_string()])
        .collect();
    chart_of(
        "ΔPA against TWAP by seed (test split)",
        "seed",
        labels,
        &series,
    )
}

fn windows_chart(windows: &[WindowLine]) -> Option<(String, String)> {
    let series: Vec<Intervals> = [BEST, PLAIN]
        .map(|design| {
            let points = windows
                .iter()
                .map(|w| interval(w.diff_of(design)))
                .collect();
            (design.to_string(), points)
        })
        .to_vec();
    let labels = windows
        .iter()
        .map(|w| w.window.test[0].format("%m-%d").to_string())
        .collect();
    chart_of(
        "ΔPA against TWAP by walk-forward window",
        "first test day",
        labels,
        &series,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;
    use serl_env::OrderSide;

    fn row(strategy: &str, id: u64, day: u32, pa: f64) -> OrderResult {
        OrderResult {
            strategy: strategy.into(),
            env: "static".into(),
            order_id: id,
            symbol: "AAA".into(),
            date: NaiveDate::from_ymd_opt(2018, 3, day).unwrap(),
            side: OrderSide::Buy,
            qty: 100.0,
            horizon_min: 390,
            filled: 100.0,
            avg_price: Some(10.0),
            bench_price: 10.0,
            arrival_price: 10.0,
            horizon_price: 10.0,
            pa_bps: pa,
            pa_filled_bps: pa,
            is_bps: -pa,
            unfilled: 0.0,
            reward: 0.0,
            placement: Default::default(),
            inventory_path: Vec::new(),
        }
    }

    #[test]
    fn the_seeds_mean_averages_each_order_and_beats_twap_on_the_days_it_should() {
        let mut rows = Vec::new();
        for day in 1..=8u32 {
            let id = day as u64;
            rows.push(row("twap", id, day, 0.0));
            // Seed 1 gains 2 bps a day, seed 2 loses 1: the mean gains 0.5.
            rows.push(row(&seed_label(BEST, 1), id, day, 2.0));
            rows.push(row(&seed_label(BEST, 2), id, day, -1.0));
            rows.push(row(&seed_label(PLAIN, 1), id, day, -0.5));
            rows.push(row(&seed_label(PLAIN, 2), id, day, -0.5));
        }
        for d in [BEST, PLAIN] {
            let m = crate::confirm::seed_mean(&rows, d, 2);
            rows.extend(m);
        }
        let best_mean: Vec<f64> = rows
            .iter()
            .filter(|r| r.strategy == mean_label(BEST, 2))
            .map(|r| r.pa_bps)
            .collect();
        assert_eq!(best_mean, vec![0.5; 8]);
        let tests = headline(&rows, &mean_label(BEST, 2), &mean_label(PLAIN, 2), 7);
        let vs = |a: &str, b: &str| {
            tests
                .iter()
                .find(|t| t.strategy == a && t.reference == b)
                .unwrap()
                .clone()
        };
        let best_twap = vs(&mean_label(BEST, 2), "twap");
        assert_eq!((best_twap.days_won, best_twap.days), (8, 8));
        assert!(best_twap.p_value < 0.01, "{}", best_twap.p_value);
        let plain_twap = vs(&mean_label(PLAIN, 2), "twap");
        assert_eq!(plain_twap.days_won, 0);
        assert!(plain_twap.p_value > 0.99);
        let best_plain = vs(&mean_label(BEST, 2), &mean_label(PLAIN, 2));
        assert!((best_plain.mean_day_diff.mean - 1.0).abs() < 1e-12);
        // BH never lowers a p-value.
        assert!(tests.iter().all(|t| t.q_value >= t.p_value));

        let data = ReportData::new(&rows, Provenance::default());
        let a = across(&data, BEST, 2);
        assert_eq!(a.seeds_above_twap, 1);
        assert!((a.diff_mean - 0.5).abs() < 1e-12);
        assert!((a.diff_std - 4.5f64.sqrt()).abs() < 1e-9);
    }
}
