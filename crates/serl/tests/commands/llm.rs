//! `serl llm pairs` as a user runs it: the counts of a run directory's
//! preference pairs and SFT examples, and the error for a directory that
//! holds no run.

use crate::common;

use std::path::Path;

use common::{serl, text};
use serde_json::json;

/// A reward module's record: the replies in order, the last accepted,
/// `errors` why each earlier one was refused.
fn module(prompt: &str, replies: &[&str], errors: &[&str]) -> serde_json::Value {
    json!({
        "kind": "reward",
        "text": replies.last(),
        "attempts": replies.len(),
        "errors": errors,
        "prompt": prompt,
        "replies": replies,
    })
}

/// `candidates/<key>.json` as a run writes it, with only what pairs read
/// filled in.
fn record(
    run: &Path,
    key: &str,
    score: f64,
    module: serde_json::Value,
    lineage: serde_json::Value,
) {
    let iteration: usize = key[1..key.find('_').unwrap()].parse().unwrap();
    let c = json!({
        "key": key, "iteration": iteration, "design": null, "modules": [module],
        "success_rate": 1.0, "validation": null, "score": score, "repaired": 0,
        "train_secs": 0.0, "prompt_tokens": 0, "completion_tokens": 0, "lineage": lineage,
    });
    let dir = run.join("candidates");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{key}.json")), c.to_string()).unwrap();
}

#[test]
fn llm_pairs_counts_each_kind_per_module_and_names_a_directory_without_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let fresh = json!({"operator": "fresh", "parents": [], "island": 0});
    // Two designs on one prompt (better), a refused reply (valid), and a
    // mutation that beat its parent (mutation).
    let refused = module("P", &["{}", "a"], &["no expression found in the reply"]);
    record(&run, "i0_c0", 1.0, refused, fresh.clone());
    record(&run, "i0_c1", 3.0, module("P", &["b"], &[]), fresh);
    let mutate =
        json!({"operator": "mutate", "parents": ["i0_c0"], "island": 0, "module": "reward"});
    record(&run, "i1_c0", 2.0, module("M", &["m"], &[]), mutate);

    let o = serl(&["llm", "pairs", run.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let counts: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let expected = json!({"better": 1, "valid": 1, "mutation": 1, "pairs": 3, "sft": 2});
    assert_eq!(counts["modules"]["reward"], expected, "{counts}");
    assert_eq!(counts["total"], expected, "{counts}");

    let o = serl(&["llm", "pairs", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    let row = |name: &str| -> Vec<String> {
        let line = t
            .lines()
            .find(|l| l.contains(&format!(" {name} ")))
            .unwrap();
        line.split(['│', '┆'])
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect()
    };
    assert!(t.contains("better") && t.contains("SFT examples"), "{t}");
    assert_eq!(row("reward"), ["reward", "1", "1", "1", "3", "2"], "{t}");
    assert_eq!(row("all"), ["all", "1", "1", "1", "3", "2"], "{t}");

    // Two runs add up.
    let o = serl(&[
        "llm",
        "pairs",
        run.to_str().unwrap(),
        run.to_str().unwrap(),
        "--json",
    ]);
    let counts: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(counts["total"]["sft"], 4, "{counts}");

    // No run there, or one without candidate records: an error naming it.
    for name in ["missing", "empty"] {
        let path = dir.path().join(name);
        if name == "empty" {
            std::fs::create_dir_all(path.join("candidates")).unwrap();
        }
        let o = serl(&["llm", "pairs", path.to_str().unwrap()]);
        assert!(!o.status.success());
        let t = text(&o);
        assert!(
            t.contains(&path.display().to_string()) && t.contains("no candidate records"),
            "{t}"
        );
    }
}
