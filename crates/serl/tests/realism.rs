//! `serl simulate realism` from the command line: both simulators scored
//! against a LOBSTER day, their days exported and replayed exactly, the
//! same numbers for the same seed, and clear errors for bad input.

mod common;
use common::{serl, text};

use std::path::{Path, PathBuf};

/// The shared GOOG level-10 sample, or where it is missing, a level-5
/// excerpt written from the engine's synthetic stream (so the test still
/// runs every part, on a day that is not real).
fn lobster_day(dir: &Path) -> PathBuf {
    let shared = common::repo()
        .join("../shared/data/lobster-2012-06-21/LOBSTER_SampleFile_GOOG_2012-06-21_10.zip");
    if shared.exists() {
        return shared;
    }
    eprintln!(
        "note: {} not found; scoring a generated LOBSTER excerpt instead",
        shared.display()
    );
    let mut book = serl_lob::OrderBook::default();
    let mut rec = serl_lob::LobsterRecorder::new(5, 100);
    let stream = serl_lob::message_stream(40_000, 5);
    for (i, m) in stream.iter().enumerate() {
        rec.at(34_200.0 + i as f64 * 23_400.0 / stream.len() as f64);
        let _ = book.apply(m, &mut rec);
    }
    let (msg, ob) = (
        dir.join("SYN_2012-06-21_34200000_57600000_message_5.csv"),
        dir.join("SYN_2012-06-21_34200000_57600000_orderbook_5.csv"),
    );
    let (mut m, mut o) = (Vec::new(), Vec::new());
    rec.write(&mut m, &mut o).unwrap();
    std::fs::write(&msg, m).unwrap();
    std::fs::write(ob, o).unwrap();
    msg
}

fn realism(lobster: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "simulate",
        "realism",
        "--lobster",
        lobster.to_str().unwrap(),
        "--seeds",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    serl(&args)
}

#[test]
fn realism_scores_both_markets_and_their_exported_days_replay_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let day = lobster_day(tmp.path());
    let out = tmp.path().join("realism");
    let o = realism(&day, &out, &["--export"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("the agent-based market is closer than the parametric baseline on"));

    let json = common::read_json(&out.join("realism.json"));
    let stats = json["symbols"][0]["statistics"].as_array().unwrap();
    assert!(stats.len() >= 19, "{} statistics", stats.len());
    // On the generated excerpt (no shared sample) the parametric day may
    // lack an event kind, and with it one response curve.
    let real = day.to_string_lossy().contains("LOBSTER_SampleFile");
    let mut missing = 0;
    for s in stats {
        let models: Vec<&str> = s["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["model"].as_str().unwrap())
            .collect();
        let curve = s["statistic"]
            .as_str()
            .unwrap_or("")
            .starts_with("response to");
        if !real && curve && models == ["agent-based"] {
            missing += 1;
            continue;
        }
        assert_eq!(models, ["agent-based", "parametric"], "{}", s["statistic"]);
    }
    assert!(
        missing <= 2,
        "{missing} curves without the parametric day's score"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("spread given time of day"));

    // Each model's day, written in LOBSTER's format, replays through the
    // engine with every row matching.
    for model in ["agent-based", "parametric"] {
        let dir = out.join("lobster").join(model);
        let message = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_string_lossy().contains("_message_"))
            .unwrap_or_else(|| panic!("no message file in {}", dir.display()));
        let o = serl(&["lob", "replay", message.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            text(&o).contains("mismatched rows  0"),
            "{model}: {}",
            text(&o)
        );
    }

    // The same seed gives the same numbers.
    let again = tmp.path().join("again");
    assert!(realism(&day, &again, &[]).status.success());
    assert_eq!(
        std::fs::read_to_string(out.join("realism.json")).unwrap(),
        std::fs::read_to_string(again.join("realism.json")).unwrap()
    );
}

#[test]
fn realism_names_a_missing_sample_and_an_unknown_symbol() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let o = realism(&tmp.path().join("nowhere"), &out, &[]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("nowhere: no such LOBSTER file or directory"),
        "{}",
        text(&o)
    );

    let day = lobster_day(tmp.path());
    let dir = day.parent().unwrap();
    let o = realism(dir, &out, &["--symbols", "MSFT"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("no LOBSTER sample of MSFT in"),
        "{}",
        text(&o)
    );

    let bad = tmp.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join("GOOG_2012-06-21_34200000_57600000_message_1.csv"),
        "34200.1,1,1,100,notaprice,1\n",
    )
    .unwrap();
    std::fs::write(
        bad.join("GOOG_2012-06-21_34200000_57600000_orderbook_1.csv"),
        "1,1,1,1\n",
    )
    .unwrap();
    let o = realism(
        &bad.join("GOOG_2012-06-21_34200000_57600000_message_1.csv"),
        &out,
        &[],
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("message_1.csv:1: field `price`"),
        "{}",
        text(&o)
    );
}
