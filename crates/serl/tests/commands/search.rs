//! The program database (`[evolve.search]`), the random-grammar control
//! (`--llm grammar`) and the equal-budget study (`serl evolve study`), run
//! as a user runs them, on the bundled sample with tiny budgets.

use crate::common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::{read_json, serl, text, tiny_config_from};

/// The search table the tests add: two islands that migrate every round,
/// mostly mutations.
const SEARCH: &str = "\n[evolve.search]\nislands = 2\nmigrate_every = 1\noperators = { mutate = 0.7, crossover = 0.2, fresh = 0.1, builtin = 0.0 }\n";

/// An OpenAI-compatible server that answers every module with a valid
/// one (a mutation's reward: its parent's with one more term) and keeps
/// every prompt it was sent.
fn recording_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let seen = prompts.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let req = common::read_request(&stream);
            let prompt = req["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let seed = req["seed"].as_u64().unwrap_or(0);
            let content = if prompt.contains("# Module: reward") {
                let program = match parent_source(&prompt) {
                    Some(p) => format!("{p} - 0.{}1 * abs(remaining_inv - time_left)", seed % 9),
                    None => format!("step_pa - {}.5 * remaining_inv^2 / steps", seed % 4),
                };
                serde_json::json!({ "program": program }).to_string()
            } else if prompt.contains("# Module: state space") {
                r#"{"features": [{"name": "ret_mean_5", "program": "mean(ret_1, 5)"}]}"#.into()
            } else if prompt.contains("# Module: agent architecture") {
                r#"{"window": 1, "blocks": [{"kind": "dense", "width": 32, "activation": "tanh"}]}"#
                    .into()
            } else if prompt.contains("# Module: imagination") {
                r#"{"scenarios": [{"volatility_mult": 1.2, "drift_bps": -10, "liquidity_mult": 0.9, "jumps": []}], "share": 0.5}"#.into()
            } else {
                "Penalise inventory late in the day.".to_string()
            };
            seen.lock().unwrap().push(prompt.clone());
            common::answer_completion(&mut stream, &content, prompt.len() / 4);
        }
    });
    (url, prompts)
}

/// The parent's program shown by a mutation's prompt (`mutate.j2`).
fn parent_source(prompt: &str) -> Option<String> {
    let at = prompt.find("## Improve this reward")?;
    let rest = &prompt[at..];
    let start = rest.find("```\n")? + 4;
    let end = rest[start..].find("\n```")?;
    Some(rest[start..start + end].trim().to_string())
}

/// The tiny evolve config with the search table, asking `url`.
fn search_config(dir: &Path, url: &str) -> PathBuf {
    let base = std::fs::read_to_string(tiny_config_from(dir, "configs/evolve.toml", "")).unwrap();
    // One module, so that every mutation rewrites the reward; three
    // rounds, so that the database has parents to offer.
    let base = base
        .replace(
            r#"modules = ["reward", "state", "architecture", "imagination"]"#,
            r#"modules = ["reward"]"#,
        )
        .replace("iterations = 2", "iterations = 3");
    let cut = base.find("[llm.http]").unwrap();
    let table = format!("[llm.http]\nflavor = \"open_ai\"\nbase_url = \"{url}\"\nmodel = \"scripted\"\nmax_retries = 2\nbackoff_ms = 10\n{SEARCH}");
    let cfg = dir.join("search.toml");
    std::fs::write(&cfg, format!("{}{table}", &base[..cut])).unwrap();
    cfg
}

fn evolve(cfg: &Path, run: &Path, llm: &str) -> String {
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--llm",
        llm,
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    text(&o)
}

