//! The language's grammar for constrained decoders: GBNF (llama.cpp and
//! compatible servers) and a JSON schema for structured-output APIs.

use super::compile::{function_names, UNARY_FNS};
use super::VarSet;

fn alternatives(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The grammar as GBNF, with `vars` as the only names a program may read.
/// Every string it accepts parses; the checker adds types and bounds.
pub fn gbnf(vars: &VarSet) -> String {
    gbnf_with(vars, true)
}

/// [`gbnf`], with or without the window functions (`mean(x, 5)`, ...):
/// programs that must read only the current step (a reward) get a grammar
/// that cannot write one.
pub fn gbnf_with(vars: &VarSet, windows: bool) -> String {
    let var_names: Vec<&str> = vars.names().iter().map(String::as_str).collect();
    let window_names = ["mean", "std", "ema", "lag", "min_over", "max_over"];
    let (window_call, window_rule) = if windows {
        (
            "\n          | windowfn \"(\" ws var ws \",\" ws window ws \")\"",
            format!(
                "windowfn ::= {}\nwindow  ::= [1-9] [0-9]?\n",
                alternatives(&window_names)
            ),
        )
    } else {
        ("", String::new())
    };
    let unary = ["abs", "sqrt", "log", "exp", "tanh", "sign"];
    let _ = function_names();
    format!(
        r#"root    ::= ws expr ws
expr    ::= "let" ws1 local ws "=" ws expr ws1 "in" ws1 expr
          | "if" ws1 expr ws1 "then" ws1 expr ws1 "else" ws1 expr
          | or
or      ::= and (ws "||" ws and)*
and     ::= cmp (ws "&&" ws cmp)*
cmp     ::= sum (ws cmpop ws sum)?
cmpop   ::= "<=" | ">=" | "==" | "!=" | "<" | ">"
sum     ::= product (ws ("+" | "-") ws product)*
product ::= unary (ws ("*" | "/") ws unary)*
unary   ::= ("-" | "!") ws unary | power
power   ::= atom (ws "^" ws unary)?
atom    ::= number | "true" | "false" | var | local | call | "(" ws expr ws ")"
call    ::= unaryfn "(" ws expr ws ")"
          | ("min" | "max") "(" ws expr ws "," ws expr ws ")"
          | "clip" "(" ws expr ws "," ws expr ws "," ws expr ws ")"{window_call}
unaryfn ::= {unary}
{window_rule}var     ::= {vars}
local   ::= "v_" [a-z0-9_]*
number  ::= [0-9]+ ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
ws      ::= [ \t\n]*
ws1     ::= [ \t\n]+
"#,
        unary = alternatives(&unary),
        vars = alternatives(&var_names),
    )
}

/// The deepest nesting [`lark`] allows: a call, a parenthesis or an `if`
/// opens a level.
pub const LARK_DEPTH: usize = 3;

/// The grammar as Lark (llguidance's dialect), with `vars` as the only
/// names a program may read and the window functions when `windows`: a
/// `start` rule and the rules of [`lark_rules`].
pub fn lark(vars: &VarSet, windows: bool) -> String {
    format!("start: expr\n{}", lark_rules(vars, windows))
}

/// The notation a typed grammar is written in (see [`typed_rules`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Lark, as llguidance reads it (the local backend's token masks).
    Lark,
    /// GBNF, as llama.cpp reads it (its `grammar` field). Rule names stay
    /// within its `[A-Za-z0-9-]`.
    Gbnf,
}

impl Dialect {
    /// The start of the definition of rule `name`.
    pub fn define(self, name: &str) -> String {
        match self {
            Dialect::Lark => format!("{name}: "),
            Dialect::Gbnf => format!("{name} ::= "),
        }
    }
}

/// The rules of [`lark`] without a `start`, defining `expr`, for grammars
/// that embed a program (a JSON reply with a `program` field): the
/// [`typed_rules`] in Lark.
pub fn lark_rules(vars: &VarSet, windows: bool) -> String {
    typed_rules(vars, windows, Dialect::Lark)
}

