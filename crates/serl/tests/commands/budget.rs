//! `[evolve.budget]` on the bundled data: a search whose training seconds
//! run out stops designing, says so, and resumes to the same decision.

use crate::common;

use common::{read_json, serl, text, tiny_config_from};

/// The keys of the candidates a run stored.
fn candidates(run: &std::path::Path) -> Vec<String> {
    let mut keys: Vec<String> = std::fs::read_dir(run.join("candidates"))
        .unwrap()
        .flatten()
        .map(|e| {
            e.file_name()
                .to_string_lossy()
                .trim_end_matches(".json")
                .to_string()
        })
        .collect();
    keys.sort();
    keys
}

#[test]
fn a_spent_budget_stops_the_search_and_a_resumed_run_stops_at_the_same_place() {
    let dir = tempfile::tempdir().unwrap();
    // Any training spends more than a millisecond: one iteration, then
    // the budget is gone.
    let cfg = tiny_config_from(
        dir.path(),
        "configs/evolve.toml",
        "\n[evolve.budget]\nseconds = 0.001\n",
    );
    let run = dir.path().join("run");
    let o = common::evolve_ok(&cfg, &run);
    assert!(
        text(&o).contains("[evolve.budget] spent after 1 iterations"),
        "{}",
        text(&o)
    );
    let first = candidates(&run);
    assert!(
        first
            .iter()
            .all(|k| k.starts_with("i0_") || k.starts_with("ll0_") || k == "baseline"),
        "{first:?}"
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("candidates' training seconds"), "{report}");

    let again = serl(&["evolve", "--resume", run.to_str().unwrap()]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(text(&again).contains("spent after 1 iterations"));
    assert_eq!(candidates(&run), first);

    // A budget that cannot be met is named.
    let bad = tiny_config_from(
        dir.path(),
        "configs/evolve.toml",
        "\n[evolve.budget]\nseconds = 0\n",
    );
    let o = serl(&[
        "evolve",
        "--config",
        bad.to_str().unwrap(),
        "--out",
        dir.path().join("bad").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("evolve.budget.seconds must be above 0"),
        "{}",
        text(&o)
    );
}

/// The candidates a run stored, parsed.
fn stored(run: &std::path::Path) -> Vec<serde_json::Value> {
    candidates(run)
        .iter()
        .map(|k| read_json(&run.join("candidates").join(format!("{k}.json"))))
        .collect()
}

#[test]
fn the_prescreen_trains_each_design_briefly_first_and_stops_the_ones_far_below_plain_ppo() {
    let dir = tempfile::tempdir().unwrap();
    // A margin no design can miss: every design is screened and trains in full.
    let lenient = tiny_config_from(
        dir.path(),
        "configs/evolve.toml",
        "\n[evolve.budget.prescreen]\nsteps = 512\nvalidation_orders = 8\nmargin = 1000\n",
    );
    let run = dir.path().join("lenient");
    common::evolve_ok(&lenient, &run);
    let designed: Vec<serde_json::Value> = stored(&run)
        .into_iter()
        .filter(|c| c["key"].as_str().unwrap().starts_with('i'))
        .collect();
    assert!(!designed.is_empty());
    for c in &designed {
        assert_eq!(c["prescreen"]["passed"], true, "{c}");
        assert!(c["score"].is_number(), "trained in full: {c}");
        let key = c["key"].as_str().unwrap();
        assert!(run
            .join("scores")
            .join(format!("screen-{key}.json"))
            .exists());
    }
    assert!(run.join("scores").join("screen-baseline.json").exists());
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("Pre-screen"), "{report}");

    // A margin no design can meet: every design stops after its short
    // run, and with nothing trained in full there is no best design.
    let strict = tiny_config_from(dir.path(), "configs/evolve.toml", "");
    let text_cfg = std::fs::read_to_string(&strict).unwrap().replace(
        "[evolve.low_level]",
        "[evolve.budget.prescreen]\nsteps = 512\nvalidation_orders = 8\nmargin = -1000\n\n[evolve.low_level]",
    );
    std::fs::write(&strict, text_cfg).unwrap();
    let run = dir.path().join("strict");
    let o = serl(&[
        "evolve",
        "--config",
        strict.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("no candidate was valid"), "{}", text(&o));
    for c in stored(&run)
        .iter()
        .filter(|c| c["key"].as_str().unwrap().starts_with('i'))
    {
        assert_eq!(c["prescreen"]["passed"], false, "{c}");
        assert!(c["score"].is_null() && c["design"].is_object(), "{c}");
    }
}
