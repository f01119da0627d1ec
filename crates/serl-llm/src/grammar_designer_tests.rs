//! The random grammar designer's draws, mutations and crossovers, checked
//! against the module grammars and the validator.

use super::*;
use crate::prompts::{Parent, TaskInfo};

const DRAWS: usize = 200;

/// Every module kind for the default task, and a state module for a
/// task whose agent places its orders (its programs read the queue).
fn cases() -> Vec<(ModuleKind, TaskInfo)> {
    let placing = TaskInfo {
        placements: vec!["cross".into(), "touch".into()],
        ..TaskInfo::default()
    };
    let all = ModuleKind::ALL.map(|k| (k, TaskInfo::default()));
    all.into_iter()
        .chain([(ModuleKind::State, placing)])
        .collect()
}

fn context(kind: ModuleKind, task: TaskInfo) -> ModuleContext {
    ModuleContext::new(kind, task, "m", "m")
}

/// `DRAWS` fresh replies for `kind` from a designer of `seed`.
fn draws(kind: ModuleKind, task: TaskInfo, seed: u64) -> Vec<String> {
    let mut d = GrammarDesigner::new(seed, 1.0);
    let ctx = context(kind, task);
    (0..DRAWS)
        .map(|_| d.propose(kind, &ctx).unwrap().text)
        .collect()
}

#[cfg(feature = "local")]
#[test]
fn every_fresh_draw_is_a_sentence_of_its_modules_lark_grammar() {
    use serl_local::{ByteGrammar, Constraint};
    let bytes = ByteGrammar::new().unwrap();
    for (kind, task) in cases() {
        let grammar = Constraint::Lark(serl_design::module_lark(kind));
        for reply in draws(kind, task, 1) {
            assert!(
                bytes.accepts(&grammar, &reply).unwrap(),
                "{kind:?}: not in the grammar: {reply}"
            );
        }
    }
}

/// The share of fresh draws `generate` accepts before its smoke test,
/// per module; each floor is a little under the share measured (with
/// `--nocapture`), so that a draw that breaks the validator more often
/// than it did fails the test.
#[test]
fn the_share_of_fresh_draws_that_validate_stays_above_its_floor() {
    // Measured at seed 2: 100% of state features (either task),
    // imagined scenarios and broadcasts; 82.5% of rewards (the rest read
    // no state: a constant, or variables that cancel, refused since
    // issue #61); 62.5% of networks (the rest past the parameter or the
    // compute budget; 64% before the compute limit),
    // 84% of markets (the rest past 2,000 agents), 52% of plans (a drawn
    // curve never starts at 1 and falls to 0; every shape validates). No
    // grammar says these.
    let floors = [
        (ModuleKind::Reward, 0.78),
        (ModuleKind::State, 0.95),
        (ModuleKind::Architecture, 0.55),
        (ModuleKind::Imagination, 0.95),
        (ModuleKind::Profiling, 0.75),
        (ModuleKind::Communication, 0.95),
        (ModuleKind::Plan, 0.45),
    ];
    for (kind, task) in cases() {
        let placing = !task.placements.is_empty();
        let replies = draws(kind, task, 2);
        let ok = replies.iter().filter(|r| module(kind, r).is_some()).count();
        let share = ok as f64 / DRAWS as f64;
        let tag = if placing { " (placing)" } else { "" };
        eprintln!(
            "{kind:?}{tag}: {ok} of {DRAWS} validate ({:.0}%)",
            100.0 * share
        );
        let floor = floors.iter().find(|f| f.0 == kind).map_or(1.0, |f| f.1);
        assert!(share >= floor, "{kind:?}{tag}: {share} < {floor}");
    }
}

#[test]
fn the_same_seed_draws_the_same_modules_and_another_seed_others() {
    for (kind, task) in cases() {
        let a = draws(kind, task.clone(), 7);
        assert_eq!(a, draws(kind, task.clone(), 7), "{kind:?}");
        let b = draws(kind, task, 8);
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(same < DRAWS / 2, "{kind:?}: {same} of {DRAWS} draws alike");
    }
}

