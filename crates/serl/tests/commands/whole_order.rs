//! Every share counts: a strategy that leaves much of its order unfilled
//! is judged on the whole parent order, its unfilled shares charged as if
//! crossed at the horizon, and its paired difference and day tests are
//! computed on that number (docs/metrics.md).

use crate::common;

use common::{read_json, serl, text};

/// One row of `orders.csv`, by column name.
struct Row(std::collections::HashMap<String, String>);

impl Row {
    fn f(&self, k: &str) -> f64 {
        self.0[k].parse().unwrap_or(0.0)
    }
    fn s(&self, k: &str) -> &str {
        &self.0[k]
    }
}

fn rows(csv: &str) -> Vec<Row> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            Row(header
                .iter()
                .zip(l.split(','))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect())
        })
        .collect()
}

#[test]
fn a_strategy_that_leaves_half_its_order_pays_for_it_in_pa_and_significance() {
    let out = tempfile::tempdir().unwrap();
    // POV at 0.3% of the volume works about a third of an order of 1% of
    // the day's volume: the rest is left at the horizon.
    let o = common::backtest_lean(
        "all",
        &["twap", "pov:0.003"],
        out.path(),
        &["--decision-minutes", "30"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let all = rows(&std::fs::read_to_string(out.path().join("orders.csv")).unwrap());
    let pov: Vec<&Row> = all
        .iter()
        .filter(|r| r.s("strategy") == "pov:0.003")
        .collect();
    let afi = pov.iter().map(|r| r.f("unfilled")).sum::<f64>() / pov.len() as f64;
    assert!(
        afi > 0.3,
        "the test needs a strategy that leaves much undone: AFI {afi}"
    );

    // Each order's PA is the whole order's: fills plus the unfilled shares
    // at the horizon's price; the filled-only PA is its own column.
    for r in &pov {
        let sign = if r.s("side") == "buy" { 1.0 } else { -1.0 };
        let (qty, filled) = (r.f("qty"), r.f("filled"));
        let order_price = (r.f("avg_price") * filled + (qty - filled) * r.f("horizon_price")) / qty;
        let whole = -sign * (order_price / r.f("bench_price") - 1.0) * 1e4;
        assert!(
            (whole - r.f("pa_bps")).abs() < 1e-3,
            "order {}: pa_bps {} is not the whole order's {whole}",
            r.s("order_id"),
            r.f("pa_bps")
        );
        let filled_only = -sign * (r.f("avg_price") / r.f("bench_price") - 1.0) * 1e4;
        assert!((filled_only - r.f("pa_filled_bps")).abs() < 1e-3);
    }

    // The paired difference and the summary use the whole-order PA.
    let summary = read_json(&out.path().join("summary.json"));
    let twap: std::collections::HashMap<&str, f64> = all
        .iter()
        .filter(|r| r.s("strategy") == "twap")
        .map(|r| (r.s("order_id"), r.f("pa_bps")))
        .collect();
    let diff = pov
        .iter()
        .map(|r| r.f("pa_bps") - twap[r.s("order_id")])
        .sum::<f64>()
        / pov.len() as f64;
    let paired = summary["paired_vs_twap"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["strategy"] == "pov:0.003")
        .expect("pov against TWAP");
    let reported = paired["diff"]["mean"].as_f64().unwrap();
    assert!((reported - diff).abs() < 1e-6, "ΔPA {reported} vs {diff}");
    let s = summary["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["strategy"] == "pov:0.003")
        .unwrap();
    let mean_pa = pov.iter().map(|r| r.f("pa_bps")).sum::<f64>() / pov.len() as f64;
    assert!((s["pa"]["mean"].as_f64().unwrap() - mean_pa).abs() < 1e-6);
    let mean_filled = pov.iter().map(|r| r.f("pa_filled_bps")).sum::<f64>() / pov.len() as f64;
    assert!((s["pa_filled"].as_f64().unwrap() - mean_filled).abs() < 1e-6);

    // The day test pairs the same whole-order numbers.
    let day = summary["day_tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["strategy"] == "pov:0.003" && t["reference"] == "twap")
        .expect("a day test of pov against TWAP");
    assert_eq!(day["days"], 6);

    // The terminal says so, under the table.
    let t = text(&o);
    assert!(
        t.contains("warning: pov:0.003 (static) left") && t.contains("PA filled"),
        "{t}"
    );
    assert!(
        t.contains("AFI: average fraction of the order's shares left unfilled")
            && t.contains("left 67.2% of its shares unfilled (AFI, over 48 orders)"),
        "{t}"
    );
    // The terminal's table has no IS column, and its legend defines none.
    assert!(!t.contains("IS: implementation shortfall"), "{t}");
    // Not a terminal: plain progress lines instead of a bar.
    assert!(t.contains("backtest: 100% ("), "{t}");
}

#[test]
fn a_day_test_over_too_few_days_shows_no_p_value() {
    let out = tempfile::tempdir().unwrap();
    let o = common::backtest_lean("test", &["twap", "vwap"], out.path(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(md.contains("| too few days | too few days |"), "{md}");
    assert!(
        text(&o).contains("too few days for a day-level test"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_backtest_says_which_files_and_rows_it_left_out() {
    let data = tempfile::tempdir().unwrap();
    // The bundled sample as CSV, plus an empty file and a bad row.
    let src = common::repo().join("crates/serl-data/tests/fixtures");
    let good = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy() == "CLEAN.csv")
        });
    let Some(good) = good else {
        panic!("fixture CLEAN.csv missing in {}", src.display());
    };
    let text_good = std::fs::read_to_string(&good).unwrap();
    std::fs::write(data.path().join("GOOD.csv"), &text_good).unwrap();
    std::fs::write(data.path().join("EMPTY.csv"), "").unwrap();
    let mut bad = text_good.lines().collect::<Vec<_>>();
    let broken = bad[3].replacen(|c: char| c.is_ascii_digit(), "x", 1);
    bad[3] = &broken;
    std::fs::write(data.path().join("BADROW.csv"), bad.join("\n")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = serl(&[
        "backtest",
        "--data",
        data.path().to_str().unwrap(),
        "--split",
        "all",
        "--strategy",
        "twap",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(t.contains("left out"), "{t}");
    if o.status.success() {
        let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
        assert!(md.contains("Skipped while loading"), "{md}");
        assert!(md.contains("EMPTY.csv"), "{md}");
    }
}