/// The database keeps every design with its lineage; a mutation's prompt
/// carries its parent's module, which the database chose among valid
/// designs; the run reports its operators; and a resumed run rebuilds
/// the same database.
#[test]
fn the_program_database_shows_the_model_its_parents_and_resumes_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let (url, prompts) = recording_server();
    let cfg = search_config(dir.path(), &url);
    let run = dir.path().join("run");
    let printed = evolve(&cfg, &run, "openai");
    assert!(printed.contains("operators (valid/written)"), "{printed}");

    let db = read_json(&run.join("search").join("database.json"));
    let programs = db["programs"].as_array().unwrap();
    assert!(programs.len() >= 4, "{db}");
    let valid: Vec<&str> = programs
        .iter()
        .filter(|p| p["valid"] == true)
        .map(|p| p["key"].as_str().unwrap())
        .collect();
    let children: Vec<&serde_json::Value> = programs
        .iter()
        .filter(|p| p["lineage"]["operator"] == "mutate")
        .collect();
    assert!(!children.is_empty(), "no mutation in {db}");
    for c in &children {
        for parent in c["lineage"]["parents"].as_array().unwrap() {
            let parent = parent.as_str().unwrap();
            assert!(
                valid.contains(&parent),
                "{parent} is not a valid design: {db}"
            );
        }
    }
    assert!(!db["migrations"].as_array().unwrap().is_empty(), "{db}");

    // The prompt of a mutated reward shows a recorded design's reward.
    let sent = prompts.lock().unwrap().clone();
    let shown: Vec<String> = sent.iter().filter_map(|p| parent_source(p)).collect();
    assert!(
        !shown.is_empty(),
        "no mutation prompt among {} requests",
        sent.len()
    );
    let rewards: Vec<String> = std::fs::read_dir(run.join("candidates"))
        .unwrap()
        .filter_map(|f| {
            let c = read_json(&f.ok()?.path());
            Some(c["design"]["reward"]["program"].as_str()?.to_string())
        })
        .collect();
    for s in &shown {
        assert!(rewards.contains(s), "`{s}` is no recorded design's reward");
    }
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(report.contains("## Program database"), "{report}");
    assert!(
        report.contains(
            "| round | operators (valid/written) | winner | fold winners | agreement |\n|---:|---|---|---|---:|\n| 1 | "
        ),
        "{report}"
    );
    assert!(report.contains("Daily edge over plain PPO"), "{report}");
    assert!(run.join("lineage.svg").exists());

    // Resuming the finished run rebuilds the same database: the same
    // parents drawn, the same islands, the same migrations.
    let before = std::fs::read_to_string(run.join("search").join("database.json")).unwrap();
    let o = serl(&["evolve", "--resume", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let after = std::fs::read_to_string(run.join("search").join("database.json")).unwrap();
    assert_eq!(before, after);
}

/// `--llm grammar` draws every module from its grammar: no model, no
/// server, the same draws for the same seed.
#[test]
fn the_random_grammar_control_searches_without_a_model_and_reproduces() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config_from(dir.path(), "configs/evolve.toml", SEARCH);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    evolve(&cfg, &a, "grammar");
    evolve(&cfg, &b, "grammar");
    let report = std::fs::read_to_string(a.join("report.md")).unwrap();
    assert!(report.contains("random grammar draws (no LLM)"), "{report}");
    let db =
        |run: &Path| std::fs::read_to_string(run.join("search").join("database.json")).unwrap();
    assert_eq!(db(&a), db(&b), "same seed, same search");
}

/// The study runs every arm over every seed at equal budgets, keeps the
/// test sealed for all but the winner and the runner-up, and writes its
/// report; run again, it reads everything back.
#[test]
fn the_study_runs_its_arms_seals_the_test_and_opens_only_the_winners() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny.gguf");
    let o = serl(&["prompts", "test-model", "--out", model.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let base = tiny_config_from(dir.path(), "configs/evolve.toml", SEARCH);
    let study = dir.path().join("study.toml");
    let model = model.to_str().unwrap();
    std::fs::write(
        &study,
        format!(
            "base = \"{}\"\nseeds = [1, 2]\n\n[[arms]]\nname = \"grammar\"\nllm = \"grammar\"\nsearch = true\n\n[[arms]]\nname = \"builtin\"\nllm = \"builtin\"\n\n[[arms]]\nname = \"tiny\"\nllm = \"local\"\nmodel = \"{model}\"\n\n[[arms]]\nname = \"tiny+db\"\nllm = \"local\"\nmodel = \"{model}\"\nsearch = true\n",
            base.display()
        ),
    )
    .unwrap();
    let out = dir.path().join("study");
    let args = [
        "evolve",
        "study",
        "--config",
        study.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    let o = serl(&args);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("winner on validation"), "{}", text(&o));

    let lockbox = read_json(&out.join("lockbox.json"));
    let (winner, runner_up) = (
        lockbox["winner"].as_str().unwrap().to_string(),
        lockbox["runner_up"].as_str().unwrap().to_string(),
    );
    assert_ne!(winner, runner_up);
    assert_eq!(lockbox["tests"].as_array().unwrap().len(), 4, "{lockbox}");
    for arm in ["grammar", "builtin", "tiny", "tiny+db"] {
        for seed in [1, 2] {
            let run = out.join(arm).join(format!("seed{seed}"));
            let l = read_json(&run.join("lockbox.json"));
            let opened = !l["opened_at"].is_null();
            assert_eq!(
                opened,
                arm == winner || arm == runner_up,
                "{arm} seed {seed}: {l}"
            );
            let saved = std::fs::read_to_string(run.join("evolve.toml")).unwrap();
            assert_eq!(
                saved.contains("[evolve.search]"),
                arm.ends_with("db") || arm == "grammar",
                "{arm}"
            );
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for needle in [
        "## Arms",
        "## Each arm against each other",
        "## The lockbox",
        "tiny+db",
    ] {
        assert!(report.contains(needle), "`{needle}` not in:\n{report}");
    }
    assert!(out.join("report.html").exists() && out.join("curves.svg").exists());

    // The same command again is refused: the folder holds a study.
    let refused = serl(&args);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(text(&refused).contains("--resume`"), "{}", text(&refused));
    // Resumed: nothing is trained or opened again.
    let mut resume = args.to_vec();
    resume.push("--resume");
    let again = serl(&resume);
    assert!(again.status.success(), "{}", text(&again));
    assert!(!text(&again).contains("running arm"), "{}", text(&again));
    assert_eq!(read_json(&out.join("lockbox.json")), lockbox);
}
