//! The three kinds of pairs on hand-made candidate records.

use super::*;
use crate::record::Lineage;

/// A reward module asked with `prompt`: the replies in order, the last
/// accepted unless `errors` covers them all.
fn module(prompt: &str, replies: &[&str], errors: &[&str]) -> ModuleRecord {
    let accepted = errors.len() < replies.len();
    ModuleRecord {
        kind: ModuleKind::Reward,
        text: accepted.then(|| replies.last().unwrap().to_string()),
        attempts: replies.len(),
        errors: errors.iter().map(|e| e.to_string()).collect(),
        prompt: prompt.into(),
        replies: replies.iter().map(|r| r.to_string()).collect(),
        inherited_from: None,
    }
}

fn candidate(key: &str, score: Option<f64>, modules: Vec<ModuleRecord>) -> CandidateResult {
    let iteration = key[1..key.find('_').unwrap()].parse().unwrap();
    let mut c = CandidateResult::invalid(key.into(), iteration, 1.0);
    c.score = score;
    c.modules = modules;
    c
}

fn mutated(mut c: CandidateResult, parent: &str) -> CandidateResult {
    c.lineage = Some(Lineage {
        operator: Operator::Mutate,
        parents: vec![parent.into()],
        island: 0,
        module: Some(ModuleKind::Reward),
    });
    c
}

fn kinds(pairs: &[Pair]) -> Vec<(PairKind, &str, &str)> {
    pairs
        .iter()
        .map(|p| (p.kind, p.chosen.as_str(), p.rejected.as_str()))
        .collect()
}

#[test]
fn the_best_reply_to_a_prompt_is_preferred_to_each_worse_one() {
    let all = vec![
        candidate("i0_c0", Some(1.0), vec![module("P", &["a"], &[])]),
        candidate("i0_c1", Some(3.0), vec![module("P", &["b"], &[])]),
        candidate("i0_c2", Some(2.0), vec![module("P", &["c"], &[])]),
        // Another prompt, and an unscored design: no pair.
        candidate("i0_c3", Some(9.0), vec![module("Q", &["d"], &[])]),
        candidate("i0_c4", None, vec![module("P", &["e"], &[])]),
    ];
    let pairs = pairs_from_candidates(&all);
    assert_eq!(
        kinds(&pairs),
        vec![(PairKind::Better, "b", "c"), (PairKind::Better, "b", "a")]
    );
    assert_eq!(pairs[0].source, "i0_c1>i0_c2");
    let sft = sft_from_candidates(&all);
    let replies: Vec<&str> = sft.iter().map(|s| s.reply.as_str()).collect();
    assert_eq!(replies, vec!["b", "d"]);
}

#[test]
fn a_refused_reply_is_rejected_against_the_accepted_one_with_its_reason() {
    let all = vec![candidate(
        "i0_c0",
        Some(1.0),
        vec![module(
            "P",
            &["bad", "", "good"],
            &["no expression", "empty"],
        )],
    )];
    let pairs = pairs_from_candidates(&all);
    assert_eq!(kinds(&pairs), vec![(PairKind::Valid, "good", "bad")]);
    assert_eq!(pairs[0].reason.as_deref(), Some("no expression"));
    // Every attempt refused: nothing to prefer.
    let failed = vec![candidate(
        "i0_c0",
        None,
        vec![module("P", &["x", "y"], &["e1", "e2"])],
    )];
    assert!(pairs_from_candidates(&failed).is_empty());
}

#[test]
fn a_mutation_that_beat_its_parent_is_preferred_to_the_parents_module() {
    let parent = candidate("i0_c0", Some(1.0), vec![module("P", &["old"], &[])]);
    let better = mutated(
        candidate("i1_c0", Some(2.0), vec![module("M1", &["new"], &[])]),
        "i0_c0",
    );
    let worse = mutated(
        candidate("i1_c1", Some(0.5), vec![module("M2", &["worse"], &[])]),
        "i0_c0",
    );
    let pairs = pairs_from_candidates(&[parent.clone(), better, worse]);
    let mutation: Vec<_> = pairs
        .iter()
        .filter(|p| p.kind == PairKind::Mutation)
        .collect();
    assert_eq!(mutation.len(), 1, "{pairs:?}");
    assert_eq!(
        (mutation[0].chosen.as_str(), mutation[0].rejected.as_str()),
        ("new", "old")
    );
    assert_eq!(mutation[0].prompt, "M1");
    // An inherited module is no reply of the designer's: no pair.
    let mut inherited = mutated(
        candidate("i1_c2", Some(5.0), vec![module("M3", &["kept"], &[])]),
        "i0_c0",
    );
    inherited.modules[0].inherited_from = Some("i0_c0".into());
    assert!(pairs_from_candidates(&[parent, inherited]).is_empty());
}

