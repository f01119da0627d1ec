//! Program trees: printing, parsing back, and random draws of the typed
//! grammar.

use super::*;
use crate::{check_syntax, Program};

/// A fixed stream of uniforms (a linear congruential generator).
fn stream(seed: u64) -> impl FnMut() -> f64 {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[test]
fn a_parsed_program_prints_as_source_that_parses_to_the_same_tree() {
    for src in [
        "a - 2 * b^2 / (c + 1) + 3 * c - log(a)",
        "-(a - b) * -c ^ 2",
        "(a ^ b) ^ c + a ^ (b ^ c)",
        "if a > b && !(a < 0 || b < 0) then (if c then 1 else 2) + 1 else mean(a, 5)",
        "let x = a + 1 in x * (x - 1)",
        "a - (b - c) - (d + e) / (f * g)",
        "(a < b) == (c < d)",
        "!true && !(a <= b)",
    ] {
        let t = Tree::parse(src).unwrap();
        let printed = t.to_string();
        assert_eq!(Tree::parse(&printed).unwrap(), t, "{src} -> {printed}");
    }
    assert_eq!(
        Tree::parse("a - (b + c)").unwrap().to_string(),
        "a - (b + c)"
    );
    assert_eq!(Tree::parse("((a)) * 2").unwrap().to_string(), "a * 2");
}

#[test]
fn subtrees_are_numbered_in_preorder_and_window_arguments_are_not_places() {
    let mut t = Tree::parse("a + mean(b, 3) * 2").unwrap();
    assert_eq!(t.size(), 7);
    assert_eq!(t.get(1), Some(&Tree::Name("a".into())));
    assert_eq!(t.get(6), Some(&Tree::Num(2.0)));
    assert_eq!(t.get(7), None);
    assert_eq!(t.places(), vec![0, 1, 2, 3, 6]);
    *t.get_mut(6).unwrap() = Tree::Name("c".into());
    assert_eq!(t.to_string(), "a + mean(b, 3) * c");
    assert!(Tree::parse("a < b || c").unwrap().is_condition());
    assert!(!Tree::parse("if a < b then 1 else 2")
        .unwrap()
        .is_condition());
}

/// Drawn programs parse and type-check over their variables, rewards'
/// without windows; a colder draw is shorter on average.
#[test]
fn drawn_programs_compile_and_the_temperature_sets_their_size() {
    let vars = VarSet::new(&["x", "y", "z"]);
    let mut mean_size = Vec::new();
    for (t, windows) in [(0.3, false), (1.0, true), (3.0, true)] {
        let draw = ProgramDraw::new(&vars, windows, t);
        let mut u = stream(7);
        let mut total = 0;
        let mut compiled = 0;
        for _ in 0..200 {
            let p = draw.program(&mut u).to_string();
            check_syntax(&p).unwrap_or_else(|e| panic!("{p}: {e}"));
            let windowed = WINDOW_FUNCTIONS
                .iter()
                .any(|f| p.contains(&format!("{f}(")));
            assert!(windows || !windowed, "{p}");
            compiled += usize::from(Program::compile(&p, &vars).is_ok());
            total += Tree::parse(&p).map_or(0, |t| t.size());
        }
        assert!(compiled >= 190, "t = {t}: {compiled} of 200 compile");
        mean_size.push(total as f64 / 200.0);
    }
    assert!(
        mean_size[0] < mean_size[1] && mean_size[1] < mean_size[2],
        "{mean_size:?}"
    );
    let cold = ProgramDraw::new(&vars, true, 0.0);
    let p = cold.program(&mut stream(1)).to_string();
    assert!(!p.contains(' '), "{p}");
}

/// A mutation changes one place and keeps the program well typed; a
/// crossover puts a subtree of the donor in the tree.
#[test]
fn a_mutation_changes_a_program_and_a_crossover_mixes_two() {
    let vars = VarSet::new(&["x", "y"]);
    let draw = ProgramDraw::new(&vars, true, 1.0);
    let mut u = stream(3);
    let parent = Tree::parse("x - 2 * y ^ 2 + (if x > y then 1 else 0)").unwrap();
    let changed = (0..50)
        .map(|_| parent.mutated(&draw, &mut u).to_string())
        .inspect(|m| assert!(Program::compile(m, &vars).is_ok(), "{m}"))
        .filter(|m| *m != parent.to_string())
        .count();
    assert!(
        changed >= 40,
        "{changed} of 50 mutations change the program"
    );
    let donor = Tree::parse("if y < 2 then mean(y, 7) else x").unwrap();
    for _ in 0..20 {
        let child = parent.crossed(&donor, &mut u).unwrap().to_string();
        assert!(Program::compile(&child, &vars).is_ok(), "{child}");
    }
    let condition = Tree::parse("x < 1").unwrap();
    let child = Tree::parse("y")
        .unwrap()
        .crossed(&condition, &mut u)
        .unwrap();
    assert!(!child.is_condition(), "{child}");
}

#[test]
fn the_window_functions_are_the_languages() {
    let vars = VarSet::new(&["x"]);
    let rules = crate::typed_rules(&vars, true, crate::Dialect::Lark);
    for f in WINDOW_FUNCTIONS {
        assert!(rules.contains(&format!("\"{f}\"")), "{f}");
        Program::compile(&format!("{f}(x, 3)"), &vars).unwrap();
    }
}
