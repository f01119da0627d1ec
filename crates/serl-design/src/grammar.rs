//! A grammar for each module's reply, in the two notations constrained
//! decoders read: Lark for llguidance (the local backend's token masks)
//! and GBNF for llama.cpp (its `grammar` field). Both are the module's
//! JSON schema ([`module_schema`]) with every `program` string replaced by
//! the typed expression grammar over the variables that program may read
//! ([`serl_expr::typed_rules`]). A reply drawn from either is the module's
//! JSON with programs that parse; the JSON schema alone constrains a
//! program only to be a string.
//!
//! The two differ only where their notations do. Lark inlines the parts
//! without programs as `%json` schemas, which llguidance compiles itself
//! (exact number ranges included), and writes objects that hold programs
//! with their required properties, in order. GBNF has no such escape, so
//! the whole schema is written out here: objects with their optional
//! properties, arrays with their lengths, exact integer ranges, numbers
//! within their range (exact but for a fraction under a fractional lower
//! bound, which is left to the validator), and one optional space after
//! `,` and `:`.

use serde_json::Value;
use serl_expr::{Dialect, VarSet};

use crate::kind::ModuleKind;
use crate::reward::reward_vars;
use crate::schema::module_schema;

/// The Lark grammar a `kind` reply must follow (llguidance's dialect, the
/// parts without programs inlined as `%json` schemas).
pub fn module_lark(kind: ModuleKind) -> String {
    module_grammar(kind, Dialect::Lark)
}

/// The GBNF grammar a `kind` reply must follow (llama.cpp's `grammar`
/// field): the same language as [`module_lark`] but for the spaces JSON
/// may take and fractions under a fractional lower bound.
pub fn module_gbnf(kind: ModuleKind) -> String {
    module_grammar(kind, Dialect::Gbnf)
}

fn module_grammar(kind: ModuleKind, dialect: Dialect) -> String {
    let (vars, windows) = match kind {
        ModuleKind::Reward => (reward_vars(), false),
        // A state module may read the resting order's queue (a placing
        // task); broadcasts only what every agent sees.
        ModuleKind::State => (VarSet::from_names(serl_env::obs::design_names()), true),
        _ => (VarSet::from_names(serl_env::obs::feature_names()), true),
    };
    let schema = module_grammar_schema(kind);
    let mut w = Writer {
        dialect,
        rules: Vec::new(),
    };
    let start = w.value(&schema);
    let mut out = match dialect {
        Dialect::Lark => format!("start: {start}\n"),
        Dialect::Gbnf => format!("root ::= {start}\n"),
    };
    for (i, r) in w.rules.iter().enumerate() {
        out.push_str(&format!("{}{r}\n", dialect.define(&format!("part{i}"))));
    }
    out.push_str(&serl_expr::typed_rules(&vars, windows, dialect));
    if dialect == Dialect::Gbnf {
        out.push_str(GBNF_JSON);
    }
    out
}

/// The JSON schema the grammars write out: [`module_schema`] with what
/// they refine beyond it (book attention's heads dividing `d_model`, a GRU
/// or book attention only as the first block). Every `program` string in
/// it is, in the grammars, the typed expression language over the
/// variables that program may read; a value drawn from this schema with
/// such programs is a sentence of [`module_lark`].
pub fn module_grammar_schema(kind: ModuleKind) -> Value {
    let mut schema = module_schema(kind);
    if kind == ModuleKind::Architecture {
        divisible_heads(&mut schema);
        first_block_only(&mut schema);
    }
    schema
}

/// The GBNF rules every module grammar may refer to: the optional space,
/// and any JSON value (for the few schema parts that say nothing of their
/// content).
const GBNF_JSON: &str = r#"sp ::= " "?
jsonvalue ::= jsonobject | jsonarray | jsonstring | jsonnumber | "true" | "false" | "null"
jsonobject ::= "{" sp (jsonstring ":" sp jsonvalue ("," sp jsonstring ":" sp jsonvalue)*)? "}"
jsonarray ::= "[" sp (jsonvalue ("," sp jsonvalue)*)? "]"
jsonstring ::= "\"" ([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))* "\""
jsonnumber ::= "-"? ("0" | [1-9] [0-9]{0,8}) ("." [0-9]{1,4})?
"#;

