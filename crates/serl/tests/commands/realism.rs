//! `serl simulate realism` from the command line: both simulators scored
//! against a LOBSTER day, their days exported and replayed exactly, the
//! same numbers for the same seed, and clear errors for bad input.

use crate::common;
use common::{serl, text, BUNDLED_DAY};

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
    synthetic_day(dir, 40_000).0
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
    assert!(
        text(&o).contains("the queue-reactive market is closer than the parametric baseline on")
    );

    let json = common::read_json(&out.join("realism.json"));
    let symbol = &json["symbols"][0];
    assert_eq!(symbol["held_out"]["window"], "12:45–16:00");
    assert_eq!(symbol["in_sample"]["window"], "09:30–12:45");
    // On the generated excerpt (no shared sample) the parametric day may
    // lack an event kind, and with it one response curve.
    let real = day.to_string_lossy().contains("LOBSTER_SampleFile");
    let mut missing = 0;
    let stats = symbol["held_out"]["statistics"].as_array().unwrap();
    assert!(stats.len() >= 19, "{} statistics", stats.len());
    let in_sample = symbol["in_sample"]["statistics"].as_array().unwrap();
    assert_eq!(in_sample.len(), stats.len());
    for s in stats.iter().chain(in_sample) {
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
        if !real && curve && models.len() < 3 {
            missing += 1;
            continue;
        }
        assert_eq!(
            models,
            ["agent-based", "queue-reactive", "parametric"],
            "{}",
            s["statistic"]
        );
    }
    assert!(
        missing <= 4,
        "{missing} curves without the parametric day's score"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("spread given time of day"));

    // Each model's two parts, written in LOBSTER's format under the
    // parts' windows, replay through the engine with every row matching.
    for model in ["agent-based", "queue-reactive", "parametric"] {
        let dir = out.join("lobster").join(model);
        let mut messages: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains("_message_"))
            .collect();
        messages.sort();
        let names: Vec<String> = messages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(
            names[0].contains("_34200000_45900000_message_"),
            "{names:?}"
        );
        assert!(
            names[1].contains("_45900000_57600000_message_"),
            "{names:?}"
        );
        for message in &messages {
            let o = serl(&["lob", "replay", message.to_str().unwrap()]);
            assert!(o.status.success(), "{}", text(&o));
            assert!(
                text(&o).contains("mismatched rows  0"),
                "{model}: {}",
                text(&o)
            );
            // Written as DBN MBO, a level-L day reads back; the messages
            // LOBSTER's rule left out (deeper than L) are orders it never
            // added, which the command counts.
            let dbn = message.with_extension("dbn");
            let o = serl(&[
                "lob",
                "export",
                message.to_str().unwrap(),
                "--dbn",
                dbn.to_str().unwrap(),
            ]);
            assert!(o.status.success(), "{model}: {}", text(&o));
            assert!(
                text(&o).contains("mismatched rows  0") || text(&o).contains("never added"),
                "{model}: {}",
                text(&o)
            );
        }
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

/// Writes a level-5 LOBSTER day of `n` synthetic messages over the
/// session, as `SYN_…` files in `dir`.
fn synthetic_day(dir: &Path, n: usize) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let mut book = serl_lob::OrderBook::default();
    let mut rec = serl_lob::LobsterRecorder::new(5, 100);
    let stream = serl_lob::message_stream(n, 5);
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
    std::fs::write(&ob, o).unwrap();
    (msg, ob)
}

/// The lines of a message file and its order-book file whose message
/// time is before (`true`) or from (`false`) 12:45.
fn lines_of(files: &(PathBuf, PathBuf), morning: bool) -> (String, String) {
    let messages = std::fs::read_to_string(&files.0).unwrap();
    let rows = std::fs::read_to_string(&files.1).unwrap();
    let (mut m, mut o) = (String::new(), String::new());
    for (message, row) in messages.lines().zip(rows.lines()) {
        let time: f64 = message.split(',').next().unwrap().parse().unwrap();
        if (time < 45_900.0) == morning {
            m.push_str(message);
            m.push('\n');
            o.push_str(row);
            o.push('\n');
        }
    }
    (m, o)
}