/// The rules of the typed expression grammar, defining `expr`, in
/// `dialect`: the same rules, and so the same language, in both.
///
/// It is a typed subset of the GBNF's language, written for a token
/// sampler rather than a reader:
/// - numbers and conditions are separate rules, so a drawn program is
///   well-typed (`&&`, `||` and `!` join conditions, comparisons make
///   them, `if` takes one; the program gives a number);
/// - no `let`: a grammar cannot know which names a `let` bound, so a drawn
///   program could read an unbound one;
/// - single spaces around binary operators, nesting at most
///   [`LARK_DEPTH`] deep, chains of at most six terms, numbers of at most
///   six digits (no exponent), windows of 1 to [`Limits::max_window`]
///   steps. Every draw is finite and parses. The bounds alone still admit
///   programs past [`Limits::max_nodes`] (a chain of six calls each with
///   chains of six terms); the local backend's sampler keeps a reply well
///   inside them by steering it to its end once it runs long. Real
///   programs are far inside them.
///
/// [`Limits::max_nodes`]: crate::Limits::max_nodes
///
/// [`Limits::max_window`]: crate::Limits::max_window
pub fn typed_rules(vars: &VarSet, windows: bool, dialect: Dialect) -> String {
    let names: Vec<&str> = vars.names().iter().map(String::as_str).collect();
    let mut out = format!("{}num{LARK_DEPTH}\n", dialect.define("expr"));
    for d in 0..=LARK_DEPTH {
        out.push_str(&typed_level(d, windows, dialect));
    }
    let window_names = ["mean", "std", "ema", "lag", "min_over", "max_over"];
    let steps: Vec<String> = (1..=super::Limits::default().max_window)
        .rev()
        .map(|w| w.to_string())
        .collect();
    let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
    let number = match dialect {
        Dialect::Lark => r"/[0-9]{1,6}(\.[0-9]{1,4})?/",
        Dialect::Gbnf => r#"[0-9]{1,6} ("." [0-9]{1,4})?"#,
    };
    let d = |name: &str| dialect.define(name);
    out.push_str(&format!(
        r#"{}{vars}
{}{number}
{}{steps}
{}{unary}
{}{windows}
{}" <= " | " >= " | " == " | " != " | " < " | " > "
{}" + " | " - "
{}" * " | " / "
"#,
        d("VAR"),
        d("NUMBER"),
        d("WINDOW"),
        d("UNARYFN"),
        d("WINDOWFN"),
        d("CMP"),
        d("ADD"),
        d("MUL"),
        vars = alternatives(&names),
        steps = alternatives(&steps),
        unary = alternatives(&UNARY_FNS),
        windows = alternatives(&window_names),
    ));
    out
}

/// The rules of nesting level `d`; level 0 has no calls, parentheses or
/// `if`.
fn typed_level(d: usize, windows: bool, dialect: Dialect) -> String {
    let i = d.saturating_sub(1);
    let (num_if, atom_nested, cond_nested, not_nested) = if d == 0 {
        Default::default()
    } else {
        let window = if windows {
            " | WINDOWFN \"(\" VAR \", \" WINDOW \")\""
        } else {
            ""
        };
        (
            format!(" | \"if \" cond{i} \" then \" num{i} \" else \" num{i}"),
            format!(
                " | \"(\" num{i} \")\" | UNARYFN \"(\" num{i} \")\" | (\"min(\" | \"max(\") num{i} \", \" num{i} \")\" | \"clip(\" num{i} \", \" num{i} \", \" num{i} \")\"{window}"
            ),
            format!(" | \"(\" cond{i} \")\""),
            format!(" | \"!(\" cond{i} \")\""),
        )
    };
    let n = |name: &str| dialect.define(&format!("{name}{d}"));
    format!(
        r#"{}sum{d}{num_if}
{}product{d} (ADD product{d}){{0,5}}
{}unary{d} (MUL unary{d}){{0,5}}
{}"-"? power{d}
{}atom{d} (" ^ " atom{d})?
{}NUMBER | VAR{atom_nested}
{}conj{d} (" || " conj{d}){{0,2}}
{}lit{d} (" && " lit{d}){{0,2}}
{}"true" | "false" | "!true" | "!false" | sum{d} CMP sum{d}{cond_nested}{not_nested}
"#,
        n("num"),
        n("sum"),
        n("product"),
        n("unary"),
        n("power"),
        n("atom"),
        n("cond"),
        n("conj"),
        n("lit"),
    )
}

/// A JSON schema for a reply that carries one program in `field`, with
/// the grammar and the variables attached for decoders that use them.
pub fn json_schema(field: &str, vars: &VarSet) -> serde_json::Value {
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "required": [field],
        "additionalProperties": false,
        "properties": {
            field: {
                "type": "string",
                "minLength": 1,
                "maxLength": super::Limits::default().max_source,
                "description": format!("a program in serl's expression language over: {}", vars.names().join(", ")),
                "x-gbnf": gbnf(vars),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gbnf_names_every_variable_and_window_function() {
        let g = gbnf(&VarSet::new(&["step_pa", "remaining_inv"]));
        assert!(g.contains("\"step_pa\" | \"remaining_inv\""));
        assert!(g.contains("\"min_over\""));
        assert!(g.starts_with("root"));
        let s = json_schema("reward", &VarSet::new(&["x"]));
        assert_eq!(s["required"][0], "reward");
    }
}
