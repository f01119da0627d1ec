//! Golden runs: the README's quick evolve run, and a policy trained by
//! `serl train` then backtested, on the bundled data, give exactly the test
//! tables of the `summary.json` files recorded in `tests/golden/` (every
//! recorded section but the provenance, byte for byte).
//!
//! The tables were recorded at commit 84a5121, before the architecture
//! change of issue #17, so a refactor that changes any number fails here.
//! A change meant to change the numbers records them again:
//! `SERL_BLESS=1 cargo test -p serl --test commands golden::`, and says why in its
//! commit.

use crate::common;

use common::{repo, serl, text};
use std::path::Path;

/// The sections of `summary.json` the golden records hold: the test
/// tables, the paired differences, the illusory gains and the per-symbol
/// means. Sections added since (the day-level tests) are checked by their
/// own tests; the provenance (dates, commit, paths) always differs.
const RECORDED: [&str; 4] = [
    "summaries",
    "paired_vs_twap",
    "illusory_gain",
    "pa_by_symbol",
];

/// The recorded sections of `summary.json`, pretty printed.
fn tables(summary: &Path) -> String {
    let json = std::fs::read_to_string(summary).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let kept: serde_json::Map<String, serde_json::Value> = RECORDED
        .iter()
        .map(|k| (k.to_string(), v[*k].clone()))
        .collect();
    serde_json::to_string_pretty(&kept).unwrap() + "\n"
}

fn check(golden: &str, summary: &Path) {
    let path = repo().join("crates/serl/tests/golden").join(golden);
    if std::env::var_os("SERL_BLESS").is_some() {
        std::fs::copy(summary, &path).unwrap();
        return;
    }
    let (got, want) = (tables(summary), tables(&path));
    assert!(
        got == want,
        "{} differs from {}:\n{got}",
        summary.display(),
        path.display()
    );
}

#[test]
fn the_quick_evolve_run_gives_the_recorded_test_table() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("evolve");
    let o = serl(&[
        "evolve",
        "--config",
        "configs/evolve.toml",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    check("evolve-test.json", &run.join("test/summary.json"));
    the_readme_says_what_the_quick_run_did(&run, &text(&o));
}

/// The README's words about the quick run (candidates trained, decisions
/// a day) are what the run did and what its config says.
fn the_readme_says_what_the_quick_run_did(run: &Path, said: &str) {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let readme = squash(&std::fs::read_to_string(repo().join("README.md")).unwrap());
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let trained: usize = report
        .split(" candidates trained")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the report counts the candidates trained");
    assert!(
        readme.contains(&format!("so {trained} candidates trained")),
        "the README should say the quick run trains {trained} candidates"
    );
    // Its progress counts what the README counts (in a log, plain lines).
    assert!(
        said.contains(&format!("evolve: 100% ({trained}/{trained} candidates)")),
        "the progress should count {trained} candidates:\n{said}"
    );
    // One test day: said once, with the config that has enough.
    let once = "the test split has 1 day: too few for a day-level verdict";
    assert_eq!(said.matches(once).count(), 1, "{said}");
    assert!(
        readme.contains("one test day"),
        "the README should say the quick run tests on one day"
    );
    let config: toml::Value =
        toml::from_str(&std::fs::read_to_string(repo().join("configs/evolve.toml")).unwrap())
            .unwrap();
    let minutes = config["env"]["decision_minutes"].as_integer().unwrap();
    let decisions = 390 / minutes;
    assert!(
        readme.contains(&format!("{decisions} decisions a day")),
        "the README should say the quick run makes {decisions} decisions a day"
    );
    let out = std::fs::read_to_string(repo().join("configs/evolve.toml")).unwrap();
    assert!(
        out.contains(&format!("({trained} trained)")),
        "configs/evolve.toml's header should count {trained} trainings"
    );
}

#[test]
fn a_trained_policy_gives_the_recorded_backtest_table() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("ppo");
    let o = serl(&[
        "train",
        "--data",
        "data/lean",
        "--total-steps",
        "8192",
        "--decision-minutes",
        "30",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let test = dir.path().join("test");
    let policy = format!("policy:{}", run.display());
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--split",
        "test",
        "--decision-minutes",
        "30",
        "--strategy",
        "twap",
        "--strategy",
        "vwap",
        "--strategy",
        &policy,
        "--env",
        "both",
        "--out",
        test.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    check("train-backtest.json", &test.join("summary.json"));
}
