//! `serl evolve` end to end on the bundled data: the builtin designer, an
//! OpenAI-compatible server on loopback, replay, and resume after kill -9.

use crate::common;

use common::{repo, serl, text, tiny_config_from};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The test table a run printed: its `static ...` and `dynamic ...` rows.
fn printed_table(o: &std::process::Output) -> Vec<String> {
    text(o)
        .lines()
        .filter(|l| l.starts_with("static") || l.starts_with("dynamic"))
        .map(str::to_string)
        .collect()
}

/// A small evolve config: 2 iterations of 2 candidates, tiny budgets.
fn tiny_config(dir: &Path, extra: &str) -> PathBuf {
    tiny_config_from(dir, "configs/evolve.toml", extra)
}

/// The tiny config with the shipped `[llm.http]` table replaced by `table`.
fn with_llm_http(dir: &Path, table: &str) -> PathBuf {
    with_llm_http_from(dir, "configs/evolve.toml", table)
}

fn with_llm_http_from(dir: &Path, shipped: &str, table: &str) -> PathBuf {
    let base = std::fs::read_to_string(tiny_config_from(dir, shipped, "")).unwrap();
    let cut = base.find("[llm.http]").unwrap();
    let cfg = dir.join("llm.toml");
    std::fs::write(&cfg, format!("{}{table}", &base[..cut])).unwrap();
    cfg
}

/// The tiny form of `shipped`, talking to a fresh [`scripted_server`].
fn scripted_config(dir: &Path, shipped: &str) -> PathBuf {
    let url = scripted_server();
    let table = format!("[llm.http]\nflavor = \"open_ai\"\nbase_url = \"{url}\"\nmodel = \"scripted\"\nmax_retries = 3\nbackoff_ms = 10\n");
    with_llm_http_from(dir, shipped, &table)
}

/// `serl evolve --llm openai` with `cfg`, into `run`; it must succeed.
/// Returns what it printed.
fn evolve_through_openai(cfg: &Path, run: &Path) -> String {
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--llm",
        "openai",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    text(&o)
}

fn scores(run: &Path) -> Vec<(String, Option<f64>)> {
    let mut v: Vec<(String, Option<f64>)> = std::fs::read_dir(run.join("candidates"))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let j: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (j["key"].as_str().unwrap().to_string(), j["score"].as_f64())
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// What training leaves in a run directory, with each file's contents and
/// modification time: every `candidates/*.json` (a trained and scored
/// candidate), every `metrics.jsonl` (a training's log, with its wall
/// times) and every `*.bpk` (a trained policy). A candidate or final
/// policy trained again rewrites its files; the times change even when the
/// numbers do not.
fn trained_files(run: &Path) -> Vec<(PathBuf, std::time::SystemTime, usize, u64)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, std::time::SystemTime, usize, u64)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
                continue;
            }
            let name = p.file_name().unwrap().to_string_lossy();
            let candidate = p.parent().unwrap().ends_with("candidates") && name.ends_with(".json");
            if candidate || name == "metrics.jsonl" || name.ends_with(".bpk") {
                let modified = std::fs::metadata(&p).unwrap().modified().unwrap();
                let bytes = std::fs::read(&p).unwrap();
                let mut h = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut h);
                out.push((p.clone(), modified, bytes.len(), h.finish()));
            }
        }
    }
    let mut out = Vec::new();
    walk(run, &mut out);
    out.sort_by(|a, b| a.0.cmp(&b.0));
    // Not vacuous: the candidates, the baseline and the three final
    // trainings are all there.
    let count = |f: &dyn Fn(&Path) -> bool| out.iter().filter(|e| f(&e.0)).count();
    let candidates = count(&|p| p.starts_with(run.join("candidates")));
    assert!(candidates >= 5, "{candidates} candidates");
    assert!(run.join("candidates/baseline.json").exists());
    for name in ["serl-best", "ppo-default", "ddqn-default"] {
        let dir = run.join("final").join(name);
        assert!(count(&|p| p == dir.join("metrics.jsonl")) == 1, "{name}");
        assert!(count(&|p| p == dir.join("final.bpk")) == 1, "{name}");
    }
    out
}

