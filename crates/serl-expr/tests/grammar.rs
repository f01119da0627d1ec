//! The exported GBNF grammar against the compiler: every program derived
//! from the grammar compiles, and strings the grammar cannot derive are
//! recognised as such.

mod gbnf;

use gbnf::{Generator, Grammar};
use serl_expr::{Limits, Program, VarSet};

fn vars() -> VarSet {
    VarSet::new(&["step_pa", "remaining_inv", "time_left", "done"])
}

/// Programs generated from the grammar, with a fixed seed.
const PROGRAMS: usize = 400;
const SEED: u64 = 0x5E51_6BAF;

#[test]
fn every_program_derived_from_the_gbnf_compiles() {
    let vars = vars();
    let g = Grammar::parse(&serl_expr::gbnf(&vars));
    let mut gen = Generator::new(&g, SEED, Limits::default().max_window);
    let mut failures = Vec::new();
    let mut lengths = Vec::new();
    for _ in 0..PROGRAMS {
        let src = gen.program();
        lengths.push(src.len());
        // The generator and the recognizer agree: the string is derivable.
        assert!(
            g.derives(&src),
            "the recognizer refuses a generated program:\n{src}"
        );
        match Program::compile(&src, &vars) {
            Ok(p) => {
                // The generator built the tree the parser builds.
                assert_eq!(p.nodes(), gen.nodes, "node count of:\n{src}");
                let mut st = p.new_state();
                for row in [[0.5, 1.0, 0.25, 0.0], [-3.0, 0.0, 0.0, 1.0]] {
                    let v = p.eval(&mut st, &row);
                    assert!(v.is_finite(), "{src} gave {v}");
                }
            }
            Err(e) => failures.push(format!("{e}\n    in: {src:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {PROGRAMS} derived programs do not compile:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The programs are not all trivial...
    lengths.sort_unstable();
    assert!(
        lengths[PROGRAMS / 2] >= 20 && lengths[PROGRAMS - 1] >= 200,
        "median {} bytes, longest {}",
        lengths[PROGRAMS / 2],
        lengths[PROGRAMS - 1]
    );
    // ...and every alternative of every rule, and every literal, was used.
    for (rule, alts) in &g.rules {
        for (i, alt) in alts.iter().enumerate() {
            assert!(
                gen.taken.contains(&(rule.clone(), i)),
                "alternative {i} of {rule} was never generated: {alt:?}"
            );
        }
    }
    let missing: Vec<String> = g.literals().difference(&gen.emitted).cloned().collect();
    assert!(missing.is_empty(), "literals never generated: {missing:?}");
}

#[test]
fn the_recognizer_refuses_what_the_grammar_does_not_say() {
    let vars = vars();
    let g = Grammar::parse(&serl_expr::gbnf(&vars));
    for ok in [
        "step_pa",
        " step_pa - 2 * max(remaining_inv - time_left, 0)^2 ",
        "let v_x = 1 in v_x",
        "if done > 0 then -1.5e-3 else mean(step_pa, 64)",
        "if !(done > 0) && time_left != 1 || false then 1 else 0",
    ] {
        assert!(g.derives(ok), "{ok}");
        Program::compile(ok, &vars).unwrap();
    }
    // Strings the grammar cannot derive, and whether the compiler takes
    // them: the grammar is stricter than the parser (comments, `;` for
    // `in`, `.5` and `1.`), never looser.
    for (bad, compiles) in [
        ("", false),
        ("  ", false),
        ("step_pa +", false),
        ("(step_pa", false),
        ("step_pa)", false),
        ("letv_x = 1 in v_x", false),
        ("let x = 1 in x", true),
        ("let v_x = 1; v_x", true),
        ("if done > 0 then 1", false),
        ("min(step_pa)", false),
        ("clip(step_pa, 1)", false),
        ("mean(step_pa + 1, 5)", false),
        ("mean(step_pa, 0)", false),
        ("mean(step_pa, 100)", false),
        ("1.", true),
        (".5", true),
        ("1e", false),
        ("step_pa # a comment", true),
        ("unknown", false),
        ("sqrt step_pa", false),
        ("1 < 2 < 3", false),
        ("step_pa ? 1 : 0", false),
    ] {
        assert!(!g.derives(bad), "the grammar derives {bad:?}");
        assert_eq!(
            Program::compile(bad, &vars).is_ok(),
            compiles,
            "{bad:?}: {:?}",
            Program::compile(bad, &vars).err()
        );
    }
}

#[test]
fn the_grammar_without_windows_writes_programs_that_read_only_the_current_step() {
    let vars = vars();
    let g = Grammar::parse(&serl_expr::gbnf_with(&vars, false));
    let mut gen = Generator::new(&g, SEED ^ 1, Limits::default().max_window);
    for _ in 0..PROGRAMS {
        let src = gen.program();
        let p = Program::compile(&src, &vars).unwrap_or_else(|e| panic!("{e}\n    in: {src:?}"));
        assert!(!p.has_windows(), "a window function in:\n{src}");
    }
    assert!(g.derives("step_pa - 2 * remaining_inv^2"));
    assert!(!g.derives("mean(step_pa, 5)"));
    assert!(Grammar::parse(&serl_expr::gbnf(&vars)).derives("mean(step_pa, 5)"));
}
