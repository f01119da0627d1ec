//! `configs/evolve-hierarchy.toml` on the bundled data: the designer
//! writes a plan with the other modules, and the best design is retrained
//! alone and with each of plan, plan + alignment, transition supervision
//! and the reward critic, each a row of the report. A resumed run trains
//! nothing and gives the same table; a bad setting is named.

use crate::common;

use common::{serl, text, tiny_config_from};
use serl_train::{read_metrics, AlignmentStats};

fn hierarchy_section(report: &str) -> String {
    let at = report.find("## Hierarchy").expect("a hierarchy section");
    report[at..].to_string()
}

#[test]
fn every_hierarchy_row_trains_reports_and_resumes_to_the_same_table() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = tiny_config_from(dir.path(), "configs/evolve-hierarchy.toml", "");
    let text_cfg = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("final_steps = 512", "final_steps = 2048")
        .replace("steps = 1024", "steps = 256")
        .replace("every = 4 ", "every = 1 ");
    std::fs::write(&cfg, text_cfg).unwrap();
    let run = dir.path().join("run");
    common::evolve_ok(&cfg, &run);

    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let section = hierarchy_section(&report);
    for row in [
        "design alone",
        "plan",
        "plan_alignment",
        "transition",
        "reward_critic",
    ] {
        let best = format!("| best design | {row} |");
        let plain = format!("| plain PPO | plain: {row} |");
        assert!(section.contains(&best), "{row}: {section}");
        assert!(section.contains(&plain), "{row}: {section}");
    }
    let fin = run.join("final");
    // The search designed a plan, so the plan row is the run's own
    // serl-best and the design alone is trained without it.
    assert!(fin.join("hierarchy-alone").join("final.bpk").exists());
    assert!(!fin.join("hierarchy-plan").exists());
    // Plain PPO alone is the run's own ppo-default; its other rows train.
    assert!(!fin.join("hierarchy-plain-alone").exists());
    assert!(fin
        .join("hierarchy-plain-transition")
        .join("final.bpk")
        .exists());

    let a: AlignmentStats = serde_json::from_str(
        &std::fs::read_to_string(fin.join("hierarchy-plan_alignment").join("alignment.json"))
            .unwrap(),
    )
    .unwrap();
    assert!(a.demonstrations >= 256, "{a:?}");
    assert!(
        a.loss_after < a.loss_before,
        "cloning fitted nothing: {a:?}"
    );
    assert!(
        a.tracking_pa.is_some(),
        "the tracker finished episodes: {a:?}"
    );

    let head = read_metrics(&fin.join("hierarchy-transition").join("metrics.jsonl")).unwrap();
    assert_eq!(head.len(), 4);
    for r in &head {
        let (e, still) = (r.transition_error.unwrap(), r.transition_no_change.unwrap());
        assert!(e.is_finite() && still > 0.0, "{e} {still}");
    }
    assert!(
        head[3].transition_error < head[0].transition_error,
        "the head learned nothing: {:?}",
        head.iter().map(|r| r.transition_error).collect::<Vec<_>>()
    );

    let critic = read_metrics(&fin.join("hierarchy-reward_critic").join("metrics.jsonl")).unwrap();
    let weights: Vec<Vec<f64>> = critic
        .iter()
        .map(|r| r.reward_weights.clone().unwrap())
        .collect();
    assert!(
        weights.iter().flatten().any(|&w| w != 1.0),
        "the critic moved nothing: {weights:?}"
    );
    assert!(
        weights.iter().flatten().all(|&w| (0.25..=4.0).contains(&w)),
        "{weights:?}"
    );
    // The design alone trains with none of it.
    let alone = read_metrics(&fin.join("hierarchy-alone").join("metrics.jsonl")).unwrap();
    assert!(alone
        .iter()
        .all(|r| r.transition_error.is_none() && r.reward_weights.is_none()));

    let again = serl(&["evolve", "--resume", run.to_str().unwrap()]);
    assert!(again.status.success(), "{}", text(&again));
    let report2 = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert_eq!(
        hierarchy_section(&report2),
        section,
        "a resumed run gives the same rows"
    );
}