#[test]
fn the_multi_agent_scenario_evolves_agents_that_talk() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config_from(dir.path(), "configs/evolve-team.toml", "")
        .to_str()
        .unwrap()
        .to_string();
    let run = dir.path().join("run");
    let o = serl(&["evolve", "--config", &cfg, "--out", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    // Every designed candidate says how the agents talk, and trained
    // hearing it.
    let mut talked = 0;
    for e in std::fs::read_dir(run.join("candidates")).unwrap() {
        let c: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap();
        // The baseline is plain MAPPO with the default modules: a team
        // that hears nothing.
        if c["key"] == "baseline" {
            continue;
        }
        let broadcast = &c["design"]["communication"]["broadcast"];
        assert!(broadcast.as_array().is_some_and(|b| !b.is_empty()), "{c}");
        talked += 1;
    }
    assert!(talked >= 2);
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("final/serl-best/final.json")).unwrap(),
    )
    .unwrap();
    assert!(meta["message_dims"].as_u64().unwrap() >= 1, "{meta}");
    assert_eq!(meta["team"]["agents"], 4, "a team of four learned together");
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("communication"),
        "the report shows the module"
    );
    assert!(
        report.contains("test-team/report.html"),
        "the team report is linked"
    );
    // The final test: every team and baseline per agent, on the calibrated
    // market and the held-out populations, and the gain from talking.
    let team = common::read_json(&run.join("test-team/summary.json"));
    let envs: std::collections::BTreeSet<&str> = team["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["team"]["env"].as_str().unwrap())
        .collect();
    assert!(
        envs.contains("dynamic:thin") && envs.contains("static"),
        "{envs:?}"
    );
    let paired: Vec<&str> = team["paired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["what"].as_str().unwrap())
        .collect();
    assert!(
        paired.contains(&"serl-best − serl-best (silent)"),
        "{paired:?}"
    );
    assert!(
        paired.contains(&"mappo-default − ippo-default"),
        "{paired:?}"
    );
}

#[test]
fn the_builtin_designer_evolves_a_tested_agent_and_the_same_seed_gives_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    // The best design is retrained from a fresh seed too (the winner's
    // curse).
    let cfg = tiny_config(dir.path(), "\n[evolve.select]\nfinalists = 1\n");
    let shipped = std::fs::read_to_string(&cfg).unwrap();
    let with_parallel = |n: usize| {
        let p = dir.path().join(format!("parallel{n}.toml"));
        // Two ES offspring a generation, so that they too can train side
        // by side.
        let text = shipped
            .replacen("parallel = 0", &format!("parallel = {n}"), 1)
            .replacen("lambda = 1", "lambda = 2", 1);
        std::fs::write(&p, text).unwrap();
        p
    };
    let run = dir.path().join("run");
    let o = common::evolve_ok(&with_parallel(1), &run);
    the_run_wrote_its_tables_report_and_pairs(&o, &run);
    // The costs as the run's own process left them.
    let costs_before = final_and_train_costs(&run);
    the_recommendation_comes_first_and_evidence_recomputes(&text(&o), &run);

    // A resumed run keeps its settings: a flag that would change one is
    // refused and named.
    let changed = serl(&["evolve", "--resume", run.to_str().unwrap(), "--seed", "99"]);
    assert!(!changed.status.success());
    assert!(
        text(&changed).contains("--seed 99 (the run has"),
        "{}",
        text(&changed)
    );
    a_finished_run_resumed_trains_nothing_again(&o, &run, &costs_before);

    // The same seed gives the same scores and the same test table, trained
    // one at a time or two at once (candidates, ES offspring, and the
    // final retrainings).
    let again = dir.path().join("again");
    let o3 = serl(&[
        "evolve",
        "--config",
        with_parallel(2).to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o3.status.success(), "{}", text(&o3));
    assert_eq!(scores(&run), scores(&again));
    assert!(test_rows(&run).iter().any(|l| l.contains("serl-best")));
    assert_eq!(test_rows(&run), test_rows(&again));
}

/// A run's test table rows (static and dynamic), from its report.
fn test_rows(run: &Path) -> Vec<String> {
    let report = std::fs::read_to_string(run.join("test/report.md")).unwrap();
    report
        .lines()
        .filter(|l| l.starts_with("| static") || l.starts_with("| dynamic"))
        .map(str::to_string)
        .collect()
}

/// The cost table's `final training` and `train` seconds, from a run's
/// report.
fn final_and_train_costs(run: &Path) -> Vec<f64> {
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let cost = report.split("## Cost").nth(1).unwrap();
    let cost = cost.split("\n## ").next().unwrap();
    cost.lines()
        .filter(|l| l.starts_with("| final training |") || l.starts_with("| train |"))
        .map(|l| l.split('|').nth(2).unwrap().trim().parse::<f64>().unwrap())
        .collect()
}

/// The quick run's test table names every strategy; its folder holds the
/// reports, the fine-tuning data and the prompts it used; the report
/// opens with its verdict, and the terminal ends with it.
fn the_run_wrote_its_tables_report_and_pairs(o: &std::process::Output, run: &Path) {
    let t = text(o);
    for s in [
        "twap",
        "vwap",
        "ac:",
        "serl-best",
        "ppo-default",
        "ddqn-default",
    ] {
        assert!(t.contains(s), "{s} missing from the test table:\n{t}");
    }
    for f in [
        "report.md",
        "report.html",
        "test/report.html",
        "finetune/sft.jsonl",
        "finetune/dpo.jsonl",
        "finetune/pairs.jsonl",
        "prompts/reward.j2",
        "instructions.json",
    ] {
        assert!(run.join(f).exists(), "{f} is missing");
    }
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("builtin offline search (no LLM)") && report.contains("Paired difference"),
        "{report}"
    );
    // What the search spent per accepted module and per bp it gained.
    assert!(
        report.contains("| per accepted module (")
            && report.contains("per bp of validation gain over plain PPO"),
        "{report}"
    );
    let sft = std::fs::read_to_string(run.join("finetune/sft.jsonl")).unwrap();
    assert!(sft.lines().count() >= 1);
    // The verdict comes first in the report and last in the terminal.
    assert!(report.starts_with("# SE-RL evolve report"));
    let verdict_at = report.find("## Verdict").expect("a verdict section");
    assert!(
        verdict_at < report.find("## Iterations").unwrap(),
        "{report}"
    );
    assert!(report.contains("| static | ppo-default |"), "{report}");
    // The terminal's last words (stdout; the progress goes to stderr).
    let out = String::from_utf8_lossy(&o.stdout);
    let last: Vec<&str> = out.lines().rev().take(12).collect();
    assert!(
        last.iter().any(|l| l.contains("test (static): serl-best"))
            && last.iter().any(|l| l.contains("validation ranking")),
        "{t}"
    );
    assert_eq!(
        final_and_train_costs(run).len(),
        2,
        "final training and train rows"
    );
}

