//! `configs/evolve-hierarchy.toml` on the bundled data: the designer
//! writes a plan with the other modules, and the best design is retrained
//! alone and with each of plan, plan + alignment, transition supervision
//! and the reward critic, each a row of the report. A resumed run trains
//! nothing and gives the same table; a bad setting is named.

mod common;

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
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));

    let report = std::fs::read_to_string(run.join("report.md")).unwrap();
    let section = hierarchy_section(&report);
    for row in [
        "design alone",
        "plan",
        "plan_alignment",
        "transition",
        "reward_critic",
    ] {
        assert!(section.contains(&format!("| {row} |")), "{row}: {section}");
    }
    let fin = run.join("final");
    // The search designed a plan, so the plan row is the run's own
    // serl-best and the design alone is trained without it.
    assert!(fin.join("hierarchy-alone").join("final.bpk").exists());
    assert!(!fin.join("hierarchy-plan").exists());

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
    let cfg = tiny_config_from(dir.path(), "configs/evolve-hierarchy.toml", "");
    let bad = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("weight = 0.5", "weight = -1");
    std::fs::write(&cfg, bad).unwrap();
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        dir.path().join("r").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("transition.weight"), "{}", text(&o));

    let cfg = tiny_config_from(dir.path(), "configs/evolve-hierarchy.toml", "");
    let bad = std::fs::read_to_string(&cfg).unwrap().replace(
        r#"plan = { shape = "linear" }"#,
        r#"plan = { remaining = [1.0, 0.5, 0.7, 0.0] }"#,
    );
    std::fs::write(&cfg, bad).unwrap();
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        dir.path().join("r2").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("remaining[2]"), "{}", text(&o));
}