#[test]
fn pairs_come_out_in_the_same_order_every_time() {
    let mut all: Vec<CandidateResult> = (0..6)
        .map(|k| {
            candidate(
                &format!("i0_c{k}"),
                Some(k as f64 % 4.0),
                vec![module("P", &["x", &format!("r{k}")], &["no expression"])],
            )
        })
        .collect();
    for k in 0..3 {
        all.push(mutated(
            candidate(
                &format!("i1_c{k}"),
                Some(5.0 + k as f64),
                vec![module(&format!("M{k}"), &[&format!("m{k}")], &[])],
            ),
            &format!("i0_c{k}"),
        ));
    }
    let first = pairs_from_candidates(&all);
    let count = |kind| first.iter().filter(|p| p.kind == kind).count();
    // Scores 0 1 2 3 0 1: the best (3) over the five lower ones; one
    // refusal each; each mutation beat its parent.
    assert_eq!(PairKind::ALL.map(count), [5, 6, 3], "{:?}", kinds(&first));
    let mut reversed = all.clone();
    reversed.reverse();
    assert_eq!(first, pairs_from_candidates(&reversed));
    assert_eq!(sft_from_candidates(&all), sft_from_candidates(&reversed));
}

#[test]
fn a_mutation_of_a_mutation_is_compared_with_the_reply_that_wrote_the_module() {
    // i1_c0 rewrote the state and kept i0_c0's reward; i2_c0 rewrote the
    // reward of i1_c0 and beat it: its rival is i0_c0's reply.
    let grandparent = candidate("i0_c0", Some(1.0), vec![module("P", &["first"], &[])]);
    let mut kept = module("", &[], &[]);
    kept.text = Some("first".into());
    kept.inherited_from = Some("i0_c0".into());
    let parent = mutated(candidate("i1_c0", Some(2.0), vec![kept]), "i0_c0");
    let child = mutated(
        candidate("i2_c0", Some(3.0), vec![module("M", &["third"], &[])]),
        "i1_c0",
    );
    let pairs = pairs_from_candidates(&[grandparent, parent, child]);
    assert_eq!(kinds(&pairs), vec![(PairKind::Mutation, "third", "first")]);
    assert_eq!(pairs[0].source, "i2_c0>i1_c0");
    assert_eq!(
        (pairs[0].score_chosen, pairs[0].score_rejected),
        (Some(3.0), Some(2.0))
    );
}

#[test]
fn equal_scores_prefer_nothing_and_low_level_trials_are_not_replies() {
    let mut trial = candidate("i0_c9", Some(9.0), vec![module("P", &["c"], &[])]);
    trial.key = "ll0_g0_m0".into();
    let all = vec![
        candidate("i0_c0", Some(2.0), vec![module("P", &["a"], &[])]),
        candidate("i0_c1", Some(2.0), vec![module("P", &["b"], &[])]),
        trial,
    ];
    assert!(pairs_from_candidates(&all).is_empty());
    let sft = sft_from_candidates(&all);
    assert_eq!(sft.len(), 1);
    assert_eq!((sft[0].reply.as_str(), sft[0].score), ("a", Some(2.0)));
}

#[test]
fn the_trainers_records_keep_their_shape() {
    let all = vec![
        candidate("i0_c0", Some(1.0), vec![module("P", &["a"], &[])]),
        candidate("i0_c1", Some(3.0), vec![module("P", &["b"], &[])]),
    ];
    let pairs = pairs_from_candidates(&all);
    assert_eq!(
        pairs[0].dpo_record(),
        serde_json::json!({"prompt": "P", "chosen": "b", "rejected": "a", "score_chosen": 3.0, "score_rejected": 1.0})
    );
    assert_eq!(
        sft_from_candidates(&all)[0].chat_record(),
        serde_json::json!({"messages": [{"role": "user", "content": "P"}, {"role": "assistant", "content": "b"}], "score": 3.0})
    );
    // pairs.jsonl's record: the kind and module in snake case, and back.
    let v = serde_json::to_value(&pairs[0]).unwrap();
    assert_eq!(
        (v["kind"].as_str(), v["module"].as_str()),
        (Some("better"), Some("reward"))
    );
    let back: Pair = serde_json::from_value(v).unwrap();
    assert_eq!(back, pairs[0]);
}

#[test]
fn a_directory_without_candidate_records_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let e = read_run_pairs(&dir.path().join("missing")).unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
    std::fs::create_dir_all(dir.path().join("empty").join("candidates")).unwrap();
    let e = read_run_pairs(&dir.path().join("empty")).unwrap_err();
    assert!(
        e.to_string().contains("empty") && e.to_string().contains("no candidate records"),
        "{e}"
    );
    // A run's records, written as the run writes them.
    let run = dir.path().join("run");
    let all = [
        candidate("i0_c1", Some(3.0), vec![module("P", &["b"], &[])]),
        candidate("i0_c0", Some(1.0), vec![module("P", &["a"], &[])]),
    ];
    for c in all {
        c.record(&run).unwrap();
    }
    let (pairs, sft) = read_run_pairs(&run).unwrap();
    assert_eq!(kinds(&pairs), vec![(PairKind::Better, "b", "a")]);
    assert_eq!(pairs[0].source, format!("{}:i0_c1>i0_c0", run.display()));
    assert_eq!(sft[0].source, format!("{}:i0_c1", run.display()));
}