/// The recommendation comes before the verdict, in the report and on the
/// terminal; one validation day recommends plain PPO; the finalist is
/// retrained from a fresh seed; `serl evolve evidence` computes the same
/// evidence again.
fn the_recommendation_comes_first_and_evidence_recomputes(t: &str, run: &Path) {
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let recommended_at = report.find("## Recommendation").expect("a recommendation");
    assert!(
        recommended_at < report.find("## Verdict").unwrap(),
        "{report}"
    );
    let said = t
        .find("recommended: plain PPO (final/ppo-default)")
        .expect(t);
    assert!(said < t.find("verdict:").unwrap(), "{t}");
    assert!(t.contains("1 validation day cannot tell"), "{t}");
    let link = run.join("final/recommended");
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("ppo-default"));
    let rescored = std::fs::read_dir(run.join("scores"))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("rescore_")
                && !name.to_string_lossy().ends_with(".secs.json")
        })
        .count();
    assert_eq!(rescored, 1, "the finalist retrained from a fresh seed");
    let evidence = serl(&["evolve", "evidence", run.to_str().unwrap(), "--json"]);
    assert!(evidence.status.success(), "{}", text(&evidence));
    let recomputed: serde_json::Value = serde_json::from_slice(&evidence.stdout).unwrap();
    assert_eq!(recomputed, common::read_json(&run.join("evidence.json")));
    assert_eq!(recomputed["finalists"].as_array().map(Vec::len), Some(1));
    let shown = serl(&["evolve", "evidence", run.to_str().unwrap()]);
    assert!(
        text(&shown).contains("designs tried (N)"),
        "{}",
        text(&shown)
    );
}