/// The first valid fresh draw of a designer of `seed`, as the run
/// stores a module: its text (pretty JSON, a bare program).
fn parent(kind: ModuleKind, seed: u64) -> String {
    let mut d = GrammarDesigner::new(seed, 1.0);
    let ctx = context(kind, TaskInfo::default());
    (0..100)
        .find_map(|_| {
            let r = d.propose(kind, &ctx).unwrap().text;
            Module::parse(kind, &extract(kind, &r)?).ok()
        })
        .unwrap_or_else(|| panic!("{kind:?}: no valid draw in 100"))
        .text()
}

fn operate(kind: ModuleKind, operator: &str, sources: &[String], seed: u64) -> String {
    let parents = sources
        .iter()
        .map(|s| Parent {
            source: s.clone(),
            ..Parent::default()
        })
        .collect();
    operate_on(kind, operator, parents, seed)
}

/// `operator`'s child of `parents`, from a designer of `seed`.
fn operate_on(kind: ModuleKind, operator: &str, parents: Vec<Parent>, seed: u64) -> String {
    let mut ctx = context(kind, TaskInfo::default());
    ctx.operator = operator.into();
    ctx.parents = parents;
    GrammarDesigner::new(seed, 1.0)
        .propose(kind, &ctx)
        .unwrap()
        .text
}

/// The module of `reply`, as `generate` reads it.
fn parsed(kind: ModuleKind, reply: &str) -> Module {
    let text = extract(kind, reply).unwrap_or_else(|| panic!("{kind:?}: {reply}"));
    Module::parse(kind, &text).unwrap_or_else(|e| panic!("{kind:?}: {e}\n{reply}"))
}

#[test]
fn a_mutation_changes_its_parent_and_still_validates() {
    for kind in ModuleKind::ALL {
        let p = parent(kind, 3);
        let before = parsed(kind, &p);
        for seed in 0..10 {
            let child = operate(kind, "mutate", std::slice::from_ref(&p), seed);
            assert_ne!(parsed(kind, &child), before, "{kind:?}: {child}");
        }
    }
}

/// A mutation is one change: an architecture's child keeps all its
/// parent's blocks but one (changed, added or removed), or all of
/// them and changes its window.
#[test]
fn a_mutation_of_a_network_changes_one_place() {
    let kind = ModuleKind::Architecture;
    let p = r#"{"window": 4, "blocks": [{"kind": "dense", "width": 64, "activation": "tanh"},
            {"kind": "layer_norm"}, {"kind": "dense", "width": 32}]}"#;
    let blocks = |text: &str| -> (Value, Vec<Value>) {
        let v: Value = serde_json::from_str(&extract(kind, text).unwrap()).unwrap();
        (v["window"].clone(), v["blocks"].as_array().unwrap().clone())
    };
    let (window, before) = blocks(p);
    for seed in 0..40 {
        let child = operate(kind, "mutate", &[p.to_string()], seed);
        parsed(kind, &child);
        let (w, after) = blocks(&child);
        let kept = |a: &[Value], b: &[Value]| a.iter().filter(|x| b.contains(x)).count();
        let changes = match after.len() as i64 - before.len() as i64 {
            0 => before.len() - kept(&before, &after) + usize::from(w != window),
            1 => usize::from(kept(&before, &after) != before.len()) + 1,
            -1 => usize::from(kept(&after, &before) != after.len()) + 1,
            _ => 99,
        };
        assert_eq!(changes, 1, "seed {seed}: {child}");
    }
}

