//! The designer learns from its results (`[evolve.finetune]`, `serl llm
//! pairs`, `serl llm finetune`), run as a user runs them: the tiny
//! generated model designing on the bundled sample, fine-tuned between
//! rounds, and an adapter trained on the run's pairs that survives kill -9.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{read_json, serl, text, tiny_config_from};

/// Fine-tuning after every round, SFT (the tiny model's designs give
/// few preference pairs), one epoch of a rank-2 adapter.
const FINETUNE: &str = "\n[evolve.finetune]\nevery = 1\n\n[evolve.finetune.tune]\nobjective = \"sft\"\nrank = 2\nepochs = 1\n";

fn tiny_model(dir: &Path) -> PathBuf {
    let model = dir.join("tiny.gguf");
    let o = serl(&["prompts", "test-model", "--out", model.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    model
}

fn evolve(cfg: &Path, model: &Path, run: &Path) -> String {
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--llm",
        "local",
        "--model",
        model.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    text(&o)
}

#[test]
fn the_designer_fine_tunes_between_rounds_and_a_resumed_run_uses_the_same_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let cfg = tiny_config_from(dir.path(), "configs/evolve.toml", FINETUNE);
    let run = dir.path().join("run");
    let out = evolve(&cfg, &model, &run);
    assert!(out.contains("the designer fine-tuned on"), "{out}");
    // Two rounds: one fine-tuning, after the first (none after the last).
    let adapters = read_json(&run.join("finetune").join("adapters.json"));
    assert_eq!(adapters.as_array().unwrap().len(), 1, "{adapters}");
    let adapter = run.join("finetune").join("adapter-1");
    let weights = std::fs::read(adapter.join("adapter.safetensors")).unwrap();
    assert!(adapter.join("history.json").exists());
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("## The designer, fine-tuned between rounds"),
        "{report}"
    );
    // The second round's requests went to the model with the adapter.
    let transcript = std::fs::read_to_string(run.join("transcript.jsonl")).unwrap();
    assert!(
        transcript.contains("+ ") && transcript.contains("adapter-1"),
        "the adapter's name in the transcript's backend"
    );

    let o = serl(&["evolve", "--resume", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        read_json(&run.join("finetune").join("adapters.json"))[0]["adapter"],
        adapters[0]["adapter"]
    );
    assert_eq!(
        std::fs::read(adapter.join("adapter.safetensors")).unwrap(),
        weights
    );

    // Without the embedded model there is nothing to fine-tune: refused, saying why.
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--llm",
        "builtin",
        "--out",
        dir.path().join("b").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("[evolve.finetune]") && text(&o).contains("--llm local"),
        "{}",
        text(&o)
    );
}

/// The adapter directory written so far, once a checkpoint has been saved
/// at least `saves` times.
fn saved(out: &Path, saves: u64) -> bool {
    std::fs::read_to_string(out.join("checkpoint").join("state.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["saves"].as_u64())
        .is_some_and(|n| n >= saves)
}

#[test]
fn pairs_are_counted_and_an_adapter_killed_halfway_resumes_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let cfg = tiny_config_from(dir.path(), "configs/evolve.toml", "");
    let run = dir.path().join("run");
    evolve(&cfg, &model, &run);

    let o = serl(&["llm", "pairs", run.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let counts: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(counts["total"]["sft"].as_u64().unwrap() >= 2, "{counts}");
    // The JSON has the table's `pairs` column: the sum over the kinds.
    let total = counts["total"].as_object().unwrap();
    let kinds: u64 = total
        .iter()
        .filter(|(k, _)| *k != "pairs" && *k != "sft")
        .map(|(_, n)| n.as_u64().unwrap())
        .sum();
    assert_eq!(total["pairs"].as_u64(), Some(kinds), "{counts}");
    let o = serl(&["llm", "pairs", dir.path().join("nothing").to_str().unwrap()]);
    assert!(
        !o.status.success() && text(&o).contains("nothing"),
        "{}",
        text(&o)
    );

    // 8 epochs of 6 steps, a checkpoint after each step: the kill below,
    // after 4 checkpoints, lands well before the 48th (each run of it
    // takes about 10 s here; 40 epochs took 50 s, three times over).
    let settings = dir.path().join("tune.toml");
    std::fs::write(
        &settings,
        "rank = 2\nepochs = 8\npatience = 8\nbatch = 1\nholdout = 0.25\n",
    )
    .unwrap();
    let args = |out: &Path| {
        vec![
            "llm".to_string(),
            "finetune".into(),
            "--from".into(),
            run.display().to_string(),
            "--model".into(),
            model.display().to_string(),
            "--out".into(),
            out.display().to_string(),
            "--objective".into(),
            "sft".into(),
            "--config".into(),
            settings.display().to_string(),
        ]
    };
    let whole = dir.path().join("whole");
    let o = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(args(&whole))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(whole.join("report.html").exists() && whole.join("adapter.json").exists());

    // kill -9 after a few checkpoints, then the same command with --resume.
    let cut = dir.path().join("cut");
    let mut child = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(args(&cut))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !saved(&cut, 4) && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !cut.join("adapter.safetensors").exists(),
        "killed before the end"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(args(&cut))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "refused without --resume: {}",
        text(&o)
    );
    let o = Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(args(&cut))
        .arg("--resume")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let bytes = |d: &Path| std::fs::read(d.join("adapter.safetensors")).unwrap();
    assert_eq!(bytes(&whole), bytes(&cut));

    // The adapter runs in the engine: a probe with it answers.
    let o = serl(&[
        "prompts",
        "probe",
        "--model",
        model.to_str().unwrap(),
        "--adapter",
        cut.to_str().unwrap(),
        "--n",
        "1",
        "--modules",
        "reward",
    ]);
    assert!(o.status.success(), "{}", text(&o));
}
