//! `[evolve.budget]` on the bundled data: a search whose training seconds
//! run out stops designing, says so, and resumes to the same decision.

mod common;

use common::{serl, text, tiny_config_from};

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
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
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