/// Resuming a finished run trains nothing again, keeps the evidence and
/// the costs its first process recorded (`costs_before`), and prints the
/// same table.
fn a_finished_run_resumed_trains_nothing_again(
    o: &std::process::Output,
    run: &Path,
    costs_before: &[f64],
) {
    let evidence_before = std::fs::read(run.join("evidence.parquet")).unwrap();
    let table_before = test_rows(run);
    let trained_before = trained_files(run);
    let o2 = serl(&["evolve", "--resume", run.to_str().unwrap()]);
    assert!(o2.status.success(), "{}", text(&o2));
    assert!(
        text(&o2).contains("has finished before") && text(&o2).contains("nothing is trained again"),
        "a resume of a finished run says so: {}",
        text(&o2)
    );
    assert_eq!(
        std::fs::read(run.join("evidence.parquet")).unwrap(),
        evidence_before,
        "a resumed run gives the same evidence file"
    );
    assert_eq!(test_rows(run), table_before, "the resumed run's test table");
    let costs_after = final_and_train_costs(run);
    assert_eq!(costs_after.len(), 2);
    for (a, b) in costs_after.iter().zip(costs_before) {
        assert!(
            a >= b,
            "a cost row shrank on resume: {costs_before:?} -> {costs_after:?}"
        );
    }
    assert!(
        costs_after[0] > 0.0 && costs_after[1] > 0.0,
        "{costs_after:?}"
    );
    // The resume tested again and printed the same table.
    assert!(!printed_table(o).is_empty(), "{}", text(o));
    assert_eq!(printed_table(&o2), printed_table(o));
    let trained_after = trained_files(run);
    let rewritten: Vec<String> = trained_after
        .iter()
        .filter(|f| !trained_before.contains(f))
        .map(|f| f.0.display().to_string())
        .collect();
    assert!(
        rewritten.is_empty() && trained_after.len() == trained_before.len(),
        "the resume trained again (candidates, training logs or policies written anew): {rewritten:?}"
    );
}

#[test]
fn a_killed_run_resumes_and_keeps_its_finished_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), "");
    // The final trainings keep their best validated policy.
    let text_cfg = std::fs::read_to_string(&cfg).unwrap().replacen(
        "final_steps = 512",
        "final_steps = 512\nfinal_eval_every = 1",
        1,
    );
    std::fs::write(&cfg, text_cfg).unwrap();
    let run = dir.path().join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args([
            "evolve",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            run.to_str().unwrap(),
        ])
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = run.join("candidates/i0_c0.json");
    let t = Instant::now();
    while !first.exists() && t.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(first.exists(), "the first candidate never finished");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let kept = std::fs::read_to_string(&first).unwrap();
    let o = serl(&["evolve", "--resume", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(&first).unwrap(),
        kept,
        "a finished candidate was trained again"
    );
    assert!(run.join("report.html").exists());
    for name in ["serl-best", "ppo-default", "ddqn-default"] {
        let selected = run.join("final").join(name).join("best.bpk");
        assert!(selected.exists(), "{name} kept no validated checkpoint");
    }
    // Resumed once more, the finals load the policies they selected: the
    // same test table.
    let again = serl(&["evolve", "--resume", run.to_str().unwrap()]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(!printed_table(&o).is_empty());
    assert_eq!(printed_table(&o), printed_table(&again));
}

/// `[evolve] lockbox = true`: the run stops with its test sealed (no test
/// played, `lockbox.json` naming the design); `--open-test` declares it
/// final, records when, and plays the test, whose table is exactly the
/// table of the same run without a lockbox.
#[test]
fn a_lockbox_keeps_the_test_sealed_until_the_run_is_declared_final() {
    let dir = tempfile::tempdir().unwrap();
    let plain = tiny_config(dir.path(), "");
    let sealed_cfg = dir.path().join("sealed.toml");
    let text_cfg = std::fs::read_to_string(&plain).unwrap();
    std::fs::write(
        &sealed_cfg,
        text_cfg.replacen("lockbox = false", "lockbox = true", 1),
    )
    .unwrap();
    let run = dir.path().join("sealed");
    let o = common::evolve_ok(&sealed_cfg, &run);
    assert!(text(&o).contains("--open-test"), "{}", text(&o));
    let lockbox = |run: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(run.join("lockbox.json")).unwrap()).unwrap()
    };
    let sealed = lockbox(&run);
    assert!(sealed["opened_at"].is_null(), "{sealed}");
    assert!(sealed["sealed_at"].as_str().unwrap().ends_with('Z'));
    assert!(!run.join("test").exists() && !run.join("report.md").exists());
    assert!(
        printed_table(&o).is_empty(),
        "a sealed run printed a test table"
    );

    let opened = serl(&["evolve", "--resume", run.to_str().unwrap(), "--open-test"]);
    assert!(opened.status.success(), "{}", text(&opened));
    let l = lockbox(&run);
    assert_eq!(l["sealed_at"], sealed["sealed_at"]);
    assert_eq!(l["design_key"], sealed["design_key"]);
    assert!(l["opened_at"].as_str().unwrap() >= l["sealed_at"].as_str().unwrap());
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("test split sealed at"), "{report}");

    let reference = dir.path().join("plain");
    let o = common::evolve_ok(&plain, &reference);
    assert!(!printed_table(&o).is_empty());
    assert_eq!(printed_table(&opened), printed_table(&o));

    // --open-test is for a run with a lockbox.
    let e = serl(&[
        "evolve",
        "--resume",
        reference.to_str().unwrap(),
        "--open-test",
    ]);
    assert!(!e.status.success());
    assert!(text(&e).contains("no lockbox"), "{}", text(&e));
}

