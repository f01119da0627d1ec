//! `serl train --walk-forward` on the bundled data: a policy per rolling
//! window, each tested only on the days after it, pooled into one report;
//! a stopped run resumes to the same numbers.

use crate::common;
use common::{serl, text};

#[test]
fn walk_forward_tests_each_window_on_later_days_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("wf.toml");
    std::fs::write(
        &config,
        "[walk_forward]\ntrain_days = 3\nvalidation_days = 1\ntest_days = 2\nbaselines = [\"twap\"]\n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let args = |resume: bool| {
        let mut v = vec![
            "train",
            "--config",
            config.to_str().unwrap(),
            "--data",
            "data/lean",
            "--walk-forward",
            "--total-steps",
            "2048",
            "--decision-minutes",
            "30",
            "--out",
            out.to_str().unwrap(),
        ];
        if resume {
            v.push("--resume");
        }
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let o = serl(&args(false).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o));
    let read = || common::read_json(&out.join("walk_forward.json"));
    let first = read();
    let windows = first["windows"].as_array().unwrap();
    assert!(windows.len() >= 2, "{} windows", windows.len());
    let mut tested = Vec::new();
    for w in windows {
        let (val, test) = (&w["window"]["validation"], &w["window"]["test"]);
        let last_val = val.as_array().unwrap().last().unwrap().as_str().unwrap();
        let days: Vec<&str> = test
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap())
            .collect();
        // ISO dates compare as strings: every test day is after the window.
        assert!(
            days.iter().all(|d| *d > last_val),
            "{days:?} after {last_val}"
        );
        tested.extend(days);
        assert!(out
            .join(format!(
                "window-{}/checkpoint/state.json",
                w["window"]["index"]
            ))
            .exists());
    }
    let mut unique = tested.clone();
    unique.dedup();
    assert_eq!(unique, tested, "no day is tested twice");
    let pooled = &first["pooled"]["summaries"];
    let policy = pooled
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["strategy"] == "policy")
        .unwrap();
    let per_window: u64 = windows
        .iter()
        .map(|w| w["test_orders"].as_u64().unwrap())
        .sum();
    assert_eq!(policy["orders"].as_u64().unwrap(), per_window);
    assert!(out.join("walk-forward/orders.csv").exists());
    let html = std::fs::read_to_string(out.join("walk-forward.html")).unwrap();
    assert!(html.contains("Per window"));

    // Resuming a finished run trains nothing more and gives the same tables.
    let o = serl(&args(true).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read()["pooled"]["summaries"], first["pooled"]["summaries"]);

    // Resumed without --walk-forward, it is refused with the command that
    // resumes it, and no policy is trained beside the windows (issue #66).
    let plain: Vec<String> = args(true)
        .into_iter()
        .filter(|a| a != "--walk-forward")
        .collect();
    let o = serl(&plain.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!o.status.success());
    assert!(
        text(&o).contains("is a walk-forward run: resume it with `serl train --resume --out")
            && text(&o).contains("--walk-forward`"),
        "{}",
        text(&o)
    );
    for written in ["best.bpk", "final.bpk", "metrics.jsonl", "checkpoint"] {
        assert!(!out.join(written).exists(), "{written} was written");
    }
}
