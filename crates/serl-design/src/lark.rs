//! A Lark grammar for each module's reply, for decoders that mask tokens
//! with one (llguidance, in the local backend): the module's JSON schema
//! ([`module_schema`]) with every `program` string replaced by the
//! expression grammar over the variables that program may read. A reply
//! drawn from it is the module's JSON with programs that parse; the JSON
//! schema alone constrains a program only to be a string. Objects that
//! hold programs are written with their required properties, in order;
//! everything else is the schema itself, inlined with `%json`.

use serde_json::Value;
use serl_expr::VarSet;

use crate::kind::ModuleKind;
use crate::reward::reward_vars;
use crate::schema::module_schema;

/// The Lark grammar a `kind` reply must follow (llguidance's dialect, the
/// parts without programs inlined as `%json` schemas).
pub fn module_lark(kind: ModuleKind) -> String {
    let (vars, windows) = match kind {
        ModuleKind::Reward => (reward_vars(), false),
        _ => (VarSet::from_names(serl_env::obs::feature_names()), true),
    };
    let mut rules = Vec::new();
    let mut schema = module_schema(kind);
    if kind == ModuleKind::Architecture {
        first_block_only(&mut schema);
    }
    let start = value(&schema, &mut rules);
    let mut out = format!("start: {start}\n");
    for (i, r) in rules.iter().enumerate() {
        out.push_str(&format!("part{i}: {r}\n"));
    }
    out.push_str(&serl_expr::lark_rules(&vars, windows));
    out
}

/// A GRU and book attention read the raw observation, so the validator
/// takes them only as the first block: the blocks become a first item of
/// any kind (`prefixItems`) and later items of the other kinds. Only the
/// Lark grammar says so; the JSON schema sent to servers keeps one item
/// schema, which every structured-output API accepts.
fn first_block_only(schema: &mut Value) {
    let blocks = &mut schema["properties"]["blocks"];
    let Some(any) = blocks["items"]["anyOf"].as_array().cloned() else {
        return;
    };
    let later: Vec<Value> = any
        .iter()
        .filter(|b| {
            let kind = b["properties"]["kind"]["const"].as_str();
            !matches!(kind, Some("gru" | "book_attention"))
        })
        .cloned()
        .collect();
    blocks["prefixItems"] = serde_json::json!([{"anyOf": any}]);
    blocks["items"] = serde_json::json!({"anyOf": later});
}

/// The Lark expression for a value following `schema`; subschemas that
/// need their own rule are pushed to `rules`.
fn value(schema: &Value, rules: &mut Vec<String>) -> String {
    if !has_program(schema) {
        return inline(schema);
    }
    match schema["type"].as_str() {
        Some("object") => {
            let mut fields = Vec::new();
            for key in schema["required"].as_array().into_iter().flatten() {
                let key = key.as_str().unwrap_or_default();
                let sub = &schema["properties"][key];
                let v = if key == "program" {
                    r#""\"" expr "\"""#.to_string()
                } else {
                    value(sub, rules)
                };
                // The key as a Lark string literal of its JSON form.
                let literal =
                    serde_json::to_string(&format!("{}: ", json_key(key))).unwrap_or_default();
                fields.push(format!("{literal} {v}"));
            }
            rule(fields.join(r#" ", " "#), rules)
        }
        Some("array") => {
            let item = value(&schema["items"], rules);
            let min = schema["minItems"].as_u64().unwrap_or(0).max(1);
            let max = schema["maxItems"].as_u64().unwrap_or(min).max(min);
            rule(
                format!(r#""[" {item} (", " {item}){{{},{}}} "]""#, min - 1, max - 1),
                rules,
            )
        }
        _ => inline(schema),
    }
}

/// `schema` inlined as `%json`: compact (no optional whitespace) and with
/// every number within ±1e9, which serde reads (a sampled `1e999` is JSON
/// but not a double).
fn inline(schema: &Value) -> String {
    let mut s = schema.clone();
    bound_numbers(&mut s);
    if let Some(o) = s.as_object_mut() {
        o.insert(
            "x-guidance".into(),
            serde_json::json!({"whitespace_flexible": false}),
        );
    }
    format!("%json {s}")
}

fn bound_numbers(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            if matches!(
                m.get("type").and_then(Value::as_str),
                Some("number" | "integer")
            ) {
                m.entry("minimum").or_insert(serde_json::json!(-1e9));
                m.entry("maximum").or_insert(serde_json::json!(1e9));
            }
            m.values_mut().for_each(bound_numbers);
        }
        Value::Array(a) => a.iter_mut().for_each(bound_numbers),
        _ => {}
    }
}

/// `key` as JSON writes it, quotes included.
fn json_key(key: &str) -> String {
    serde_json::to_string(key).unwrap_or_default()
}

/// A new rule with `body`; its name.
fn rule(body: String, rules: &mut Vec<String>) -> String {
    let body = if body.starts_with("\"[") {
        body
    } else {
        format!(r#""{{" {body} "}}""#)
    };
    rules.push(body);
    format!("part{}", rules.len() - 1)
}

/// Whether `schema` has a `program` property anywhere inside.
fn has_program(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => {
            m.get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| p.contains_key("program"))
                || m.values().any(has_program)
        }
        Value::Array(a) => a.iter().any(has_program),
        _ => false,
    }
}