/// The split is honest: two days with the same morning and different
/// afternoons give the same calibrated models, so the same simulated
/// afternoons and the same in-sample scores, but different held-out
/// scores. Nothing of the afternoon reaches the calibration.
#[test]
fn nothing_of_the_held_out_afternoon_reaches_the_calibration() {
    let tmp = tempfile::tempdir().unwrap();
    let one = synthetic_day(&tmp.path().join("one"), 30_000);
    let other = synthetic_day(&tmp.path().join("other"), 24_000);
    // `mixed`: the first day's morning, the second day's afternoon.
    let (morning, afternoon) = (lines_of(&one, true), lines_of(&other, false));
    let mixed = tmp.path().join("mixed");
    std::fs::create_dir_all(&mixed).unwrap();
    for (path, (a, b)) in [
        (&one.0, (&morning.0, &afternoon.0)),
        (&one.1, (&morning.1, &afternoon.1)),
    ] {
        std::fs::write(mixed.join(path.file_name().unwrap()), format!("{a}{b}")).unwrap();
    }
    let runs = [
        ("one", &one.0),
        ("mixed", &mixed.join(one.0.file_name().unwrap())),
    ];
    let mut outs = Vec::new();
    for (name, day) in runs {
        let out = tmp.path().join(format!("out-{name}"));
        let o = realism(day, &out, &["--export"]);
        assert!(o.status.success(), "{}", text(&o));
        outs.push(out);
    }
    let json = |out: &Path| common::read_json(&out.join("realism.json"))["symbols"][0].clone();
    let (a, b) = (json(&outs[0]), json(&outs[1]));
    assert_eq!(
        a["in_sample"], b["in_sample"],
        "the morning's scores differ"
    );
    assert_ne!(
        a["held_out"]["statistics"], b["held_out"]["statistics"],
        "the afternoons differ, so should their scores"
    );
    for model in ["agent-based", "queue-reactive", "parametric"] {
        let read = |out: &Path| {
            let dir = out.join("lobster").join(model);
            let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            files
                .iter()
                .map(|p| std::fs::read(p).unwrap())
                .collect::<Vec<_>>()
        };
        assert!(
            read(&outs[0]) == read(&outs[1]),
            "{model}: the simulated parts depend on the held-out afternoon"
        );
    }
}

fn fills(lobster: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "simulate",
        "fills",
        "--lobster",
        lobster.to_str().unwrap(),
        "--seeds",
        "1",
        "--every",
        "35",
        "--sizes",
        "100",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    serl(&args)
}