/// The numbers of heads a book-attention block may have in the grammars.
const ATTENTION_HEADS: [u64; 5] = [1, 2, 4, 8, 16];

/// Book attention's heads must divide `d_model`, which the validator
/// checks and a schema of two independent integers cannot say: in the
/// grammars the block becomes one branch per number of heads
/// ([`ATTENTION_HEADS`]), `d_model` a multiple of it (`multipleOf`, which
/// llguidance compiles exactly; the GBNF leaves it to the validator).
fn divisible_heads(schema: &mut Value) {
    let Some(any) = schema["properties"]["blocks"]["items"]["anyOf"].as_array_mut() else {
        return;
    };
    let mut branches = Vec::new();
    for block in any.drain(..) {
        if block["properties"]["kind"]["const"] != "book_attention" {
            branches.push(block);
            continue;
        }
        for h in ATTENTION_HEADS {
            let mut b = block.clone();
            b["properties"]["heads"] = serde_json::json!({"const": h});
            let d_model = &mut b["properties"]["d_model"];
            d_model["multipleOf"] = serde_json::json!(h);
            d_model["minimum"] = serde_json::json!(h);
            branches.push(b);
        }
    }
    *any = branches;
}

/// A GRU and book attention read the raw observation, so the validator
/// takes them only as the first block: the blocks become a first item of
/// any kind (`prefixItems`) and later items of the other kinds. Only the
/// grammars say so; the JSON schema sent to servers keeps one item
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

/// Writes a schema as rules of one dialect.
struct Writer {
    dialect: Dialect,
    /// The bodies of rules `part0`, `part1`, ...
    rules: Vec<String>,
}

impl Writer {
    /// The expression for a value following `schema`; subschemas that
    /// need their own rule are pushed to `rules`.
    fn value(&mut self, schema: &Value) -> String {
        if self.dialect == Dialect::Lark && !has_program(schema) {
            return inline(schema);
        }
        if let Some(any) = schema["anyOf"].as_array() {
            let alts: Vec<String> = any.iter().map(|s| self.value(s)).collect();
            return self.rule(alts.join(" | "));
        }
        if let Some(c) = schema.get("const") {
            return literal(&c.to_string());
        }
        if let Some(e) = schema["enum"].as_array() {
            let alts: Vec<String> = e.iter().map(|v| literal(&v.to_string())).collect();
            return format!("({})", alts.join(" | "));
        }
        match (schema["type"].as_str(), self.dialect) {
            (Some("object"), Dialect::Lark) => self.lark_object(schema),
            (Some("object"), Dialect::Gbnf) => self.gbnf_object(schema),
            (Some("array"), Dialect::Lark) => self.lark_array(schema),
            (Some("array"), Dialect::Gbnf) => self.gbnf_array(schema),
            (Some("string"), _) => string(schema),
            (Some("integer"), _) => {
                let (lo, hi) = bounds(schema);
                signed(lo.ceil(), hi.floor(), |lo, hi| {
                    int_range(lo as u64, hi as u64)
                })
            }
            (Some("number"), _) => {
                let (lo, hi) = bounds(schema);
                signed(lo, hi, unsigned_number)
            }
            (Some("boolean"), _) => r#"("true" | "false")"#.into(),
            _ => "jsonvalue".into(),
        }
    }

    /// A property's value: a program is a string of the typed grammar.
    fn property(&mut self, key: &str, schema: &Value) -> String {
        if key == "program" {
            r#""\"" expr "\"""#.to_string()
        } else {
            self.value(schema)
        }
    }