/// An OpenAI-compatible server that answers each module's prompt with a
/// valid module (and the first reward prompt with a broken one, to
/// exercise the designer's retry), and closes every third connection
/// without answering (to exercise the client's).
fn scripted_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut first_reward = true;
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            // A loaded server or proxy: every third connection is closed
            // without an answer (the client must retry it like a 5xx).
            if n % 3 == 2 {
                drop(stream);
                continue;
            }
            let req = common::read_request(&stream);
            let prompt = req["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let seed = req["seed"].as_u64().unwrap_or(0);
            // Every module request is constrained to its module's schema
            // (the shipped configs' default); refuse one that is not.
            if prompt.contains("# Module:") && req["response_format"]["type"] != "json_schema" {
                let body =
                    "{\"error\": \"a module request without a json_schema response_format\"}";
                let _ = write!(stream, "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                continue;
            }
            let content = if prompt.contains("# Module: reward") {
                if first_reward {
                    first_reward = false;
                    "I would use `step_pa - remaining_inventory`".to_string()
                } else {
                    // The shape the reward's schema constrains a reply to.
                    serde_json::json!({"program": format!("step_pa - {}.5 * remaining_inv^2 / steps - 50 * done * remaining_inv^2", seed % 4)}).to_string()
                }
            } else if prompt.contains("# Module: state space") {
                r#"{"features": [{"name": "ret_mean_5", "program": "mean(ret_1, 5)"}]}"#.to_string()
            } else if prompt.contains("# Module: agent architecture") {
                r#"Here: {"window": 1, "blocks": [{"kind": "dense", "width": 32, "activation": "tanh"}]}"#.to_string()
            } else if prompt.contains("# Module: profiling") {
                r#"{"market": {"noise_agents": 40, "value_agents": 40, "momentum_agents": 5, "informed_agents": 5, "market_makers": 2}}"#.to_string()
            } else if prompt.contains("# Module: communication") {
                "```json\n{\"broadcast\": [{\"name\": \"left\", \"program\": \"inventory_left\"}], \"aggregate\": \"attention\"}\n```".to_string()
            } else if prompt.contains("# Module: plan") {
                r#"{"shape": "front_loaded", "strength": 0.4, "checkpoints": 13}"#.to_string()
            } else if prompt.contains("You are the reward critic") {
                // One weight per term, as the reply's schema says.
                let k = req["response_format"]["json_schema"]["schema"]["properties"]["weights"]
                    ["maxItems"]
                    .as_u64()
                    .unwrap_or(1);
                serde_json::json!({ "weights": vec![1.5; k as usize] }).to_string()
            } else if prompt.contains("# Module: imagination") {
                r#"{"scenarios": [{"volatility_mult": 1.2, "drift_bps": -10, "liquidity_mult": 0.9, "jumps": []}], "share": 0.5}"#.to_string()
            } else if prompt.contains("You improve the research direction") {
                "Favour timing gains on falling days.".to_string()
            } else {
                "Penalise inventory late in the day.".to_string()
            };
            common::answer_completion(&mut stream, &content, prompt.len() / 4);
        }
    });
    url
}