#[test]
fn a_bad_hierarchy_setting_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // The quick hierarchy config with `from` replaced by `to`: what the
    // refused run printed.
    let refused = |from: &str, to: &str, out: &str| {
        let cfg = tiny_config_from(dir.path(), "configs/evolve-hierarchy.toml", "");
        let bad = std::fs::read_to_string(&cfg).unwrap().replace(from, to);
        std::fs::write(&cfg, bad).unwrap();
        let run = dir.path().join(out);
        let o = serl(&[
            "evolve",
            "--config",
            cfg.to_str().unwrap(),
            "--out",
            run.to_str().unwrap(),
        ]);
        assert!(!o.status.success());
        text(&o)
    };
    let o = refused("weight = 0.5", "weight = -1", "r");
    assert!(o.contains("transition.weight"), "{o}");
    let o = refused(
        r#"plan = { shape = "linear" }"#,
        r#"plan = { remaining = [1.0, 0.5, 0.7, 0.0] }"#,
        "r2",
    );
    assert!(o.contains("remaining[2]"), "{o}");
}

/// An OpenAI-compatible reward critic on loopback: its first answer is
/// `first`, its second is not JSON, then `first` again. Every prompt it
/// was sent goes to `prompts`.
fn critic_server(first: Vec<f64>) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let req = common::read_request(&stream);
            log.lock().unwrap().push(
                req["messages"][0]["content"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            );
            let content = if n == 1 {
                "I am not sure these weights matter.".to_string()
            } else {
                serde_json::json!({ "weights": first }).to_string()
            };
            common::answer_completion(&mut stream, &content, 100);
        }
    });
    (url, seen)
}

#[test]
fn serl_train_runs_every_switch_with_a_language_model_as_the_reward_critic() {
    let dir = tempfile::tempdir().unwrap();
    let first = vec![0.5, 1.0, 1.0, 2.0, 3.0];
    let (url, prompts) = critic_server(first.clone());
    let cfg = common::shipped_config("configs/train-hierarchy.toml")
        .replace("total_steps = 8192", "total_steps = 2048")
        .replace("steps = 2048 ", "steps = 256 ")
        .replace("every = 4\n", "every = 1\n")
        .replace("max_step = 1.5", "max_step = 1.5\ncritic = \"llm\"")
        + &format!(
            "\n[llm]\nbackend = \"openai\"\ntemperature = 0.0\n\n[llm.http]\nbase_url = \"{url}\"\nmodel = \"critic\"\nmax_retries = 1\nbackoff_ms = 10\n"
        );
    let path = dir.path().join("train.toml");
    std::fs::write(&path, cfg).unwrap();
    let run = dir.path().join("run");
    let o = serl(&[
        "train",
        "--config",
        path.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));

    let m = read_metrics(&run.join("metrics.jsonl")).unwrap();
    assert_eq!(m.len(), 4);
    let w: Vec<Vec<f64>> = m
        .iter()
        .map(|r| r.reward_weights.clone().unwrap())
        .collect();
    assert_eq!(w[0], first, "the model's weights are applied: {}", text(&o));
    assert_eq!(w[1], first, "an answer that does not parse keeps them");
    assert!(text(&o).contains("weights kept"), "{}", text(&o));
    let seen = prompts.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "one review per update");
    assert!(
        seen[0].contains("`step_pa`") && seen[0].contains("mean"),
        "{}",
        seen[0]
    );
    assert_eq!(
        seen[0].matches("bps").count(),
        1,
        "one window so far: {}",
        seen[0]
    );
    assert_eq!(
        seen[1].matches("bps").count(),
        2,
        "two windows: {}",
        seen[1]
    );
    assert!(run.join("critic-transcript.jsonl").exists());
    // The other switches ran in the same training.
    assert!(run.join("alignment.json").exists());
    assert!(m.iter().all(|r| r.transition_error.is_some()));
    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    assert!(
        report.contains("Reward critic: term weights") && report.contains("Transition supervision")
    );
}
