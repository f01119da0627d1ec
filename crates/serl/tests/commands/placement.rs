//! Order placement from the command line: passive baselines in the static
//! replay and the dynamic market, the LOBSTER queue as the reference, and
//! clear errors for bad placements and settings.

use crate::common;
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
        for passive in ["twap-passive", "peg-mid"] {
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

/// Runs `serl COMMAND --data data/lean ARGS --out OUT` and checks that it
/// fails saying `needle`.
fn refused(command: &str, args: &[&str], out: &Path, needle: &str) {
    let mut all = vec![
        command,
        "--data",
        "data/lean",
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend(args);
    let o = serl(&all);
    assert!(!o.status.success(), "{all:?} ran");
    assert!(text(&o).contains(needle), "{all:?}: {}", text(&o));
}

#[test]
fn bad_placements_and_fill_settings_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bad");
    let bt = |args: &[&str], needle: &str| refused("backtest", args, &out, needle);
    bt(
        &["--strategy", "twap-passive:touch+x"],
        "placement `touch+x`",
    );
    bt(
        &["--env", "lobster", "--strategy", "twap"],
        "--lobster PATH",
    );
    let cfg = tmp.path().join("fills.toml");
    std::fs::write(&cfg, "[env.fills]\nqueue_haircut = 2.0\n").unwrap();
    let cfg = cfg.to_str().unwrap();
    bt(
        &["--config", cfg, "--strategy", "twap-passive"],
        "env.fills.queue_haircut",
    );
    // Placement is PPO's over discrete actions: a DDQN config is refused
    // with the field named.
    let train = ["--config", "configs/train-placement.toml", "--algo", "ddqn"];
    refused("train", &train, &tmp.path().join("ddqn"), "placements");
}

#[test]
fn a_policy_learns_where_to_place_and_a_backtest_places_its_orders_the_same_way() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let o = serl(&[
        "train",
        "--config",
        "configs/train-placement.toml",
        "--data",
        "data/lean",
        "--total-steps",
        "4096",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let meta = read_json(&run.join("final.json"));
    assert_eq!(meta["placements"], serde_json::json!(["cross", "touch"]));
    assert_eq!(
        meta["obs_dim"], 32,
        "the market's 29 columns, the queue's 2 and the designed queue feature"
    );
    assert_eq!(meta["features"][0]["name"], "queue_minutes");
    let policy = format!("policy:{}", run.display());
    let out = tmp.path().join("bt");
    let o = serl(&[
        "backtest",
        "--config",
        "configs/backtest-placement.toml",
        "--data",
        "data/lean",
        "--split",
        "all",
        "--env",
        "both",
        "--strategy",
        "twap",
        "--strategy",
        &policy,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let label = format!("policy:{}", run.file_name().unwrap().to_str().unwrap());
    let s = placement(&out);
    for env in ["static", "dynamic"] {
        let p = &s[&(env.to_string(), label.clone())];
        // It rests some of its orders, and finishes every one.
        assert!(
            p["placement"]["passive_share"].as_f64().unwrap() > 0.0,
            "{env}: {p}"
        );
        assert_eq!(p["afi"], 0.0);
    }
}