#[test]
fn the_loop_runs_through_an_openai_compatible_server_and_replays_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = scripted_config(dir.path(), "configs/evolve.toml");
    let run = dir.path().join("run");
    let printed = evolve_through_openai(&cfg, &run);
    assert!(
        printed.contains("closed") && printed.contains("retrying in"),
        "the dropped connections were retried: {printed}"
    );
    let transcript = std::fs::read_to_string(run.join("transcript.jsonl")).unwrap();
    assert!(transcript.lines().count() >= 8, "{transcript}");
    // The high-level DEK's rewritten research direction reaches the next
    // round's module prompts.
    assert!(
        transcript.lines().any(|l| l.contains("# Module: reward")
            && l.contains("Favour timing gains on falling days.")),
        "no module prompt carries the rewritten macro instruction"
    );
    let c0: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("candidates/i0_c0.json")).unwrap())
            .unwrap();
    let reward = c0["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "reward")
        .unwrap();
    assert_eq!(
        reward["attempts"], 2,
        "the broken first reply was retried: {reward}"
    );
    assert!(
        reward["errors"][0]
            .as_str()
            .unwrap()
            .contains("did you mean `remaining_inv`"),
        "{reward}"
    );
    // The record keeps the prompt as it was sent, constrained to the
    // reward's schema, so it asks for JSON (a second rendering, for the
    // record alone, lost the constraint and asked for a fenced block).
    let prompt = reward["prompt"].as_str().unwrap();
    assert!(
        prompt.contains(r#"Reply with JSON: {"program""#),
        "{prompt}"
    );
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("LLM: openai scripted"),
        "{}",
        &report[..300.min(report.len())]
    );

    let replay = dir.path().join("replay");
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--llm",
        "replay",
        "--replay-from",
        run.join("transcript.jsonl").to_str().unwrap(),
        "--out",
        replay.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(scores(&run), scores(&replay));
}

#[test]
fn all_six_modules_come_through_an_openai_compatible_server() {
    // The multi-agent scenario asks for every module kind; each comes back
    // over HTTP, is validated and is used: profiling builds the market,
    // communication is what the trained agents hear.
    let dir = tempfile::tempdir().unwrap();
    let cfg = scripted_config(dir.path(), "configs/evolve-team.toml");
    let run = dir.path().join("run");
    evolve_through_openai(&cfg, &run);
    let c0: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("candidates/i0_c0.json")).unwrap())
            .unwrap();
    let kinds: Vec<&str> = c0["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    for k in [
        "reward",
        "state",
        "architecture",
        "imagination",
        "profiling",
        "communication",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    assert_eq!(c0["design"]["profiling"]["market"]["noise_agents"], 40);
    assert_eq!(c0["design"]["communication"]["aggregate"], "attention");
    assert!(
        c0["score"].as_f64().is_some(),
        "the candidate trained: {c0}"
    );
}

/// The README's loop designed by a language model running inside serl: a
/// tiny random-weight GGUF that `serl prompts test-model` writes (no
/// download). Its designs are noise, but every reply is constrained to its
/// module's grammar, so the loop finds valid designs, trains them, picks
/// one on validation and writes the report. (That the same seed gives the
/// same replies is `serl-local`'s test.)
#[cfg(feature = "local")]
#[test]
fn the_loop_runs_through_the_embedded_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    let o = serl(&["prompts", "test-model", "--out", model.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let cfg = tiny_config(dir.path(), "");
    let a = dir.path().join("run");
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--llm",
        "local",
        "--model",
        model.to_str().unwrap(),
        "--out",
        a.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report = std::fs::read_to_string(a.join("report.md")).unwrap();
    assert!(
        report.contains("LLM: local tiny.gguf"),
        "{}",
        &report[..300.min(report.len())]
    );
    assert!(a.join("report.html").exists());
    let designed = scores(&a).iter().filter(|(_, s)| s.is_some()).count();
    assert!(designed > 0, "no candidate the model designed was valid");
}

#[test]
fn an_unreachable_server_is_a_clear_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = with_llm_http(
        dir.path(),
        &format!("[llm.http]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmax_retries = 0\n"),
    );
    let t = Instant::now();
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--llm",
        "openai",
        "--out",
        dir.path().join("run").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let t2 = text(&o);
    assert!(
        t2.contains(&format!("127.0.0.1:{port}")) && t2.contains("cannot connect"),
        "{t2}"
    );
    assert!(t.elapsed() < Duration::from_secs(60));
}

