//! The `serl` binary as a user runs it: the README's commands on the
//! bundled data, and the errors a user sees for bad input.

use crate::common;

use common::{serl, text, BUNDLED_DAY};

#[test]
fn data_inspect_prints_the_bundled_catalog() {
    let o = serl(&["data", "inspect", "data/lean"]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("24 over 6 dates") && t.contains("SPY"), "{t}");
    let o = serl(&["data", "inspect", "data/lean", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["symbols"], 4);
}

#[test]
fn data_validate_exits_1_on_broken_files_and_names_them() {
    let o = serl(&["data", "validate", "crates/serl-data/tests/fixtures"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("BADNUM.csv:5: error in field `close`"), "{t}");
    assert!(serl(&["data", "validate", "data/lean"]).status.success());
}

#[test]
fn backtest_reports_each_horizon_and_corrects_the_day_tests_across_them() {
    let out = tempfile::tempdir().unwrap();
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--split",
        "all",
        "--orders",
        "configs/orders-horizons.toml",
        "--strategy",
        "twap",
        "--strategy",
        "ac",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let summary = common::read_json(&out.path().join("summary.json"));
    let rows = summary["by_horizon"].as_array().unwrap();
    let horizons: std::collections::BTreeSet<u64> = rows
        .iter()
        .map(|r| r["horizon_min"].as_u64().unwrap())
        .collect();
    assert_eq!(horizons.into_iter().collect::<Vec<_>>(), [30, 60, 120, 390]);
    assert!(
        rows.iter().all(|r| r["orders"].as_u64() == Some(48)),
        "48 orders per horizon"
    );
    // AC against TWAP: pooled and per horizon, five tests corrected together.
    let tests = summary["day_tests"].as_array().unwrap();
    assert_eq!(tests.len(), 5);
    let min_p = tests
        .iter()
        .map(|t| t["p_value"].as_f64().unwrap())
        .fold(1.0, f64::min);
    assert!(tests
        .iter()
        .all(|t| t["q_value"].as_f64().unwrap() >= min_p));
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(
        md.contains("## By horizon") && md.contains("| 120 min |"),
        "{md}"
    );
    let csv = std::fs::read_to_string(out.path().join("orders.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.split(',').any(|c| c == "horizon_min"), "{header}");
}

#[test]
fn backtest_on_bundled_data_writes_a_report() {
    let out = tempfile::tempdir().unwrap();
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--split",
        "all",
        "--strategy",
        "twap",
        "--strategy",
        "vwap",
        "--strategy",
        "ac",
        "--strategy",
        "oracle",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    for f in ["orders.csv", "summary.json", "report.md", "report.html"] {
        assert!(out.path().join(f).exists(), "{f}");
    }
    let csv = std::fs::read_to_string(out.path().join("orders.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        1 + 48 * 4,
        "header + 48 orders x 4 strategies"
    );
    // Baselines only: each against TWAP with the day as the unit (the
    // oracle, which trades with hindsight, is no baseline and not tested).
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap())
            .unwrap();
    let tests = summary["day_tests"].as_array().unwrap();
    let pairs: Vec<(&str, &str)> = tests
        .iter()
        .map(|t| {
            (
                t["strategy"].as_str().unwrap(),
                t["reference"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(pairs, [("ac:1e-7", "twap"), ("vwap", "twap")]);
    for t in tests {
        assert_eq!(t["days"], 6, "{t}");
        assert_eq!(t["symbol_days"], 24, "{t}");
        let (p, q) = (
            t["p_value"].as_f64().unwrap(),
            t["q_value"].as_f64().unwrap(),
        );
        assert!((0.0..=1.0).contains(&p) && q >= p && q <= 1.0, "{t}");
    }
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(md.contains("## Day by day against each baseline"), "{md}");
}

#[test]
fn bad_backtest_input_is_a_clear_error() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    // The report would go beside the config, in a folder of its own.
    let bt = out.path().join("bt");
    let bt = bt.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--strategy", "twapp"], "unknown strategy `twapp`"),
        (
            &["--strategy", "twap", "--symbol", "MSFT"],
            "unknown symbol `MSFT`",
        ),
        (
            &["--strategy", "twap", "--qty-shares", "0"],
            "must be positive, got 0",
        ),
        (&["--strategy", &format!("policy:{dir}")], "checkpoint.json"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["backtest", "--data", "data/lean", "--out", bt];
        args.extend_from_slice(extra);
        let o = serl(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
    }
    let cfg = out.path().join("window.toml");
    std::fs::write(&cfg, "[orders]\nstart = \"08:00\"\n").unwrap();
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--strategy",
        "twap",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        bt,
    ]);
    assert!(text(&o).contains("outside the session"), "{}", text(&o));
    std::fs::write(&cfg, "[env]\ndecision_minuets = 5\n").unwrap();
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--strategy",
        "twap",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        bt,
    ]);
    assert!(
        text(&o).contains("decision_minuets") && text(&o).contains("window.toml"),
        "{}",
        text(&o)
    );
}

#[test]
fn lob_replay_of_a_missing_file_is_a_clear_error() {
    let o = serl(&["lob", "replay", "nope_message_1.csv"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("nope_orderbook_1.csv"), "{}", text(&o));
}

#[test]
fn simulate_writes_a_checked_report_for_a_bundled_day() {
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().to_str().unwrap();
    // A symbol is found whatever its case.
    let mut day = BUNDLED_DAY;
    day[3] = "spy";
    let o = serl(&[&["simulate"], &day[..], &["--out", out_dir]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let checks: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("checks.json")).unwrap())
            .unwrap();
    assert_eq!(checks["calibration"].as_array().unwrap().len(), 5);
    assert_eq!(checks["stylized_facts"].as_array().unwrap().len(), 6);
    // Over the default 20 seeds, the day matches the real one (open,
    // volume, its U shape, volatility, spread) and every stylized fact
    // holds.
    for c in checks["calibration"]
        .as_array()
        .unwrap()
        .iter()
        .chain(checks["stylized_facts"].as_array().unwrap())
    {
        assert_eq!(c["pass"], true, "{c}");
    }
    for file in ["report.html", "minutes.csv", "tape.csv", "book.csv"] {
        assert!(out.path().join(file).exists(), "{file}");
    }
    // The tape is the first seed's trades; the book has one row per minute.
    let tape = std::fs::read_to_string(out.path().join("tape.csv")).unwrap();
    assert!(tape.starts_with("time_us,price,qty,aggressor,taker_owner,maker_owner\n"));
    assert!(tape.lines().count() > 1_000);
    let book = std::fs::read_to_string(out.path().join("book.csv")).unwrap();
    assert_eq!(book.lines().count(), 1 + 390);
    let o = serl(&[
        "simulate",
        "--data",
        "data/lean",
        "--symbol",
        "SPY",
        "--date",
        "2013-10-12",
        "--out",
        out.path().join("no-session").to_str().unwrap(),
    ]);
    assert!(
        text(&o).contains("no session of SPY on 2013-10-12; it has 2013-10-04"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_larger_metaorder_moves_the_price_more_but_less_than_in_proportion() {
    let out = tempfile::tempdir().unwrap();
    let impact =
        |extra: &[&str]| serl(&[&["simulate", "impact"], &BUNDLED_DAY[..], extra].concat());
    let o = impact(&[
        "--seeds",
        "8",
        "--sizes",
        "0.01,0.05,0.2",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let study: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("impact.json")).unwrap())
            .unwrap();
    let peaks: Vec<f64> = study["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["peak_bps"].as_f64().unwrap())
        .collect();
    assert!(
        0.0 < peaks[0] && peaks[0] < peaks[1] && peaks[1] < peaks[2],
        "{peaks:?}"
    );
    // Concave: 20 times the size moves the price far less than 20 times
    // as much.
    let delta = study["delta"][0].as_f64().unwrap();
    assert!((0.3..0.7).contains(&delta), "δ = {delta}");
    assert!(out.path().join("report.html").exists());
    // A window outside the session is a clear error.
    let o = impact(&[
        "--end-minute",
        "400",
        "--out",
        out.path().join("outside").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("outside the 390-minute session"),
        "{}",
        text(&o)
    );
}

#[test]
fn train_then_backtest_the_policy_and_resume_a_stopped_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let run_s = run.to_str().unwrap();
    // A short run: 2 updates of 8 environments × 256 decisions, 2 of them
    // in the dynamic market.
    let args = |steps: &str| {
        vec![
            "train",
            "--data",
            "data/lean",
            "--out",
            run_s,
            "--total-steps",
            steps,
            "--decision-minutes",
            "30",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };
    let o = serl(&args("4096").iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o));
    for f in [
        "train.toml",
        "config.json",
        "metrics.jsonl",
        "checkpoint/state.json",
        "checkpoint/model.bpk",
        // The default MLP trains with the fused learner, whose Adam
        // moments are kept beside burn's.
        "checkpoint/fused-optim.json",
        "checkpoint.json",
        "report.html",
    ] {
        assert!(run.join(f).exists(), "{f} is missing");
    }
    let lines = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 2);
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert!(
        first["alpha"].as_f64().is_some() && first["loss_dynamic"].as_f64().is_some(),
        "{first}"
    );

    // Starting again over a finished run is refused; resuming is how to go on.
    let o = serl(&args("4096").iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        !o.status.success() && text(&o).contains("--resume"),
        "{}",
        text(&o)
    );

    // Resume with a larger budget: the run continues from update 3.
    let mut cfg = std::fs::read_to_string(run.join("train.toml")).unwrap();
    cfg = cfg.replace("total_steps = 4096", "total_steps = 8192");
    std::fs::write(run.join("train.toml"), cfg).unwrap();
    let o = serl(&["train", "--resume", "--out", run_s]);
    assert!(o.status.success(), "{}", text(&o));
    let lines = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let updates: Vec<u64> = lines
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["update"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(updates, vec![0, 1, 2, 3]);
    // Adam went on counting: 4 updates of 10 epochs × 8 minibatches.
    let optim: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("checkpoint/fused-optim.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        optim["actor"]["time"], 320,
        "the optimiser restarted on resume"
    );

    let bt = dir.path().join("bt");
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--split",
        "test",
        "--strategy",
        "twap",
        "--strategy",
        &format!("policy:{run_s}"),
        "--decision-minutes",
        "30",
        "--out",
        bt.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("policy:run"), "{}", text(&o));
}

#[test]
fn independent_seeds_train_apart_and_are_summarised_across_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("seeds");
    let args = [
        "train",
        "--data",
        "data/lean",
        "--total-steps",
        "2048",
        "--decision-minutes",
        "30",
        "--seeds",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = serl(&args);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("best validation PA over 2 seeds"),
        "{}",
        text(&o)
    );
    let read = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join("seeds.json")).unwrap()).unwrap()
    };
    let s = read();
    let runs = s["seeds"].as_array().unwrap();
    let seeds: Vec<u64> = runs.iter().map(|r| r["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [7, 8]);
    for r in runs {
        let run = std::path::Path::new(r["run_dir"].as_str().unwrap());
        assert!(
            run.join("best.bpk").exists() && run.join("final.bpk").exists(),
            "{r}"
        );
    }
    assert_ne!(
        runs[0]["best_val_pa"], runs[1]["best_val_pa"],
        "independent seeds"
    );
    let pas: Vec<f64> = runs
        .iter()
        .map(|r| r["best_val_pa"].as_f64().unwrap())
        .collect();
    let mean = (pas[0] + pas[1]) / 2.0;
    assert!((s["best_val_pa_mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    // Again without --resume: refused; with it: nothing retrained, same summary.
    let again = serl(&args);
    assert!(!again.status.success());
    assert!(text(&again).contains("--resume"), "{}", text(&again));
    let o = serl(&[
        "train",
        "--resume",
        "--seeds",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read()["seeds"][1]["best_val_pa"], runs[1]["best_val_pa"]);
}

#[test]
fn a_designed_reward_and_a_tilted_pace_train_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let cfg = |reward: &str, tilt: f64| {
        format!(
            "reward = \"{reward}\"\n[env]\ndecision_minutes = 30\n\
             [train]\ntotal_steps = 2048\n[train.ppo]\npace = {{ tilt = {tilt} }}\n"
        )
    };
    let train = |config: &str, out: &str| {
        serl(&[
            "train",
            "--config",
            config,
            "--data",
            "data/lean",
            "--mode",
            "static-only",
            "--out",
            dir.path().join(out).to_str().unwrap(),
        ])
    };

    let good = write(
        "good.toml",
        &cfg("step_pa + twap_gain - 50 * done * remaining_inv^2", 0.5),
    );
    let o = train(&good, "run");
    assert!(o.status.success(), "{}", text(&o));
    let run = dir.path().join("run");
    let saved = std::fs::read_to_string(run.join("train.toml")).unwrap();
    assert!(
        saved.contains("twap_gain") && saved.contains("tilt"),
        "{saved}"
    );
    let bt = dir.path().join("bt");
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--strategy",
        &format!("policy:{}", run.display()),
        "--decision-minutes",
        "30",
        "--out",
        bt.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bt.join("summary.json")).unwrap()).unwrap();
    let policy = &summary["summaries"][0];
    assert_eq!(
        policy["afi"].as_f64(),
        Some(0.0),
        "a tilted pace trades what is left at the last step: {policy}"
    );

    let o = train(
        &write("bad-reward.toml", &cfg("step_pa + nonsense", 0.5)),
        "r2",
    );
    assert!(!o.status.success());
    assert!(
        text(&o).contains("reward") && text(&o).contains("nonsense"),
        "{}",
        text(&o)
    );
    let o = train(&write("bad-tilt.toml", &cfg("step_pa", 1.5)), "r3");
    assert!(!o.status.success());
    assert!(text(&o).contains("ppo.pace"), "{}", text(&o));
}

#[test]
fn a_policy_directory_without_a_trained_policy_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let o = serl(&[
        "backtest",
        "--data",
        "data/lean",
        "--strategy",
        &format!("policy:{}", dir.path().display()),
        "--out",
        dir.path().join("bt").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("checkpoint.json"), "{}", text(&o));
}

#[test]
fn the_shipped_market_config_spells_out_the_defaults() {
    #[derive(serde::Deserialize)]
    struct File {
        market: serl_market::MarketConfig,
    }
    let text = std::fs::read_to_string(common::repo().join("configs/market.toml")).unwrap();
    let file: File = toml::from_str(&text).unwrap();
    assert_eq!(file.market, serl_market::MarketConfig::default());
}

use crate::shared_data::shared_data;

#[test]
fn lobster_order_flow_calibrates_the_noise_traders_when_the_sample_exists() {
    let test = "lobster_order_flow_calibrates_the_noise_traders_when_the_sample_exists";
    let Some(sample) = shared_data(
        "lobster-2012-06-21/LOBSTER_SampleFile_AAPL_2012-06-21_1.zip",
        test,
    ) else {
        return;
    };
    let Some(data) = shared_data("us-equities-1min-2018/AAPL.csv.gz", test) else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let args = |lobster: &str| {
        let out = out.path().join(if lobster.starts_with("no-") {
            "missing"
        } else {
            "sim"
        });
        vec![
            "simulate".to_string(),
            "--data".into(),
            data.to_str().unwrap().into(),
            "--symbol".into(),
            "AAPL".into(),
            "--date".into(),
            "2018-03-01".into(),
            "--seeds".into(),
            "3".into(),
            "--lobster".into(),
            lobster.into(),
            "--out".into(),
            out.to_str().unwrap().into(),
        ]
    };
    let a = args(sample.to_str().unwrap());
    let o = serl(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o));
    let report = std::fs::read_to_string(out.path().join("sim/report.md")).unwrap();
    assert!(
        report.contains("calibrated from LOBSTER") && report.contains("cancels per submission"),
        "{report}"
    );
    let cal: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("sim/calibration.json")).unwrap(),
    )
    .unwrap();
    // AAPL's 2012 flow: about half a cancel per new order.
    let cancel = cal["market"]["cancel_share"].as_f64().unwrap();
    assert!((0.2..0.4).contains(&cancel), "{cancel}");
    let a = args("no-such-sample.zip");
    let o = serl(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(!o.status.success());
    assert!(text(&o).contains("no-such-sample.zip"), "{}", text(&o));
}

/// `serl prompts list` names exactly the templates `serl prompts render`
/// accepts: one per designable module (the plan included), the four that
/// are not a module's (the reward critic included) and the program
/// database's two operators. Each listed one
/// renders, `check` counts them, and `probe` offers every module.
#[test]
fn prompts_list_names_exactly_the_templates_render_accepts() {
    let o = serl(&["prompts", "list"]);
    assert!(o.status.success(), "{}", text(&o));
    let listed: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    let modules = serl_design::ModuleKind::ALL.map(|k| k.name());
    let mut expected: Vec<&str> = modules.to_vec();
    expected.extend([
        "system",
        "feedback",
        "refine",
        "reward_critic",
        "mutate",
        "crossover",
    ]);
    assert_eq!(listed, expected, "{}", text(&o));
    for name in &listed {
        let o = serl(&["prompts", "render", name]);
        assert!(o.status.success(), "render {name}: {}", text(&o));
        assert!(!o.stdout.is_empty(), "render {name} printed nothing");
    }
    // A name not listed is refused, and the refusal lists the names.
    let o = serl(&["prompts", "render", "nonsense"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("reward_critic") && t.contains("plan"), "{t}");

    let o = serl(&["prompts", "check"]);
    assert!(o.status.success(), "{}", text(&o));
    let counted = format!("{} templates", expected.len());
    assert!(text(&o).contains(&counted), "{}", text(&o));
    for m in modules {
        let o = serl(&["prompts", "grammar", m, "--format", "gbnf"]);
        assert!(o.status.success(), "grammar {m}: {}", text(&o));
    }
    let o = serl(&["prompts", "probe", "--help"]);
    let t = text(&o);
    let all = format!("all {} designable modules", modules.len());
    assert!(
        t.contains(&all) && modules.iter().all(|m| t.contains(m)),
        "{t}"
    );
}

/// A count of zero (`--seeds 0`, `--n 0`, `--runs 0`) is refused by name
/// before anything runs, instead of a report "over 0 simulated days"
/// (issue #66).
#[test]
fn a_count_of_zero_is_refused_by_name() {
    let out = tempfile::tempdir().unwrap();
    let out = out.path().to_str().unwrap();
    for (args, flag) in [
        (
            vec!["simulate", "realism", "--seeds", "0", "--out", out],
            "--seeds",
        ),
        (
            vec!["simulate", "fills", "--seeds", "0", "--out", out],
            "--seeds",
        ),
        (vec!["simulate", "--seeds", "0", "--out", out], "--seeds"),
        (vec!["prompts", "probe", "--n", "0"], "--n"),
        (vec!["train", "--seeds", "0", "--out", out], "--seeds"),
        (vec!["bench", "train", "--runs", "0"], "--runs"),
    ] {
        let o = serl(&args);
        let said = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains(&format!("'{flag}")) && said.contains("must be 1 or more, got 0"),
            "{args:?}: {said}"
        );
    }
    let o = serl(&["simulate", "realism", "--seeds", "three", "--out", out]);
    assert!(
        text(&o).contains("`three` is not a whole number"),
        "{}",
        text(&o)
    );
}

/// `--env`, `--engine` and `--llm` take the names the libraries list for
/// their configs: `--help` shows them, a name is read as a config reads
/// it, and an unknown one is refused with the list.
#[test]
fn flags_take_the_names_the_libraries_list() {
    let cases: [(&[&str], &str, &[&str]); 3] = [
        (
            &["backtest"],
            "--env",
            serl_study::backtest::EnvChoice::names(),
        ),
        (&["backtest"], "--engine", &serl_cluster::EngineKind::NAMES),
        (&["evolve"], "--llm", &serl_study::LlmChoice::NAMES),
    ];
    for (command, flag, names) in cases {
        let help = text(&serl(&[command, &["--help"]].concat()));
        for name in names {
            assert!(help.contains(name), "{flag} lacks {name}: {help}");
        }
        let o = serl(&[command, &[flag, "nowhere"]].concat());
        assert!(!o.status.success());
        let err = text(&o);
        assert!(
            err.contains("nowhere") && err.contains(&names.join(", ")),
            "{flag}: {err}"
        );
    }
}