    /// An object that holds programs, its required properties in order,
    /// as the local backend has always drawn them.
    fn lark_object(&mut self, schema: &Value) -> String {
        let mut fields = Vec::new();
        for key in schema["required"].as_array().into_iter().flatten() {
            let key = key.as_str().unwrap_or_default();
            let v = self.property(key, &schema["properties"][key]);
            // The key as a Lark string literal of its JSON form.
            fields.push(format!("{} {v}", literal(&format!("{}: ", literal(key)))));
        }
        self.rule(format!(r#""{{" {} "}}""#, fields.join(r#" ", " "#)))
    }

    fn lark_array(&mut self, schema: &Value) -> String {
        let item = self.value(&schema["items"]);
        let min = schema["minItems"].as_u64().unwrap_or(0).max(1);
        let max = schema["maxItems"].as_u64().unwrap_or(min).max(min);
        self.rule(format!(
            r#""[" {item} (", " {item}){{{},{}}} "]""#,
            min - 1,
            max - 1
        ))
    }

    /// An object with every property in order, the optional ones
    /// optional. `first{i}` is "properties `i..` with none written yet",
    /// `rest{i}` "properties `i..` after one was written" (each then
    /// preceded by a comma); both are rules so the grammar stays linear in
    /// the number of properties.
    fn gbnf_object(&mut self, schema: &Value) -> String {
        let required: Vec<&str> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let props: Vec<(bool, String)> = schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(key, sub)| {
                let v = self.property(key, sub);
                let kv = format!("{} sp {v}", literal(&format!("{}:", literal(key))));
                (required.contains(&key.as_str()), kv)
            })
            .collect();
        if props.is_empty() {
            return r#""{" sp "}""#.into();
        }
        let mut rest: Option<String> = None;
        let mut first: Option<String> = None;
        for (req, kv) in props.iter().rev() {
            let after = rest.as_deref().map(|r| format!(" {r}")).unwrap_or_default();
            let mut f = format!("{kv}{after}");
            if !req {
                if let Some(later) = &first {
                    f = format!("{f} | {later}");
                }
            }
            first = Some(self.rule(f));
            let item = format!(r#""," sp {kv}"#);
            let r = if *req { item } else { format!("({item})?") };
            rest = Some(self.rule(format!("{r}{after}")));
        }
        let first = first.expect("an object with properties has a first");
        let all_optional = props.iter().all(|(req, _)| !req);
        let opt = if all_optional { "?" } else { "" };
        format!(r#"("{{" sp ({first}){opt} "}}")"#)
    }

    /// An array: its `prefixItems` in order, then up to `maxItems` of
    /// `items`. Arrays shorter than their prefix are not written.
    fn gbnf_array(&mut self, schema: &Value) -> String {
        let prefix: Vec<String> = schema["prefixItems"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| self.value(s))
            .collect();
        let item = schema.get("items").map(|s| self.value(s));
        let k = prefix.len() as u64;
        let min = schema["minItems"].as_u64().unwrap_or(0).max(k);
        let max = schema["maxItems"].as_u64();
        if max == Some(0) {
            return self.rule(r#""[" "]""#.into());
        }
        // Every element after the first follows a comma.
        let next = |e: &str| format!(r#""," sp {e}"#);
        let body = match (prefix.split_first(), item) {
            (Some((first, rest)), item) => {
                let mut parts = vec![first.clone()];
                parts.extend(rest.iter().map(|e| next(e)));
                if let Some(item) = item {
                    let more = max.map(|m| m.saturating_sub(k));
                    parts.extend(repeat(&next(&item), min - k, more));
                }
                parts.join(" ")
            }
            (None, Some(item)) => {
                let more = repeat(&next(&item), min.max(1) - 1, max.map(|m| m - 1));
                let all = std::iter::once(item)
                    .chain(more)
                    .collect::<Vec<_>>()
                    .join(" ");
                if min == 0 {
                    format!("({all})?")
                } else {
                    all
                }
            }
            (None, None) => r#"(jsonvalue ("," sp jsonvalue)*)?"#.into(),
        };
        self.rule(format!(r#""[" {body} "]""#))
    }

    /// A new rule with `body`; its name.
    fn rule(&mut self, body: String) -> String {
        self.rules.push(body);
        format!("part{}", self.rules.len() - 1)
    }
}

/// `element` repeated `min..=max` times (`max` `None`: any number);
/// `None` when it may not appear at all.
fn repeat(element: &str, min: u64, max: Option<u64>) -> Option<String> {
    match (min, max) {
        (_, Some(0)) => None,
        (1, Some(1)) => Some(element.to_string()),
        (m, Some(n)) => Some(format!("({element}){{{m},{n}}}")),
        (0, None) => Some(format!("({element})*")),
        (m, None) => Some(format!("({element}){{{m},}}")),
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

/// The bounds every number is kept within, where its schema has none.
const NUMBER_BOUND: f64 = 1e9;

fn bound_numbers(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            if matches!(
                m.get("type").and_then(Value::as_str),
                Some("number" | "integer")
            ) {
                m.entry("minimum")
                    .or_insert(serde_json::json!(-NUMBER_BOUND));
                m.entry("maximum")
                    .or_insert(serde_json::json!(NUMBER_BOUND));
            }
            m.values_mut().for_each(bound_numbers);
        }
        Value::Array(a) => a.iter_mut().for_each(bound_numbers),
        _ => {}
    }
}

/// A number schema's bounds, ±[`NUMBER_BOUND`] where it has none.
fn bounds(schema: &Value) -> (f64, f64) {
    let lo = schema["minimum"].as_f64().unwrap_or(-NUMBER_BOUND);
    let hi = schema["maximum"].as_f64().unwrap_or(NUMBER_BOUND);
    (lo, hi)
}

/// The numbers in `lo..=hi` from a writer of those in a non-negative
/// range: negative ones as a minus and their magnitude.
fn signed(lo: f64, hi: f64, unsigned: impl Fn(f64, f64) -> String) -> String {
    match (lo < 0.0, hi < 0.0) {
        (false, _) => unsigned(lo, hi),
        (true, true) => format!(r#"("-" {})"#, unsigned(-hi, -lo)),
        (true, false) => format!(r#"("-" {} | {})"#, unsigned(0.0, -lo), unsigned(0.0, hi)),
    }
}

/// Numbers in `lo..=hi` (`lo` >= 0): the whole part exact, and the
/// fraction of the top whole number at most `hi`'s (a tolerance of at most
/// 0.5 cannot be 0.7); a fraction under a fractional `lo` is left to the
/// validator.
fn unsigned_number(lo: f64, hi: f64) -> String {
    let whole_lo = lo.floor();
    let top = hi.floor().max(whole_lo);
    let mut alts = Vec::new();
    if top > whole_lo {
        alts.push(format!(
            r#"{} ("." [0-9]+)?"#,
            int_range(whole_lo as u64, top as u64 - 1)
        ));
    }
    // Display never writes an exponent: the digits after the point are
    // the fraction's.
    let hi_text = hi.max(top).to_string();
    let fraction = hi_text.split_once('.').map_or("", |(_, f)| f);
    alts.push(format!(
        r#"{} ("." {})?"#,
        literal(&format!("{top}")),
        fraction_at_most(fraction.as_bytes())
    ));
    format!("({})", alts.join(" | "))
}

/// The digit strings `f` (one or more digits) with `0.f <= 0.digits`.
fn fraction_at_most(digits: &[u8]) -> String {
    let Some((&d, rest)) = digits.split_first() else {
        return r#""0"+"#.into();
    };
    let same = format!(r#""{}" ({})?"#, d as char, fraction_at_most(rest));
    match d {
        b'0' => format!("({same})"),
        b'1' => format!(r#"("0" [0-9]* | {same})"#),
        _ => format!(r#"([0-{}] [0-9]* | {same})"#, (d - 1) as char),
    }
}

/// The integers in `lo..=hi` written without leading zeros, exactly: one
/// alternative per run of same-length numbers, split by digit.
fn int_range(lo: u64, hi: u64) -> String {
    let mut alts = Vec::new();
    let mut a = lo;
    while a <= hi {
        let top = 10u64.saturating_pow(a.to_string().len() as u32) - 1;
        let b = hi.min(top);
        alts.extend(same_length(
            a.to_string().as_bytes(),
            b.to_string().as_bytes(),
        ));
        match b.checked_add(1) {
            Some(next) => a = next,
            None => break,
        }
    }
    format!("({})", alts.join(" | "))
}

/// Digit patterns for the strings from `a` to `b`, both of one length.
fn same_length(a: &[u8], b: &[u8]) -> Vec<String> {
    let class = |x: u8, y: u8| {
        if x == y {
            format!("\"{}\"", x as char)
        } else {
            format!("[{}-{}]", x as char, y as char)
        }
    };
    let n = a.len() - 1;
    if n == 0 {
        return vec![class(a[0], b[0])];
    }
    let prefixed = |d: u8, v: Vec<String>| -> Vec<String> {
        v.into_iter()
            .map(|s| format!("\"{}\" {s}", d as char))
            .collect()
    };
    if a[0] == b[0] {
        return prefixed(a[0], same_length(&a[1..], &b[1..]));
    }
    let free = |n: usize| {
        if n == 1 {
            "[0-9]".to_string()
        } else {
            format!("[0-9]{{{n}}}")
        }
    };
    let mut out = Vec::new();
    let (mut first, mut last) = (a[0], b[0]);
    if a[1..].iter().any(|&d| d != b'0') {
        out.extend(prefixed(a[0], same_length(&a[1..], &vec![b'9'; n])));
        first += 1;
    }
    let b_tail_full = b[1..].iter().all(|&d| d == b'9');
    if !b_tail_full {
        last -= 1;
    }
    if first <= last {
        out.push(format!("{} {}", class(first, last), free(n)));
    }
    if !b_tail_full {
        out.extend(prefixed(b[0], same_length(&vec![b'0'; n], &b[1..])));
    }
    out
}

/// A string: a `^[class]{m,n}$` pattern (feature names) as that class,
/// anything else as any JSON string.
fn string(schema: &Value) -> String {
    let pattern = schema["pattern"].as_str().unwrap_or_default();
    let class = pattern
        .strip_prefix("^[")
        .and_then(|p| p.strip_suffix("}$"))
        .and_then(|p| p.split_once("]{"));
    match class {
        Some((chars, counts)) if counts.split(',').all(|c| c.parse::<u32>().is_ok()) => {
            format!(r#""\"" [{chars}]{{{counts}}} "\"""#)
        }
        _ => "jsonstring".into(),
    }
}

/// A string literal of either notation (both read JSON's escapes).
fn literal(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every integer from 0 to 2,000 against `int_range` of a few ranges,
    /// with a regular expression engine standing in for GBNF's classes.
    #[test]
    fn integer_ranges_are_exact() {
        for (lo, hi) in [
            (0, 0),
            (0, 9),
            (1, 20),
            (10, 600),
            (7, 1999),
            (0, 390),
            (99, 100),
        ] {
            let pattern = int_range(lo, hi);
            for n in 0..2000u64 {
                let inside = (lo..=hi).contains(&n);
                assert_eq!(
                    matches(&pattern, &n.to_string()),
                    inside,
                    "{n} in {lo}..={hi}: {pattern}"
                );
            }
        }
    }

    /// Whether the digit pattern (alternatives of `"d"`, `[a-b]`,
    /// `[0-9]{n}` in sequence) matches all of `s`.
    fn matches(pattern: &str, s: &str) -> bool {
        let inner = &pattern[1..pattern.len() - 1];
        inner.split(" | ").any(|alt| {
            let mut chars = s.chars();
            for part in alt.split(' ') {
                let (class, count) = match part.split_once('{') {
                    Some((c, n)) => (c, n.trim_end_matches('}').parse::<usize>().unwrap()),
                    None => (part, 1),
                };
                for _ in 0..count {
                    let Some(c) = chars.next() else { return false };
                    let ok = if class.starts_with('"') {
                        class.chars().nth(1) == Some(c)
                    } else {
                        let b: Vec<char> = class.chars().collect();
                        (b[1]..=b[3]).contains(&c)
                    };
                    if !ok {
                        return false;
                    }
                }
            }
            chars.next().is_none()
        })
    }
}