/// Every line of a training run's metrics: whether it had a dynamic loss.
fn dynamic_losses(metrics: &Path) -> Vec<bool> {
    std::fs::read_to_string(metrics)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["loss_dynamic"].is_number()
        })
        .collect()
}

#[test]
fn configured_ablations_run_after_the_main_run_and_fill_the_report_table() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config(dir.path(), "");
    let text0 = std::fs::read_to_string(&cfg).unwrap().replacen(
        "[evolve]\n",
        "[evolve]\nablations = [\"no_low_level\", \"static_only\"]\n",
        1,
    );
    std::fs::write(&cfg, text0).unwrap();
    let run = dir.path().join("run");
    common::evolve_ok(&cfg, &run);

    // Each ablation is a full run of its own, with its own report.
    for name in ["no_low_level", "static_only"] {
        let sub = run.join("ablations").join(name);
        assert!(sub.join("report.md").exists(), "{name} has no report");
    }
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let section = &report[report.find("## Ablations").unwrap()..];
    for row in ["| full |", "| no_low_level |", "| static_only |"] {
        assert!(section.contains(row), "{row} is missing:\n{section}");
    }
    // The static-only ablation really trained without the dynamic market;
    // the main run did not.
    let main = dynamic_losses(&run.join("final/serl-best/metrics.jsonl"));
    assert!(main.iter().all(|&d| d), "{main:?}");
    let ablated = dynamic_losses(&run.join("ablations/static_only/final/serl-best/metrics.jsonl"));
    assert!(
        !ablated.is_empty() && ablated.iter().all(|&d| !d),
        "{ablated:?}"
    );
    // Without low-level DEK there are no tuned (`ll…`) candidates.
    let tuned = |dir: &Path| {
        std::fs::read_dir(dir.join("candidates"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("ll")
            })
            .count()
    };
    assert!(tuned(&run) > 0);
    assert_eq!(tuned(&run.join("ablations/no_low_level")), 0);
}

#[test]
fn the_hierarchy_runs_through_an_openai_compatible_server_with_the_model_as_critic() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = scripted_config(dir.path(), "configs/evolve-hierarchy.toml");
    let text_cfg = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("every = 4 ", "every = 1 ")
        .replace("max_step = 1.5", "max_step = 1.5\ncritic = \"llm\"")
        .replace("final_steps = 512", "final_steps = 1536")
        .replace(
            r#"rows = ["plan", "plan_alignment", "transition", "reward_critic"]"#,
            r#"rows = ["reward_critic"]"#,
        );
    std::fs::write(&cfg, text_cfg).unwrap();
    let run = dir.path().join("run");
    evolve_through_openai(&cfg, &run);

    // The model wrote every candidate's plan.
    let c0: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("candidates/i0_c0.json")).unwrap())
            .unwrap();
    assert_eq!(c0["design"]["plan"]["shape"], "front_loaded", "{c0}");
    // ... and the critic's weights, in both bases' critic rows.
    for row in ["hierarchy-reward_critic", "hierarchy-plain-reward_critic"] {
        let m =
            serl_train::read_metrics(&run.join("final").join(row).join("metrics.jsonl")).unwrap();
        let w = m[0].reward_weights.clone().unwrap();
        assert!(w.len() >= 2 && w.iter().all(|&v| v == 1.5), "{row}: {w:?}");
    }
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("| plain PPO | plain: reward_critic |"),
        "{report}"
    );
}
