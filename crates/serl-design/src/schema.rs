//! A JSON schema for each module's reply, for servers that constrain
//! decoding to one (OpenAI-style `response_format`, Ollama's `format`,
//! llama.cpp, vLLM). A constrained reply has the module's shape by
//! construction; the validator still checks its values and programs.
//!
//! The reward, a program, is wrapped as `{"program": "..."}`. The schemas
//! name exactly the fields the module types read (a test holds them to
//! the types' serde fields); profiling's is derived from the market's
//! default population, so it follows `MarketConfig` as it grows.

use serde_json::{json, Map, Value};

use crate::communication::MAX_BROADCAST;
use crate::features::{MAX_FEATURES, MAX_FEATURE_NAME};
use crate::imagination::{
    DRIFT_BPS_RANGE, JUMP_BPS_RANGE, LIQUIDITY_MULT_RANGE, MAX_JUMPS, MAX_SCENARIOS,
    VOLATILITY_MULT_RANGE,
};
use crate::kind::ModuleKind;
use crate::network::{MAX_BLOCKS, MAX_WIDTH, MAX_WINDOW};

/// The JSON schema a `kind` reply must follow.
pub fn module_schema(kind: ModuleKind) -> Value {
    match kind {
        ModuleKind::Reward => object(&[("program", program())], &["program"]),
        ModuleKind::State => object(
            &[("features", array(feature(), 1, MAX_FEATURES))],
            &["features"],
        ),
        ModuleKind::Architecture => architecture(),
        ModuleKind::Imagination => object(
            &[
                ("scenarios", array(scenario(), 1, MAX_SCENARIOS)),
                ("share", share()),
                ("replay_share", share()),
            ],
            &["scenarios"],
        ),
        ModuleKind::Profiling => {
            let mut market = schema_of(
                &serde_json::to_value(crate::MarketConfig::default()).unwrap_or_default(),
            );
            // The default scenario's jumps are an empty list, which says
            // nothing of their items: the imagination's scenario does.
            if let Some(p) = market["properties"].as_object_mut() {
                if p.contains_key("scenario") {
                    let mut s = scenario();
                    s["required"] = json!([]);
                    p.insert("scenario".into(), s);
                }
                // The validator's ranges, so that a constrained reply is in
                // range by construction.
                for (field, lo, hi) in crate::profiling::MARKET_RANGES {
                    if let Some(f) = p.get_mut(field) {
                        f["minimum"] = json!(lo);
                        f["maximum"] = json!(hi);
                    }
                }
                for agents in [
                    "noise_agents",
                    "value_agents",
                    "momentum_agents",
                    "informed_agents",
                    "market_makers",
                ] {
                    if let Some(f) = p.get_mut(agents) {
                        let lo = if agents == "market_makers" { 1 } else { 0 };
                        f["minimum"] = json!(lo);
                        f["maximum"] = json!(crate::MAX_AGENTS);
                    }
                }
            }
            object(&[("market", market)], &["market"])
        }
        ModuleKind::Communication => object(
            &[
                ("broadcast", array(feature(), 1, MAX_BROADCAST)),
                (
                    "aggregate",
                    json!({"type": "string", "enum": ["mean", "sum", "attention", "max"]}),
                ),
            ],
            &["broadcast", "aggregate"],
        ),
        ModuleKind::Plan => plan(),
    }
}

/// A plan is one of two forms, as the validator takes it: a `shape` (with
/// its own `strength` and `checkpoints`) or a `remaining` curve (which has
/// its own), each with an optional `tolerance`. One object with every
/// field optional would let a constrained reply mix the two, or give
/// neither, which the validator refuses. What no schema can say of a
/// curve (it starts at 1, ends at 0, never rises, keeps to the
/// participation bound) is left to the validator.
fn plan() -> Value {
    let (lo, hi) = (crate::MIN_CHECKPOINTS, crate::MAX_CHECKPOINTS);
    let tolerance = || json!({"type": "number", "minimum": 0, "maximum": 0.5});
    let shapes: Vec<Value> = crate::PlanShape::ALL
        .iter()
        .map(|s| serde_json::to_value(s).unwrap_or_default())
        .collect();
    let shaped = object(
        &[
            ("shape", json!({"type": "string", "enum": shapes})),
            ("strength", share()),
            (
                "checkpoints",
                json!({"type": "integer", "minimum": lo, "maximum": hi}),
            ),
            ("tolerance", tolerance()),
        ],
        &["shape"],
    );
    let curve = object(
        &[
            ("remaining", array(share(), lo + 1, hi + 1)),
            ("tolerance", tolerance()),
        ],
        &["remaining"],
    );
    json!({"anyOf": [shaped, curve]})
}