#[test]
fn fills_probes_every_venue_with_the_same_orders_and_the_same_numbers_each_time() {
    let tmp = tempfile::tempdir().unwrap();
    let day = lobster_day(tmp.path());
    let out = tmp.path().join("fills");
    let o = fills(&day, &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("at the touch, filled within 5 / 30 minutes: LOBSTER queue"));
    // Both halves of the aim: the fills and the adverse move after them.
    assert!(text(&o).contains("from bars only (the training venue)"));
    assert!(text(&o).contains("of 6 (level, horizon) pairs"));
    assert!(text(&o).contains("the aim: within 2x of the queue's"));

    // 11 times from 09:35 to 15:25, both sides: 22 probes per level in
    // every venue (the queue-reactive flow's too), each with a price on
    // its own side of the mid.
    let json = common::read_json(&out.join("fills.json"));
    let venues = &json["symbols"][0]["venues"];
    for venue in [
        "LOBSTER queue",
        "dynamic market (day's order flow)",
        "dynamic market (bars only)",
        "bar rule",
        "queue-reactive flow (day's messages)",
    ] {
        for level in ["touch", "touch+1"] {
            let all = &venues[venue][level]["all"];
            assert!(
                all["probes"].as_u64().unwrap() >= 20,
                "{venue} {level}: {all}"
            );
            let p: Vec<f64> = all["filled_within"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            assert!(
                p[0] <= p[1] && p[1] <= p[2] && p[2] <= 1.0,
                "{venue} {level}: {p:?}"
            );
        }
    }
    let csv = std::fs::read_to_string(out.join("probes.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 5 * 44);
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 14, "{line}");
        let (Ok(price), Ok(mid)) = (f[7].parse::<f64>(), f[8].parse::<f64>()) else {
            continue;
        };
        let sign = if f[3] == "buy" { 1.0 } else { -1.0 };
        assert!(
            sign * (mid - price) > 0.0,
            "a resting probe crosses: {line}"
        );
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| touch+1 | bar rule |"), "{report}");
    assert!(std::fs::read_to_string(out.join("report.html"))
        .unwrap()
        .contains("<svg"));

    // The same seed gives the same probes' fills.
    let again = tmp.path().join("again");
    assert!(fills(&day, &again, &[]).status.success());
    assert_eq!(
        std::fs::read_to_string(again.join("probes.csv")).unwrap(),
        csv
    );

    // A probe of no shares is refused by name.
    let o = fills(&day, &tmp.path().join("zero"), &["--sizes", "0"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--sizes"), "{}", text(&o));
}

/// `serl simulate calibrate` fits the queue-reactive flow to a LOBSTER
/// day and writes a model file; a market config that names it simulates
/// a bundled day with that flow in place of the agents; a file that is
/// not a model is refused by name.
#[test]
fn calibrate_writes_a_queue_reactive_model_that_a_market_config_names() {
    let tmp = tempfile::tempdir().unwrap();
    let day = lobster_day(tmp.path());
    let models = tmp.path().join("qr");
    let calibrate = |extra: &[&str]| {
        let mut args = vec![
            "simulate",
            "calibrate",
            "--lobster",
            day.to_str().unwrap(),
            "--until",
            "12:45",
            "--out",
            models.to_str().unwrap(),
        ];
        args.extend(extra);
        serl(&args)
    };
    let o = calibrate(&[]);
    assert!(o.status.success(), "{}", text(&o));
    let file = std::fs::read_dir(&models)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let model = common::read_json(&file);
    assert_eq!(model["format"], 1);
    assert!(model["source"].as_str().unwrap().contains("before 12:45"));
    assert!(
        model["market"][1].as_f64().unwrap() > 0.0,
        "{}",
        model["market"]
    );
    the_dynamic_environment_steps_the_fitted_flow(&file);
    a_day_of_the_fitted_flow_exports_as_dbn_and_calibrates_again(&file, tmp.path());

    let again = calibrate(&[]);
    assert!(!again.status.success());
    assert!(text(&again).contains("--force"), "{}", text(&again));
    assert!(calibrate(&["--force"]).status.success());

    let config = tmp.path().join("market.toml");
    let simulate = |config: &Path| {
        let out = tmp.path().join("sim");
        let run = [
            "--seeds",
            "2",
            "--config",
            config.to_str().unwrap(),
            "--force",
            "--out",
            out.to_str().unwrap(),
        ];
        serl(&[&["simulate"], &BUNDLED_DAY[..], &run].concat())
    };
    std::fs::write(
        &config,
        format!("[market]\nqueue_reactive = {:?}\n", file.to_str().unwrap()),
    )
    .unwrap();
    let o = simulate(&config);
    assert!(o.status.success(), "{}", text(&o));
    // The flow's volume is fitted to the day's, as the agents' is.
    assert!(text(&o).contains("PASS daily volume"), "{}", text(&o));
    let written = common::read_json(&tmp.path().join("sim/calibration.json"));
    assert_eq!(
        written["market"]["queue_reactive"]["format"], 1,
        "the run's config holds the model"
    );

    std::fs::write(&config, "[market]\nqueue_reactive = \"Cargo.toml\"\n").unwrap();
    let o = simulate(&config);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("Cargo.toml: not a queue-reactive model")
            && text(&o).contains("market.toml"),
        "{}",
        text(&o)
    );
}

/// The dynamic environment stepped with the fitted flow in place of the
/// agents (`serl bench env --queue-reactive`), and a model file that is
/// not there refused by name.
fn the_dynamic_environment_steps_the_fitted_flow(file: &Path) {
    let o = serl(&[
        "bench",
        "env",
        "--runs",
        "1",
        "--queue-reactive",
        file.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let figures: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rate = &figures["dynamic_queue_reactive_steps_per_second_one_core"];
    assert!(rate.as_f64().is_some_and(|r| r > 0.0), "{figures}");
    let o = serl(&["bench", "env", "--queue-reactive", "no-such-model.json"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("no-such-model.json"), "{}", text(&o));
}

/// A day of the fitted flow, every order recorded, written as DBN MBO and
/// read back: the same book after every message; its book written as
/// MBP-10 too, every record matching the book the engine replays from the
/// MBO file; the DBN day is a day like any other, calibrated on again.
fn a_day_of_the_fitted_flow_exports_as_dbn_and_calibrates_again(file: &Path, tmp: &Path) {
    let dbn = tmp.join("qr-day.mbo.dbn");
    let mbp = tmp.join("qr-day.mbp-10.dbn");
    let o = serl(&[
        "lob",
        "export",
        "--queue-reactive",
        file.to_str().unwrap(),
        "--until",
        "10:30",
        "--mid",
        "580.00",
        "--dbn",
        dbn.to_str().unwrap(),
        "--mbp",
        mbp.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("mismatched rows  0"), "{}", text(&o));
    assert!(text(&o).contains("mismatched records  0"), "{}", text(&o));
    assert!(!text(&o).contains("never added"), "{}", text(&o));
    let o = serl(&[
        "lob",
        "mbp",
        dbn.to_str().unwrap(),
        mbp.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let check: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (check["mismatched"].as_u64(), check["depth"].as_u64()),
        (Some(0), Some(10))
    );
    assert!(check["compared"].as_u64().unwrap() > 1_000, "{check}");
    let o = serl(&[
        "simulate",
        "calibrate",
        "--lobster",
        dbn.to_str().unwrap(),
        "--out",
        tmp.join("from-dbn").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // Every order of the day is in the file: its book never crosses.
    assert!(!text(&o).contains("crossed"), "{}", text(&o));
}
