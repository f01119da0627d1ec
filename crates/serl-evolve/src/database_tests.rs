//! The program database's rules, on hand-made candidates.

use super::*;
use crate::record::Validation;
use serl_design::{Design, RewardModule};

/// A candidate with `reward` and `afi`, scored `score` (`None`: invalid).
fn candidate(key: &str, score: Option<f64>, reward: &str, afi: f64) -> CandidateResult {
    let mut c = CandidateResult::invalid(key.into(), 0, 1.0);
    if let Some(s) = score {
        let mut d = Design::baseline();
        d.reward = RewardModule::compile(reward).unwrap();
        c.design = Some(d);
        c.score = Some(s);
        c.validation = Some(Validation {
            afi,
            ..Validation::default()
        });
    }
    c
}

fn fresh(island: usize) -> Lineage {
    Lineage {
        operator: Operator::Fresh,
        parents: Vec::new(),
        island,
        module: None,
    }
}

fn database(all: &[CandidateResult], islands: usize) -> Database {
    let mut db = Database::new(islands);
    for (i, c) in all.iter().enumerate() {
        db.add(
            c,
            fresh(i % islands),
            &serl_train::TrainConfig::default(),
            all,
        );
    }
    db
}

#[test]
fn an_invalid_design_is_listed_but_never_becomes_a_parent() {
    let all = vec![
        candidate("i0_c0", None, "", 0.0),
        candidate("i0_c1", Some(-50.0), "step_pa", 0.0),
    ];
    let db = database(&all, 1);
    assert_eq!(db.programs.len(), 2);
    assert!(!db.programs[0].valid);
    assert_eq!(db.islands[0].members, ["i0_c1"]);
    let cfg = SearchConfig {
        operators: OperatorWeights {
            mutate: 1.0,
            crossover: 0.0,
            fresh: 0.0,
            builtin: 0.0,
        },
        // A hot temperature gives every elite a fair chance: still never
        // the invalid one.
        temperature: 1e6,
        ..SearchConfig::default()
    };
    for k in 0..200 {
        let c = db.choose(&cfg, 7, (1, k), 0, &all);
        assert_eq!(c.operator, Operator::Mutate);
        assert_eq!(c.parents, ["i0_c1"], "draw {k}");
    }
}

#[test]
fn an_island_without_parents_writes_afresh_and_crossover_needs_two() {
    let all = vec![candidate("i0_c0", Some(1.0), "step_pa", 0.0)];
    let db = database(&all, 2);
    let cross = SearchConfig {
        operators: OperatorWeights {
            mutate: 0.0,
            crossover: 1.0,
            fresh: 0.0,
            builtin: 0.0,
        },
        ..SearchConfig::default()
    };
    // Island 0 has one design and no other island has any: a mutation.
    let c = db.choose(&cross, 7, (1, 0), 0, &all);
    assert_eq!((c.island, c.operator), (0, Operator::Mutate));
    assert_eq!(c.parents, ["i0_c0"]);
    // Island 1 has none: a fresh design.
    let c = db.choose(&cross, 7, (1, 1), 1, &all);
    assert_eq!((c.island, c.operator), (1, Operator::Fresh));
    assert!(c.parents.is_empty());
}

#[test]
fn a_cell_keeps_its_best_and_different_kinds_keep_their_own_cells() {
    let all = vec![
        candidate("a", Some(1.0), "step_pa", 0.0),
        candidate("b", Some(3.0), "step_pa", 0.0),
        candidate("c", Some(2.0), "step_pa", 0.0),
        // Another kind: two terms, and half the order left unfilled.
        candidate("d", Some(-5.0), "step_pa - 2 * remaining_inv", 0.5),
    ];
    let db = database(&all, 1);
    let elites = &db.islands[0].elites;
    let cell = |c: &CandidateResult| Cell::of(c, &serl_train::TrainConfig::default()).unwrap();
    assert_eq!((cell(&all[0]).reward_terms, cell(&all[0]).afi), (1, 0));
    assert_eq!((cell(&all[3]).reward_terms, cell(&all[3]).afi), (2, 2));
    assert_eq!(elites.len(), 2, "{elites:?}");
    assert_eq!(
        elites[&cell(&all[0]).label()],
        "b",
        "the best of the cell, not the last"
    );
    assert_eq!(
        elites[&cell(&all[3]).label()],
        "d",
        "a poor design of its own kind stays"
    );
    assert_eq!(db.islands[0].members.len(), 4);
}

#[test]
fn islands_migrate_their_best_on_schedule_in_a_ring() {
    let all = vec![
        candidate("a", Some(1.0), "step_pa", 0.0),
        candidate("b", Some(5.0), "step_pa", 0.0),
        candidate("c", Some(3.0), "step_pa", 0.0),
    ];
    let mut db = database(&all, 3);
    db.migrate(1, 2, &all);
    assert!(
        db.migrations.is_empty(),
        "round 1 of every 2: nothing moves"
    );
    db.migrate(2, 2, &all);
    let moved: Vec<(usize, usize, &str)> = db
        .migrations
        .iter()
        .map(|m| (m.from, m.to, m.key.as_str()))
        .collect();
    assert_eq!(moved, [(0, 1, "a"), (1, 2, "b"), (2, 0, "c")]);
    assert!(db.islands[1].members.contains(&"a".to_string()));
    // Island 1's cell keeps its own better design; island 2 takes b.
    let label = Cell::of(&all[0], &serl_train::TrainConfig::default())
        .unwrap()
        .label();
    assert_eq!(db.islands[1].elites[&label], "b");
    assert_eq!(db.islands[2].elites[&label], "b");
    assert_eq!(db.islands[0].elites[&label], "c");
}

#[test]
fn the_same_seed_draws_the_same_choices_and_a_cold_temperature_picks_the_best() {
    let all = vec![
        candidate("a", Some(1.0), "step_pa", 0.0),
        candidate("b", Some(9.0), "step_pa - 2 * remaining_inv", 0.0),
    ];
    let db = database(&all, 1);
    let cfg = SearchConfig::default();
    let draws = |seed| -> Vec<Choice> {
        (0..20)
            .map(|k| db.choose(&cfg, seed, (3, k), 0, &all))
            .collect()
    };
    assert_eq!(draws(7), draws(7));
    assert_ne!(draws(7), draws(8));
    let cold = SearchConfig {
        temperature: 0.01,
        ..SearchConfig::default()
    };
    for k in 0..50 {
        let c = db.choose(&cold, 7, (1, k), 0, &all);
        if c.operator == Operator::Mutate {
            assert_eq!(c.parents, ["b"]);
        }
    }
}

#[test]
fn a_bad_search_table_names_its_field() {
    let bad = SearchConfig {
        migrate_every: 0,
        ..SearchConfig::default()
    };
    assert!(bad.validate().unwrap_err().contains("migrate_every"));
    let bad = SearchConfig {
        operators: OperatorWeights {
            mutate: 0.0,
            crossover: 0.0,
            fresh: 0.0,
            builtin: 0.0,
        },
        ..SearchConfig::default()
    };
    assert!(bad.validate().unwrap_err().contains("operators"));
}
