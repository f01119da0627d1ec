//! The plan's three constraints (its JSON schema, the Lark grammar the
//! local backend decodes with, the GBNF llama.cpp reads) against its
//! validator, both ways:
//! - every plan the validator takes in a canonical form (the builtin
//!   shapes at every strength and checkpoint count, the curves, the
//!   examples of docs/hierarchy.md and prompts/plan.j2) is in each
//!   constraint's language;
//! - every structural rule of the validator (a `shape` or a `remaining`
//!   curve, not both, not neither; `strength` and `checkpoints` only with
//!   a shape; the ranges; no other field) is in each constraint: a reply
//!   that breaks one is refused;
//! - drawn at random from each constraint, a reply is refused by the
//!   validator only for what no context-free grammar can say of a curve's
//!   values (it starts at 1, ends at 0, never rises, keeps to the
//!   participation bound), and every shaped draw validates.
//!
//! Before the plan's schema had its two forms, a reply drawn from it could
//! mix them (`strength` beside `remaining`), and a random model's replies
//! validated 0% of the time.

#[path = "../../serl-expr/tests/gbnf/mod.rs"]
mod gbnf;

use gbnf::{Grammar, Rng};
use serl_design::{
    module_gbnf, module_lark, module_schema, Module, ModuleKind, PlanModule, PlanShape,
    MAX_CHECKPOINTS, MIN_CHECKPOINTS,
};
use serl_local::{ByteGrammar, Constraint};

const DRAWS: u64 = 300;

/// The validator's refusals that only a curve's values can earn.
const CURVE_VALUE_RULES: [&str; 3] = ["must start at 1", "never buys back", "participation bound"];

/// The plan's three constraints: the two llguidance reads (Lark, JSON
/// schema) and the GBNF.
struct Constraints {
    bytes: ByteGrammar,
    lark: Constraint,
    schema: Constraint,
    gbnf: Grammar,
}

impl Constraints {
    fn new() -> Self {
        Constraints {
            bytes: ByteGrammar::new().unwrap(),
            lark: Constraint::Lark(module_lark(ModuleKind::Plan)),
            schema: Constraint::JsonSchema(module_schema(ModuleKind::Plan)),
            gbnf: Grammar::parse(&module_gbnf(ModuleKind::Plan)),
        }
    }

    /// Which of Lark, JSON schema and GBNF take `text`. llguidance's
    /// constraints are compact (no optional whitespace), so they read the
    /// compact form of the same JSON; the GBNF reads `text` as written.
    fn accept(&self, text: &str) -> [bool; 3] {
        let compact = serde_json::from_str::<serde_json::Value>(text)
            .map(|v| v.to_string())
            .unwrap_or_else(|_| text.to_string());
        [
            self.bytes.accepts(&self.lark, &compact).unwrap(),
            self.bytes.accepts(&self.schema, &compact).unwrap(),
            self.gbnf.derives(text),
        ]
    }
}

fn plan_text(p: &PlanModule) -> String {
    serde_json::to_string(p).unwrap()
}

/// Plans the validator takes, as designers and serl write them.
fn canonical() -> Vec<String> {
    let mut texts: Vec<String> = [
        // docs/hierarchy.md
        r#"{"shape": "u_shaped", "strength": 0.6, "checkpoints": 13}"#,
        r#"{"remaining": [1.0, 0.85, 0.7, 0.6, 0.5, 0.42, 0.35, 0.28, 0.2, 0.13, 0.07, 0.0]}"#,
        // prompts/plan.j2's reply line, and a minimal shape
        r#"{"shape": "u_shaped", "strength": 0.5, "checkpoints": 13}"#,
        r#"{"shape": "linear"}"#,
        r#"{"remaining": [1, 0.5, 0], "tolerance": 0.5}"#,
        r#"{"shape": "back_loaded", "tolerance": 0}"#,
    ]
    .map(String::from)
    .to_vec();
    for shape in PlanShape::ALL {
        for strength in [0.0, 0.25, 0.5, 1.0] {
            for n in [MIN_CHECKPOINTS, 13, MAX_CHECKPOINTS] {
                texts.push(plan_text(
                    &PlanModule::shaped(shape, strength, n, 0.02).unwrap(),
                ));
            }
        }
    }
    texts.push(plan_text(&PlanModule::linear()));
    for n in [MIN_CHECKPOINTS, 13, MAX_CHECKPOINTS] {
        let even: Vec<f64> = (0..=n).map(|k| 1.0 - k as f64 / n as f64).collect();
        texts.push(plan_text(&PlanModule::curve(even, 0.05).unwrap()));
    }
    texts
}

