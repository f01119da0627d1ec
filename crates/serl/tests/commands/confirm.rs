//! `serl evolve --seeds N --walk-forward` on the bundled data: the best
//! design and plain PPO retrained from independent seeds (the first is the
//! run's own final retraining) and on rolling windows, tested day by day;
//! a second call loads every training and gives the same tables.

use crate::common;

use common::{read_json, serl, text, tiny_config_from};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// PA by order of `strategy` in the static replay, from a report's
/// `orders.csv`.
fn pa_by_order(orders_csv: &Path, strategy: &str) -> BTreeMap<u64, String> {
    let text = std::fs::read_to_string(orders_csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (env, strat, id, pa) = (col("env"), col("strategy"), col("order_id"), col("pa_bps"));
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[env] == "static" && f[strat] == strategy)
        .map(|f| (f[id].parse().unwrap(), f[pa].to_string()))
        .collect()
}

/// Every `final.bpk` under `dir` with its modification time.
fn trainings(dir: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "final.bpk") {
                out.push((p.clone(), e.metadata().unwrap().modified().unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn seeds_and_walk_forward_confirm_the_best_design_day_by_day_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config_from(dir.path(), "configs/evolve.toml", "");
    let run = dir.path().join("run");
    let args = |first: bool| {
        let mut v: Vec<String> = if first {
            vec!["evolve", "--config", cfg.to_str().unwrap(), "--out"]
        } else {
            vec!["evolve", "--resume"]
        }
        .into_iter()
        .map(String::from)
        .collect();
        v.push(run.display().to_string());
        v.extend(["--seeds", "2", "--walk-forward"].map(String::from));
        v
    };
    let call = |first: bool| {
        let a = args(first);
        serl(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let o = call(true);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("confirm/report.html"), "{}", text(&o));
    let confirm = run.join("confirm");
    let report = read_json(&confirm.join("confirm.json"));

    two_seeds_each_tested_against_every_baseline(&run, &report);
    walk_forward_tests_each_window_on_later_sessions(&confirm, &report);

    // Called again: every training is loaded, the tables are the same.
    let before = trainings(&confirm);
    assert_eq!(before.len(), 2 + 3 * 2);
    let again = call(false);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(trainings(&confirm), before, "a training ran again");
    assert_eq!(read_json(&confirm.join("confirm.json")), report);

    // Each edit of the saved config below is refused with the named reason.
    let saved = run.join("evolve.toml");
    let toml = std::fs::read_to_string(&saved).unwrap();
    let refused = |from: &str, to: &str, reason: &str| {
        std::fs::write(&saved, toml.replace(from, to)).unwrap();
        let e = call(false);
        assert!(!e.status.success(), "{from} -> {to} was accepted");
        assert!(text(&e).contains(reason), "{}", text(&e));
    };
    // Neither are changed trainings.
    refused(
        "final_steps = 512",
        "final_steps = 1024",
        "serl-best-seed2/job.json holds a training of another job",
    );
    // Changed windows are not tested with the old windows' policies.
    refused(
        "test_days = 1",
        "test_days = 2",
        "window-0/window.json was trained on other dates",
    );
    // Windows the data cannot fill are named.
    refused(
        "train_days = 3",
        "train_days = 30",
        "[walk_forward] needs more than train_days = 30",
    );

    // A sealed test is refused before the run starts, not after.
    let sealed = dir.path().join("sealed.toml");
    let text_cfg = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &sealed,
        text_cfg.replacen("lockbox = false", "lockbox = true", 1),
    )
    .unwrap();
    let sealed_run = dir.path().join("sealed");
    let e = serl(&[
        "evolve",
        "--config",
        sealed.to_str().unwrap(),
        "--out",
        sealed_run.to_str().unwrap(),
        "--seeds",
        "2",
    ]);
    assert!(!e.status.success());
    assert!(text(&e).contains("keeps sealed"), "{}", text(&e));
    assert!(!sealed_run.exists(), "the run started");
}

/// Two seeds of each design, the first the run's own final retraining;
/// the seeds' mean tested against every baseline and plain PPO,
/// BH-corrected.
fn two_seeds_each_tested_against_every_baseline(run: &Path, report: &serde_json::Value) {
    let confirm = run.join("confirm");
    assert_eq!(report["seeds"].as_array().unwrap().len(), 2);
    for a in report["across_seeds"].as_array().unwrap() {
        assert_eq!(a["seeds"], 2, "{a}");
    }
    let own = pa_by_order(&run.join("test/orders.csv"), "serl-best");
    let seed1 = pa_by_order(&confirm.join("seeds/orders.csv"), "serl-best #1");
    assert!(!own.is_empty());
    assert_eq!(own, seed1, "seed 1 is not the run's own retraining");
    let seed2 = pa_by_order(&confirm.join("seeds/orders.csv"), "serl-best #2");
    assert_eq!(seed2.len(), own.len());
    assert!(confirm.join("final/serl-best-seed2/final.bpk").exists());

    let tests = report["seed_tests"].as_array().unwrap();
    let against: Vec<&str> = tests
        .iter()
        .filter(|t| t["strategy"] == "serl-best (2 seeds)")
        .map(|t| t["reference"].as_str().unwrap())
        .collect();
    assert!(against.contains(&"twap") && against.contains(&"ppo-default (2 seeds)"));
    assert!(against.iter().any(|r| r.starts_with("ac")), "{against:?}");
    for t in tests {
        assert!(t["q_value"].as_f64().unwrap() >= t["p_value"].as_f64().unwrap());
    }
}

/// Walk-forward: three windows of the bundled six sessions, each tested
/// only on sessions after it, every test session once; a plot each.
fn walk_forward_tests_each_window_on_later_sessions(confirm: &Path, report: &serde_json::Value) {
    let windows = report["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 3);
    let mut tested = Vec::new();
    for w in windows {
        let last_val = w["window"]["validation"]
            .as_array()
            .unwrap()
            .last()
            .unwrap();
        for d in w["window"]["test"].as_array().unwrap() {
            assert!(d.as_str().unwrap() > last_val.as_str().unwrap());
            tested.push(d.as_str().unwrap().to_string());
        }
        assert_eq!(w["vs_twap"].as_array().unwrap().len(), 2, "{w}");
    }
    let mut unique = tested.clone();
    unique.dedup();
    assert_eq!(unique, tested);
    assert!(!report["walk_tests"].as_array().unwrap().is_empty());
    let html = std::fs::read_to_string(confirm.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 2, "one plot each");
}
