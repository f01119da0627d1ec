//! The GBNF grammars `[llm] gbnf = true` sends in llama.cpp's `grammar`
//! field, against their Lark twins (which the local backend decodes with)
//! and against serl's parser and validator:
//! - every reply drawn from a module's Lark grammar is derived by its GBNF
//!   (the GBNF's language holds the Lark's: it differs only by optional
//!   spaces in the JSON and fractions under a fractional lower bound);
//! - 200 replies drawn at random from each module's GBNF are JSON of the
//!   module's shape whose programs parse; the share that also validates is
//!   printed (`cargo test -p serl-design --test gbnf -- --nocapture`).
//!
//! The hostile corpus against the reward's GBNF is in `tests/hostile.rs`.

#[path = "../../serl-expr/tests/gbnf/mod.rs"]
mod gbnf;

use gbnf::{Grammar, Rng};
use serl_design::{extract, module_gbnf, module_lark, well_formed, Module, ModuleKind};
use serl_local::{ByteGrammar, Constraint};

#[test]
fn every_reply_of_the_lark_grammar_is_derived_by_the_gbnf() {
    let bytes = ByteGrammar::new().unwrap();
    for kind in ModuleKind::ALL {
        let gbnf = Grammar::parse(&module_gbnf(kind));
        let lark = Constraint::Lark(module_lark(kind));
        for seed in 0..40 {
            let reply = bytes
                .sample(&lark, seed, 20_000)
                .unwrap()
                .unwrap_or_else(|| panic!("{kind:?}: draw {seed} did not finish"));
            assert!(
                gbnf.derives(&reply),
                "{kind:?}: the GBNF does not derive the Lark draw {reply}"
            );
        }
    }
}

#[test]
fn replies_drawn_from_each_module_gbnf_are_well_formed() {
    for kind in ModuleKind::ALL {
        let gbnf = Grammar::parse(&module_gbnf(kind));
        let mut rng = Rng::new(kind as u64);
        let mut valid = 0;
        for _ in 0..200 {
            let reply = gbnf.sample(&mut rng, 40, 400);
            assert!(well_formed(kind, &reply), "{kind:?}: {reply}");
            assert!(gbnf.derives(&reply), "{kind:?}: {reply}");
            let text = extract(kind, &reply).unwrap_or(reply);
            valid += usize::from(Module::parse(kind, &text).is_ok());
        }
        println!("{kind:?}: 200 of 200 well-formed, {valid} validate");
    }
}

#[test]
fn the_gbnf_takes_a_designer_s_json_with_or_without_spaces() {
    let cases = [
        (
            ModuleKind::Reward,
            r#"{"program": "step_pa - 0.5 * remaining_inv"}"#,
        ),
        (ModuleKind::Reward, r#"{"program":"tanh(twap_gain)"}"#),
        (
            ModuleKind::State,
            r#"{"features": [{"name": "m5", "program": "mean(ret_1, 5)"}]}"#,
        ),
        (
            ModuleKind::Architecture,
            r#"{"window": 4, "blocks": [{"kind": "gru", "hidden": 8}, {"kind": "dense", "width": 64, "activation": "tanh"}]}"#,
        ),
        (
            ModuleKind::Communication,
            r#"{"broadcast": [{"name": "left", "program": "inventory_left"}], "aggregate": "mean"}"#,
        ),
    ];
    for (kind, reply) in cases {
        let g = Grammar::parse(&module_gbnf(kind));
        assert!(g.derives(reply), "{kind:?} refused {reply}");
        let text = extract(kind, reply).unwrap_or_else(|| reply.to_string());
        assert!(Module::parse(kind, &text).is_ok(), "{kind:?}: {reply}");
    }
    // What the grammar rules out: a program that does not parse, a GRU
    // after the first block, an out-of-range width, an unknown field,
    // properties out of the schema's order.
    let refused = [
        (ModuleKind::Reward, r#"{"program": "reward = step_pa"}"#),
        (
            ModuleKind::Architecture,
            r#"{"blocks": [{"kind": "dense", "width": 4}, {"kind": "gru", "hidden": 8}]}"#,
        ),
        (
            ModuleKind::Architecture,
            r#"{"blocks": [{"kind": "dense", "width": 0}]}"#,
        ),
        (ModuleKind::Reward, r#"{"program": "step_pa", "extra": 1}"#),
        (
            ModuleKind::Communication,
            r#"{"aggregate": "mean", "broadcast": [{"name": "left", "program": "inventory_left"}]}"#,
        ),
    ];
    for (kind, reply) in refused {
        let g = Grammar::parse(&module_gbnf(kind));
        assert!(!g.derives(reply), "{kind:?} derived {reply}");
    }
}
