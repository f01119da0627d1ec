//! The language's grammar for constrained decoders: GBNF (llama.cpp and
//! compatible servers) and a JSON schema for structured-output APIs.

use super::compile::function_names;
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