#[test]
fn every_plan_the_validator_takes_is_in_each_constraint() {
    let c = Constraints::new();
    for text in canonical() {
        assert!(
            Module::parse(ModuleKind::Plan, &text).is_ok(),
            "the validator refuses {text}"
        );
        let [lark, schema, gbnf] = c.accept(&text);
        assert!(
            lark && schema && gbnf,
            "{text}: Lark {lark}, JSON schema {schema}, GBNF {gbnf}"
        );
    }
}

#[test]
fn every_structural_rule_of_the_validator_is_in_each_constraint() {
    let c = Constraints::new();
    let refused = [
        r#"{}"#,
        r#"{"shape": "linear", "remaining": [1, 0.5, 0]}"#,
        r#"{"remaining": [1, 0.5, 0], "strength": 0.5}"#,
        r#"{"remaining": [1, 0.5, 0], "checkpoints": 2}"#,
        r#"{"tolerance": 0.1}"#,
        r#"{"shape": "spiral"}"#,
        r#"{"shape": "linear", "strength": 1.5}"#,
        r#"{"shape": "linear", "checkpoints": 1}"#,
        r#"{"shape": "linear", "checkpoints": 27}"#,
        r#"{"shape": "linear", "tolerance": 0.6}"#,
        r#"{"shape": "linear", "tolerance": 0.51}"#,
        r#"{"shape": "linear", "speed": 2}"#,
        r#"{"remaining": [1, 0]}"#,
        r#"{"remaining": [1, 1.5, 0]}"#,
    ];
    for text in refused {
        assert!(
            Module::parse(ModuleKind::Plan, text).is_err(),
            "the validator takes {text}"
        );
        assert_eq!(c.accept(text), [false; 3], "{text} (Lark, schema, GBNF)");
    }
    let long: Vec<f64> = (0..=MAX_CHECKPOINTS + 1).map(|_| 0.5).collect();
    let long = serde_json::json!({ "remaining": long }).to_string();
    assert_eq!(
        c.accept(&long),
        [false; 3],
        "{} values",
        MAX_CHECKPOINTS + 2
    );
    // The bounds themselves are in.
    let edge = r#"{"shape": "front_loaded", "strength": 1, "checkpoints": 26, "tolerance": 0.5}"#;
    assert!(Module::parse(ModuleKind::Plan, edge).is_ok());
    assert_eq!(c.accept(edge), [true; 3], "{edge}");
}

/// A draw's verdict: validated, or refused for a curve's values; anything
/// else is a rule a constraint lets through and the validator does not.
fn judge(source: &str, text: &str, shaped: &mut usize, valid: &mut usize) {
    match Module::parse(ModuleKind::Plan, text) {
        Ok(_) => *valid += 1,
        Err(e) => {
            let e = e.to_string();
            assert!(
                CURVE_VALUE_RULES.iter().any(|r| e.contains(r)) && text.contains("remaining"),
                "{source} drew {text}, which the validator refuses: {e}"
            );
        }
    }
    if text.contains("\"shape\"") {
        *shaped += 1;
    }
}

#[test]
fn random_draws_from_each_constraint_fail_only_on_a_curves_values() {
    let c = Constraints::new();
    for (source, constraint) in [("Lark", &c.lark), ("JSON schema", &c.schema)] {
        let (mut shaped, mut valid) = (0, 0);
        for seed in 0..DRAWS {
            let text = c
                .bytes
                .sample(constraint, seed, 20_000)
                .unwrap()
                .unwrap_or_else(|| panic!("{source}: draw {seed} did not finish"));
            judge(source, &text, &mut shaped, &mut valid);
        }
        println!("{source}: {DRAWS} draws, {shaped} shaped, {valid} validate");
        assert!(
            shaped > 0 && valid >= shaped,
            "{source}: {shaped} shaped, {valid} valid"
        );
    }
    let mut rng = Rng::new(47);
    let (mut shaped, mut valid) = (0, 0);
    for _ in 0..DRAWS {
        let text = c.gbnf.sample(&mut rng, 40, 400);
        assert!(c.gbnf.derives(&text), "{text}");
        judge("GBNF", &text, &mut shaped, &mut valid);
    }
    println!("GBNF: {DRAWS} draws, {shaped} shaped, {valid} validate");
    assert!(
        shaped > 0 && valid >= shaped,
        "GBNF: {shaped} shaped, {valid} valid"
    );
}
