//! One contract for every command that writes a folder (docs/cli.md): a
//! folder that is not empty is refused unless `--force` or `--resume`;
//! the folder records the command's kind, and `serl run check` checks
//! every kind; long work shows progress in a log too; a config copied
//! away from its data and prompts says where it looked and leaves nothing
//! behind; `--trace FILE` writes any command's timeline.

use crate::common;

use common::{backtest_lean, read_json, repo, serl, text};

#[test]
fn a_second_backtest_into_the_same_folder_is_refused_and_force_starts_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bt");
    let o = backtest_lean("all", &["twap"], &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read_json(&out.join("serl-run.json"))["kind"], "backtest");
    std::fs::write(out.join("plot99.svg"), "left over").unwrap();

    let again = backtest_lean("all", &["twap"], &out, &[]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    let said = text(&again);
    assert!(
        said.contains("exists and is not empty (a backtest run)") && said.contains("--force"),
        "{said}"
    );

    let forced = backtest_lean("all", &["vwap"], &out, &["--force"]);
    assert!(forced.status.success(), "{}", text(&forced));
    assert!(
        !out.join("plot99.svg").exists(),
        "the old run's files are gone"
    );
    let check = serl(&["run", "check", out.to_str().unwrap()]);
    assert!(check.status.success(), "{}", text(&check));
    assert!(
        text(&check).contains("(backtest, finished)") && text(&check).contains("whole"),
        "{}",
        text(&check)
    );

    // --force writes over a serl run only.
    let mine = dir.path().join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "keep me").unwrap();
    let o = backtest_lean("all", &["twap"], &mine, &["--force"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("serl did not write"), "{}", text(&o));
    assert!(mine.join("notes.txt").exists());
}

