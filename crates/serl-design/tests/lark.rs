//! The Lark grammars the local backend decodes with, against serl's own
//! parser and validator: 200 replies drawn at random from each module's
//! grammar are all complete, are JSON of the module's shape, and hold
//! programs that parse; the share that also validates (names, types,
//! bounds) is printed. With `--nocapture`:
//! `cargo test -p serl-design --test lark -- --nocapture`.

use serl_design::{module_lark, well_formed, Module, ModuleKind};
use serl_local::{ByteGrammar, Constraint};

const DRAWS: u64 = 200;

#[test]
fn replies_drawn_from_each_module_grammar_parse() {
    let bytes = ByteGrammar::new().unwrap();
    for kind in ModuleKind::ALL {
        let grammar = Constraint::Lark(module_lark(kind));
        let mut valid = 0;
        let mut longest = 0;
        for seed in 0..DRAWS {
            let reply = bytes
                .sample(&grammar, seed, 20_000)
                .unwrap()
                .unwrap_or_else(|| panic!("{kind:?}: draw {seed} did not finish"));
            longest = longest.max(reply.len());
            assert!(well_formed(kind, &reply), "{kind:?}: {reply}");
            assert!(bytes.accepts(&grammar, &reply).unwrap());
            let text = serl_design::extract(kind, &reply).unwrap_or(reply);
            match Module::parse(kind, &text) {
                Ok(_) => valid += 1,
                // The grammar says what it can of the validator's rules.
                Err(e) => assert!(!e.to_string().contains("do not divide"), "{text}: {e}"),
            }
        }
        println!("{kind:?}: {DRAWS} of {DRAWS} parse, {valid} validate; longest {longest} bytes");
    }
}

#[test]
fn a_gru_or_book_attention_is_allowed_only_as_the_first_block() {
    let bytes = ByteGrammar::new().unwrap();
    let grammar = Constraint::Lark(module_lark(ModuleKind::Architecture));
    let first = r#"{"blocks":[{"kind":"gru","hidden":8},{"kind":"dense","width":4}]}"#;
    let later = r#"{"blocks":[{"kind":"dense","width":4},{"kind":"gru","hidden":8}]}"#;
    let attention = r#"{"blocks":[{"kind":"dense","width":4},{"kind":"book_attention","d_model":8,"heads":2}]}"#;
    assert!(bytes.accepts(&grammar, first).unwrap());
    assert!(!bytes.accepts(&grammar, later).unwrap());
    assert!(!bytes.accepts(&grammar, attention).unwrap());
    // The validator agrees.
    assert!(Module::parse(ModuleKind::Architecture, first).is_ok());
    assert!(Module::parse(ModuleKind::Architecture, later).is_err());
}
