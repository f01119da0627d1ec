//! Order placement from the command line: passive baselines in the static
//! replay and the dynamic market, the LOBSTER queue as the reference, and
//! clear errors for bad placements and settings.

mod common;
use common::{read_json, serl, text};

use std::path::{Path, PathBuf};

/// The shared GOOG level-10 LOBSTER sample, when it is there.
fn goog() -> Option<PathBuf> {
    let p = common::repo()
        .join("../shared/data/lobster-2012-06-21/LOBSTER_SampleFile_GOOG_2012-06-21_10.zip");
    p.exists().then_some(p)
}

fn backtest(source: (&str, &Path), env: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "backtest",
        "--config",
        "configs/backtest-placement.toml",
        source.0,
        source.1.to_str().unwrap(),
        "--env",
        env,
        "--strategy",
        "twap",
        "--strategy",
        "twap-passive",
        "--strategy",
        "peg-mid",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    serl(&args)
}

/// `env → strategy → placement` of a backtest's summary.json.
fn placement(out: &Path) -> std::collections::BTreeMap<(String, String), serde_json::Value> {
    let summary = read_json(&out.join("summary.json"));
    summary["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let key = (
                s["env"].as_str().unwrap().to_string(),
                s["strategy"].as_str().unwrap().to_string(),
            );
            (key, s.clone())
        })
        .collect()
}

#[test]
fn passive_twap_rests_its_orders_in_both_environments_and_the_report_says_what_it_earned() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bt");
    let o = backtest(
        ("--data", Path::new("data/lean")),
        "both",
        &out,
        &["--split", "all"],
    );
    assert!(o.status.success(), "{}", text(&o));
    let s = placement(&out);
    for env in ["static", "dynamic"] {
        let twap = &s[&(env.to_string(), "twap".to_string())];
        assert_eq!(twap["placement"]["passive_share"], 0.0, "{env}");
        assert!(twap["placement"]["spread_captured_bps"].as_f64().unwrap() < 0.0);
        for passive in ["twap-passive", "twap-passive:mid"] {
            let p = &s[&(env.to_string(), passive.to_string())];
            let share = p["placement"]["passive_share"].as_f64().unwrap();
            assert!(share > 0.2 && share <= 1.0, "{env} {passive}: {share}");
            // Every strategy finishes: the horizon crosses what is left.
            assert_eq!(p["afi"], 0.0, "{env} {passive}");
        }
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("Placement") && md.contains("spread captured"),
        "{md}"
    );
    let csv = std::fs::read_to_string(out.join("orders.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains("passive_share"));
}

#[test]
fn on_a_lobster_day_the_three_fill_models_meet_the_same_orders() {
    let Some(day) = goog() else {
        eprintln!("SKIP: ../shared/data/lobster-2012-06-21 is not here");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("lob");
    let o = backtest(("--lobster", &day), "all", &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let s = placement(&out);
    let pa = |env: &str, st: &str| {
        s[&(env.to_string(), st.to_string())]["pa"]["mean"]
            .as_f64()
            .unwrap()
    };
    // Crossing fills alike on the day's bars with or without the queue.
    assert!((pa("static", "twap") - pa("lobster", "twap")).abs() < 1e-9);
    let lob = &s[&("lobster".to_string(), "twap-passive".to_string())];
    assert!(lob["placement"]["passive_share"].as_f64().unwrap() > 0.0);
    assert_eq!(lob["orders"], 2, "one order per side on the day");
    // The same run twice gives the same numbers.
    let again = tmp.path().join("lob2");
    let o = backtest(("--lobster", &day), "lobster", &again, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let s2 = placement(&again);
    assert_eq!(
        s2[&("lobster".to_string(), "twap-passive".to_string())]["pa"],
        lob["pa"]
    );
}

#[test]
fn bad_placements_and_fill_settings_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bad");
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--strategy",
        "twap-passive:touch+x",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("placement `touch+x`"), "{}", text(&o));
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--env",
        "lobster",
        "--strategy",
        "twap",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--lobster PATH"), "{}", text(&o));
    let cfg = tmp.path().join("fills.toml");
    std::fs::write(&cfg, "[env.fills]\nqueue_haircut = 2.0\n").unwrap();
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--config",
        cfg.to_str().unwrap(),
        "--strategy",
        "twap-passive",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("env.fills.queue_haircut"), "{}", text(&o));
}