#[test]
fn run_check_knows_a_training_and_says_what_a_path_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("ppo");
    let o = serl(&[
        "train",
        "--data",
        "data/lean",
        "--decision-minutes",
        "30",
        "--total-steps",
        "2048",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let check = serl(&["run", "check", run.to_str().unwrap()]);
    assert!(
        check.status.success() && text(&check).contains("(train, finished)"),
        "{}",
        text(&check)
    );
    // Resuming a finished training says so, and trains nothing again.
    let o = serl(&["train", "--resume", "--out", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("has finished before"), "{}", text(&o));
    assert_eq!(read_json(&run.join("serl-run.json"))["kind"], "train");
    // A finished training without its final policy is not whole.
    std::fs::remove_file(run.join("final.bpk")).unwrap();
    let check = serl(&["run", "check", run.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    assert!(
        text(&check).contains("problem: final.bpk: missing"),
        "{}",
        text(&check)
    );

    let missing = dir.path().join("nowhere");
    let o = serl(&["run", "check", missing.to_str().unwrap()]);
    assert!(text(&o).contains("does not exist"), "{}", text(&o));
    let o = serl(&["run", "check", repo().join("docs").to_str().unwrap()]);
    assert!(
        text(&o).contains("is not a serl run folder"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_config_copied_away_from_its_data_says_where_it_looked_and_leaves_no_folder() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("evolve.toml");
    std::fs::copy(repo().join("configs/evolve.toml"), &copy).unwrap();
    let out = dir.path().join("run");
    let o = serl(&[
        "evolve",
        "--config",
        copy.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("a relative path there is read from the config file's directory"),
        "{}",
        text(&o)
    );
    assert!(!out.exists(), "a refused run leaves no folder behind");
}

#[test]
fn a_probe_in_a_log_shows_its_progress_in_plain_lines() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    let o = serl(&["prompts", "test-model", "--out", model.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let o = serl(&[
        "prompts",
        "probe",
        "--model",
        model.to_str().unwrap(),
        "--n",
        "2",
        "--modules",
        "reward,state",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("probe: 100% (4/4 replies)"), "{said}");
}

/// Every `README, "SECTION"` a config or a doc points to is a heading of
/// the README.
#[test]
fn every_reference_to_a_readme_section_names_one_that_exists() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let headings: Vec<String> = readme
        .lines()
        .filter(|l| l.starts_with('#') && !l.starts_with("#!"))
        .map(|l| l.trim_start_matches('#').trim().to_string())
        .collect();
    let mut checked = 0;
    for folder in ["configs", "docs"] {
        for e in std::fs::read_dir(repo().join(folder)).unwrap().flatten() {
            let Ok(body) = std::fs::read_to_string(e.path()) else {
                continue;
            };
            let body = body.replace("\n# ", " ").replace('\n', " ");
            for part in body.split("README, \"").skip(1) {
                let Some(section) = part.split('"').next() else {
                    continue;
                };
                checked += 1;
                assert!(
                    headings.iter().any(|h| h == section),
                    "{} points to the README's section \"{section}\", which does not exist",
                    e.path().display()
                );
            }
        }
    }
    assert!(checked > 0, "no reference found: the test reads nothing");
}

/// `--trace FILE` writes a trace in the Chrome trace-event format (what
/// Perfetto and chrome://tracing open): every slice that begins ends, on
/// its own thread, in time order, and the training's phases are there.
#[test]
fn trace_writes_the_runs_timeline_as_trace_events() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    let o = serl(&[
        "--trace",
        trace.to_str().unwrap(),
        "train",
        "--data",
        "data/lean",
        "--total-steps",
        "2048",
        "--decision-minutes",
        "30",
        "--out",
        dir.path().join("run").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let events: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let mut open: std::collections::HashMap<u64, Vec<String>> = Default::default();
    let mut last_ts: std::collections::HashMap<u64, f64> = Default::default();
    let mut names = std::collections::BTreeSet::new();
    for e in &events {
        let (ph, tid) = (e["ph"].as_str().unwrap(), e["tid"].as_u64().unwrap());
        let name = e["name"].as_str().unwrap().to_string();
        if ph == "M" {
            continue;
        }
        let ts = e["ts"].as_f64().unwrap();
        assert!(ts >= last_ts.get(&tid).copied().unwrap_or(0.0), "{e}");
        last_ts.insert(tid, ts);
        match ph {
            "B" => open.entry(tid).or_default().push(name.clone()),
            "E" => assert_eq!(
                open.get_mut(&tid).and_then(Vec::pop),
                Some(name.clone()),
                "{e}"
            ),
            other => panic!("unexpected phase {other}: {e}"),
        }
        names.insert(name);
    }
    assert!(
        open.values().all(Vec::is_empty),
        "slices left open: {open:?}"
    );
    for name in ["load", "training", "update"] {
        assert!(names.contains(name), "{name} not in {names:?}");
    }
    // The command's own thread is its process's main thread for Perfetto
    // (thread id = process id), and no thread is numbered 0 (Perfetto
    // draws such a one's slices on the main thread's row).
    let main = events
        .iter()
        .find(|e| e["name"] == "thread_name" && e["args"]["name"] == "main")
        .expect("the main thread named");
    assert_eq!(main["tid"], main["pid"], "{main}");
    assert!(events.iter().all(|e| e["tid"] != 0), "a thread numbered 0");
    // A slice's arguments are on its beginning only (a viewer warns of
    // each pair that repeats them on the end).
    assert!(
        events
            .iter()
            .all(|e| e["ph"] != "E" || e.get("args").is_none()),
        "an end with arguments"
    );
    // A slice named by its label carries the label as written, unquoted.
    let load = events.iter().find(|e| e["name"] == "load").unwrap();
    assert_eq!(load["args"]["label"], "load", "{load}");

    let o = serl(&[
        "--trace",
        "/nonexistent/dir/t.json",
        "data",
        "inspect",
        "data/lean",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("--trace /nonexistent/dir/t.json: cannot write the trace there"),
        "{}",
        text(&o)
    );
}
