//! What the `serl` binary tells a user beside its results: errors that
//! name the bad setting and its place, logs and progress fit for a file,
//! and what to do after an interrupted run.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{serl, text};

#[test]
fn a_negative_number_is_read_and_refused_as_not_positive() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    for (cmd, flag) in [
        ("backtest", "--qty-adv"),
        ("backtest", "--qty-shares"),
        ("train", "--qty-adv"),
    ] {
        let o = serl(&[cmd, "--data", "data/lean", flag, "-1", "--out", out]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd} {flag}: {t}");
        assert!(
            t.contains(flag) && t.contains("must be positive, got -1"),
            "{cmd} {flag}: {t}"
        );
        assert!(!t.contains("unexpected argument"), "{cmd} {flag}: {t}");
    }
}

#[test]
fn a_strategy_keeps_the_name_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let o = common::backtest_lean("test", &["peg-mid", "pov"], dir.path(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let summary = common::read_json(&dir.path().join("summary.json"));
    let names: Vec<&str> = summary["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["strategy"].as_str().unwrap())
        .collect();
    // Another name is kept as typed; a default parameter is spelled out.
    assert!(
        names.contains(&"peg-mid") && names.contains(&"pov:0.05"),
        "{names:?}"
    );
    let csv = std::fs::read_to_string(dir.path().join("orders.csv")).unwrap();
    assert!(
        csv.contains("peg-mid") && !csv.contains("twap-passive:mid"),
        "{csv}"
    );
}

#[test]
fn config_errors_name_the_file_the_line_and_the_forms_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad-reward.toml");
    std::fs::write(
        &cfg,
        "# a reward with a syntax error\n\nreward = \"step_pa - 2 * (remaining_inv\"\n[env]\ndecision_minutes = 30\n",
    )
    .unwrap();
    let o = serl(&[
        "train",
        "--config",
        cfg.to_str().unwrap(),
        "--data",
        "data/lean",
        "--out",
        dir.path().join("run").to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("bad-reward.toml, line 3: reward ="), "{t}");
    assert!(t.contains("column"), "the place in the program: {t}");

    let orders = dir.path().join("orders.toml");
    std::fs::write(&orders, "quantity = 0.01\n").unwrap();
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--strategy",
        "twap",
        "--orders",
        orders.to_str().unwrap(),
        "--out",
        dir.path().join("bt").to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("orders.toml")
            && t.contains("{ adv_fraction = 0.01 }")
            && t.contains("{ shares = 5000 }"),
        "{t}"
    );
}

/// `serl train` arguments for a short run into `run`: updates of 2048
/// steps (8 environments × 256 decisions at 30 minutes).
fn train_args<'a>(run: &'a str, steps: &'a str) -> Vec<&'a str> {
    vec![
        "train",
        "--data",
        "data/lean",
        "--out",
        run,
        "--total-steps",
        steps,
        "--decision-minutes",
        "30",
    ]
}

fn metrics_lines(run: &Path) -> usize {
    std::fs::read_to_string(run.join("metrics.jsonl")).map_or(0, |t| t.lines().count())
}

#[test]
fn a_train_in_a_log_shows_progress_without_colour_and_resumes_to_a_new_total() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let run_s = run.to_str().unwrap();
    let o = serl(&train_args(run_s, "4096"));
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("train: 50% (2048/4096 steps)")),
        "plain progress lines in a log: {err}"
    );

    // Another total for a resumed run continues it to that total, and is
    // kept for the next resume. Without the optimiser's moments the
    // resume logs a warning: without colour, since stderr is a pipe.
    std::fs::remove_file(run.join("checkpoint/fused-optim.json")).unwrap();
    let o = serl(&["train", "--resume", "--out", run_s, "--total-steps", "8192"]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("WARN") && err.contains("optimiser starts afresh"),
        "{err}"
    );
    assert!(!err.contains("\x1b["), "colour escapes in a log: {err:?}");
    assert_eq!(metrics_lines(&run), 4);
    let saved = std::fs::read_to_string(run.join("train.toml")).unwrap();
    assert!(saved.contains("total_steps = 8192"), "{saved}");

    // A total below what is trained, or a setting a resume cannot change,
    // is refused by name.
    let o = serl(&["train", "--resume", "--out", run_s, "--total-steps", "2048"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("--total-steps 2048") && text(&o).contains("already trained 8192"),
        "{}",
        text(&o)
    );
    let o = serl(&["train", "--resume", "--out", run_s, "--seed", "3"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("the command line would change train.seed (the run has"),
        "{}",
        text(&o)
    );
}

#[test]
fn an_interrupted_train_says_how_to_resume_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let run_s = run.to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(train_args(run_s, "10000000"))
        .current_dir(common::repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while metrics_lines(&run) == 0 {
        if t0.elapsed() > Duration::from_secs(300) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("no update written: {}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let kill = |signal: &str, pid: u32| {
        Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap()
    };
    assert!(kill("-INT", child.id()).success());
    // A run that ignored the signal would train for hours: end it.
    let pid = child.id();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(240));
        kill("-KILL", pid);
    });
    let o = child.wait_with_output().unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(130), "{t}");
    assert!(
        t.contains(&format!(
            "interrupted: resume with `serl train --resume --out {run_s}`"
        )),
        "{t}"
    );
    // It stopped once an update was saved: the checkpoint holds them all.
    let state = common::read_json(&run.join("checkpoint/state.json"));
    assert_eq!(state["update"].as_u64(), Some(metrics_lines(&run) as u64));
}