/// An object with exactly these properties, `required` among them.
fn object(properties: &[(&str, Value)], required: &[&str]) -> Value {
    let props: Map<String, Value> = properties
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

fn array(items: Value, min: usize, max: usize) -> Value {
    json!({"type": "array", "items": items, "minItems": min, "maxItems": max})
}

/// A program: a non-empty string. No `maxLength`: llama.cpp turns a
/// schema into a grammar by unrolling `{1,4096}`, which its parser refuses
/// (and llama-cpp-python's server dies of); the validator bounds the
/// source (`Limits::max_source`) instead.
fn program() -> Value {
    json!({"type": "string", "minLength": 1})
}

fn share() -> Value {
    json!({"type": "number", "minimum": 0, "maximum": 1})
}

fn feature() -> Value {
    object(
        &[
            (
                "name",
                json!({"type": "string", "pattern": format!("^[A-Za-z0-9_]{{1,{MAX_FEATURE_NAME}}}$")}),
            ),
            ("program", program()),
        ],
        &["name", "program"],
    )
}

fn scenario() -> Value {
    let range = |(lo, hi): (f64, f64)| json!({"type": "number", "minimum": lo, "maximum": hi});
    let jump = json!({
        "type": "array",
        "prefixItems": [
            {"type": "integer", "minimum": 0, "maximum": serl_market::SESSION_MINUTES},
            range(JUMP_BPS_RANGE),
        ],
        "minItems": 2,
        "maxItems": 2,
    });
    object(
        &[
            ("volatility_mult", range(VOLATILITY_MULT_RANGE)),
            ("drift_bps", range(DRIFT_BPS_RANGE)),
            ("liquidity_mult", range(LIQUIDITY_MULT_RANGE)),
            ("jumps", array(jump, 0, MAX_JUMPS)),
        ],
        &["volatility_mult", "drift_bps", "liquidity_mult"],
    )
}

/// A network: a window and blocks, each block one of the kinds
/// `BlockSpec` knows, tagged by `kind`.
fn architecture() -> Value {
    let activation =
        json!({"type": "string", "enum": ["relu", "tanh", "gelu", "sigmoid", "identity"]});
    let width = json!({"type": "integer", "minimum": 1, "maximum": MAX_WIDTH});
    let kind = |k: &str| json!({"const": k});
    let blocks = [
        object(
            &[
                ("kind", kind("dense")),
                ("width", width.clone()),
                ("activation", activation.clone()),
            ],
            &["kind", "width"],
        ),
        object(&[("kind", kind("layer_norm"))], &["kind"]),
        object(
            &[("kind", kind("residual")), ("activation", activation)],
            &["kind"],
        ),
        object(
            &[("kind", kind("gru")), ("hidden", width.clone())],
            &["kind", "hidden"],
        ),
        object(
            &[
                ("kind", kind("book_attention")),
                ("d_model", width),
                ("heads", json!({"type": "integer", "minimum": 1})),
            ],
            &["kind", "d_model", "heads"],
        ),
    ];
    object(
        &[
            (
                "window",
                json!({"type": "integer", "minimum": 1, "maximum": MAX_WINDOW}),
            ),
            ("blocks", array(json!({"anyOf": blocks}), 1, MAX_BLOCKS)),
        ],
        &["blocks"],
    )
}

/// A schema that an example value satisfies, field by field: numbers stay
/// numbers (integers where the example is one), objects keep their keys
/// and allow no others. Every field is optional (the types default them).
fn schema_of(example: &Value) -> Value {
    match example {
        Value::Object(m) => {
            let props: Map<String, Value> =
                m.iter().map(|(k, v)| (k.clone(), schema_of(v))).collect();
            json!({"type": "object", "properties": props, "additionalProperties": false})
        }
        Value::Array(_) => json!({"type": "array"}),
        Value::Number(n) if n.is_f64() => json!({"type": "number"}),
        Value::Number(_) => json!({"type": "integer"}),
        Value::Bool(_) => json!({"type": "boolean"}),
        Value::String(_) => json!({"type": "string"}),
        Value::Null => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Design, Module};

    /// The property names of `schema` (and of each `anyOf` branch).
    fn properties(schema: &Value) -> Vec<String> {
        let mut names: Vec<String> = schema["properties"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        names.sort();
        names
    }

    fn keys(v: &Value) -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    }

    #[test]
    fn each_schema_names_the_fields_its_module_serializes() {
        let d = Design::baseline();
        let state = r#"{"features": [{"name": "m5", "program": "mean(ret_1, 5)"}]}"#;
        let Module::State(s) = Module::parse(ModuleKind::State, state).unwrap() else {
            unreachable!()
        };
        let s = serde_json::to_value(&s).unwrap();
        let st = module_schema(ModuleKind::State);
        assert_eq!(properties(&st), keys(&s));
        assert_eq!(
            properties(&st["properties"]["features"]["items"]),
            keys(&s["features"][0])
        );

        let im = r#"{"scenarios": [{"volatility_mult": 1.2, "drift_bps": -10, "liquidity_mult": 0.9, "jumps": [[30, -20]]}], "share": 0.5}"#;
        let Module::Imagination(m) = Module::parse(ModuleKind::Imagination, im).unwrap() else {
            unreachable!()
        };
        let m = serde_json::to_value(&m).unwrap();
        let ims = module_schema(ModuleKind::Imagination);
        assert_eq!(properties(&ims), keys(&m));
        assert_eq!(
            properties(&ims["properties"]["scenarios"]["items"]),
            keys(&m["scenarios"][0])
        );

        let a = serde_json::to_value(&d.architecture).unwrap();
        let arch = module_schema(ModuleKind::Architecture);
        assert_eq!(properties(&arch), keys(&a));
        let dense = &arch["properties"]["blocks"]["items"]["anyOf"][0];
        assert_eq!(properties(dense), keys(&a["blocks"][0]));

        let c = r#"{"broadcast": [{"name": "left", "program": "inventory_left"}], "aggregate": "mean"}"#;
        let Module::Communication(c) = Module::parse(ModuleKind::Communication, c).unwrap() else {
            unreachable!()
        };
        assert_eq!(
            properties(&module_schema(ModuleKind::Communication)),
            keys(&serde_json::to_value(&c).unwrap())
        );

        let p = module_schema(ModuleKind::Profiling);
        let market = serde_json::to_value(crate::MarketConfig::default()).unwrap();
        assert_eq!(properties(&p["properties"]["market"]), keys(&market));
        assert_eq!(properties(&module_schema(ModuleKind::Reward)), ["program"]);

        // Each of the plan's two forms names the fields it serializes.
        let plan = module_schema(ModuleKind::Plan);
        let forms = [r#"{"shape": "u_shaped"}"#, r#"{"remaining": [1, 0.5, 0]}"#];
        for (form, text) in forms.into_iter().enumerate() {
            let Module::Plan(m) = Module::parse(ModuleKind::Plan, text).unwrap() else {
                unreachable!()
            };
            let k = keys(&serde_json::to_value(&m).unwrap());
            assert_eq!(properties(&plan["anyOf"][form]), k, "{text}");
        }
    }

    #[test]
    fn every_block_kind_has_a_branch() {
        let arch = module_schema(ModuleKind::Architecture);
        let kinds: Vec<&str> = arch["properties"]["blocks"]["items"]["anyOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["properties"]["kind"]["const"].as_str().unwrap())
            .collect();
        for k in &kinds {
            let block = match *k {
                "dense" => r#"{"kind": "dense", "width": 8}"#,
                "layer_norm" => r#"{"kind": "layer_norm"}"#,
                "residual" => r#"{"kind": "residual"}"#,
                "gru" => r#"{"kind": "gru", "hidden": 8}"#,
                _ => r#"{"kind": "book_attention", "d_model": 8, "heads": 2}"#,
            };
            let b: crate::BlockSpec =
                serde_json::from_str(block).unwrap_or_else(|e| panic!("{k}: {e}"));
            assert_eq!(serde_json::to_value(&b).unwrap()["kind"], *k);
        }
        assert_eq!(kinds.len(), 5);
    }
}