#[test]
fn a_crossover_of_two_parents_validates_and_is_neither() {
    for kind in ModuleKind::ALL {
        let parents = [parent(kind, 4), parent(kind, 5)];
        let before = [parsed(kind, &parents[0]), parsed(kind, &parents[1])];
        for seed in 0..10 {
            let child = operate(kind, "crossover", &parents, seed);
            let m = parsed(kind, &child);
            if kind == ModuleKind::Reward {
                assert!(!before.contains(&m), "{child}");
            }
        }
    }
    // Two rewards give a reward made of both: one's subtree in the
    // other's place.
    let parents = [
        "step_pa - 2 * remaining_inv ^ 2".into(),
        "twap_gain + tanh(fill_qty)".into(),
    ];
    let mixed = (0..20)
        .filter(|&seed| {
            let child = operate(ModuleKind::Reward, "crossover", &parents, seed);
            let has = |names: [&str; 2]| names.iter().any(|n| child.contains(n));
            has(["step_pa", "remaining_inv"]) && has(["twap_gain", "fill_qty"])
        })
        .count();
    assert!(mixed >= 15, "{mixed} of 20 children mix their parents");
}

/// A parent that does not parse, and a retry after a rejection, get
/// the fresh draw a designer of the same seed would make.
#[test]
fn a_broken_parent_or_a_retry_draws_afresh() {
    let kind = ModuleKind::State;
    let fresh = GrammarDesigner::new(9, 1.0)
        .propose(kind, &context(kind, TaskInfo::default()))
        .unwrap()
        .text;
    assert_eq!(operate(kind, "mutate", &["not json".into()], 9), fresh);
    let mut ctx = context(kind, TaskInfo::default());
    ctx.operator = "mutate".into();
    ctx.parents = vec![Parent {
        source: parent(kind, 3),
        ..Parent::default()
    }];
    ctx.error = Some("rejected".into());
    let retry = GrammarDesigner::new(9, 1.0).propose(kind, &ctx).unwrap();
    assert_eq!(retry.text, fresh);
    let mut d = GrammarDesigner::new(9, 1.0);
    assert_eq!(d.refine(&ctx).unwrap().text, "m");
    assert!(!d.is_llm());
    assert_eq!(d.name(), "random grammar draws (no LLM), seed 9");
}

/// A cold designer writes short programs and the fewest items; a hot
/// one longer programs and longer lists.
#[test]
fn the_temperature_sets_the_size_of_a_draw() {
    let kind = ModuleKind::State;
    let size = |t: f64| {
        let mut d = GrammarDesigner::new(1, t);
        let ctx = context(kind, TaskInfo::default());
        (0..50)
            .map(|_| d.propose(kind, &ctx).unwrap().text.len())
            .sum::<usize>()
    };
    let (cold, warm, hot) = (size(0.01), size(1.0), size(3.0));
    assert!(cold < warm && warm < hot, "{cold} {warm} {hot}");
    let ctx = context(kind, TaskInfo::default());
    let r = GrammarDesigner::new(1, 0.0)
        .propose(kind, &ctx)
        .unwrap()
        .text;
    let v: Value = serde_json::from_str(&r).unwrap();
    assert_eq!(v["features"].as_array().unwrap().len(), 1, "{r}");
}

/// A run hands its parents over as modules, read as they are; a parent
/// given only as text is parsed. Both are the same parent: the same seed
/// changes either into the same child, under both operators.
#[test]
fn a_parent_handed_over_as_a_module_is_changed_as_its_text_is() {
    for kind in ModuleKind::ALL {
        let sources = [parent(kind, 3), parent(kind, 4)];
        for operator in ["mutate", "crossover"] {
            let as_text = operate(kind, operator, &sources, 11);
            let typed = sources
                .iter()
                .map(|s| Parent {
                    source: s.clone(),
                    module: Some(Module::parse(kind, s).unwrap()),
                    ..Parent::default()
                })
                .collect();
            let as_module = operate_on(kind, operator, typed, 11);
            assert_eq!(as_module, as_text, "{kind:?} {operator}");
        }
    }
}
