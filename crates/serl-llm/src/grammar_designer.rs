//! The random grammar designer (`--llm grammar`): every module drawn at
//! random from its own grammar, with no model and no knowledge; the
//! floor an LLM designer must clear.
//!
//! A module's grammar is its JSON schema as the Lark grammar writes it out
//! ([`serl_design::module_grammar_schema`]) with every `program` string
//! the typed expression language over the variables the module may read
//! (`ctx.variables`), drawn by [`serl_expr::ProgramDraw`]. Replies are
//! laid out as the Lark grammar writes them (a reward as
//! `{"program": "..."}`), so a fresh draw is a sentence of
//! [`serl_design::module_lark`].
//!
//! Under the search's operators it changes parents instead: `mutate`
//! changes one random place of `parents[0]` (a program's subtree or
//! constant, a JSON value, an optional field, a list's length);
//! `crossover` combines `parents[0]` and `parents[1]` (a subtree of one
//! program in place of one of the other's; JSON field by field, lists cut
//! and joined). A change the validator refuses, or that gives a parent
//! back, is drawn again up to [`TRIES`] times; a parent that does not
//! parse, a retry after a rejection (`ctx.error`) and an operator without
//! its parents get a fresh draw.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use serde_json::{Map, Value};
use serl_design::{extract, module_grammar_schema, Module, ModuleKind};
use serl_expr::{ProgramDraw, Tree, VarSet};

use crate::backend::LlmError;
use crate::designer::{Designer, Reply};
use crate::prompts::ModuleContext;

/// Draws of a change or a combination before giving up on it.
pub const TRIES: usize = 16;

/// The range a number the schema leaves unbounded is drawn from: the
/// grammar bounds it only by what serde reads (±1e9), which is no scale.
const NOMINAL: (f64, f64) = (0.0, 100.0);

/// Ranges spanning more than this factor (widths, agent counts,
/// latencies) are drawn log-uniformly, so that every magnitude is as
/// likely as any other.
const LOG_SPAN: f64 = 1000.0;

/// The spread of a jitter: a factor `exp(N(0, JITTER))` for a positive
/// value, `N(0, JITTER)` times a tenth of the range otherwise.
const JITTER: f64 = 0.35;

/// The random grammar designer.
///
/// **Temperature.** At every choice point between a simpler and a larger
/// alternative, each alternative is drawn with probability proportional
/// to `exp(-energy / temperature)`, its energy the number of further
/// parts it opens: in programs, a call, parenthesis, `if`, minus, power or
/// further term of a chain (see [`serl_expr::ProgramDraw`]); in JSON, each
/// list item beyond the schema's `minItems`. A low temperature gives short
/// programs and short lists (near 0: one variable or number, the fewest
/// items); 1 a few terms, calls and items; a high one approaches the
/// grammar's uniform choice (deep programs, long lists). The grammar's
/// nesting bound ends every program. Other choices do not depend on it: a
/// number is drawn within the schema's `minimum`/`maximum` (uniformly, or
/// log-uniformly over ranges spanning more than three orders of
/// magnitude; integers on their `multipleOf`), an `anyOf` branch, enum
/// value or optional property (present with probability 1/2) uniformly.
pub struct GrammarDesigner {
    rng: SmallRng,
    seed: u64,
    temperature: f64,
}

impl GrammarDesigner {
    /// A designer whose draws are deterministic in `seed`, at
    /// `temperature` (see [`GrammarDesigner`]; NaN is taken as 1, anything
    /// under 0.01 as 0.01).
    pub fn new(seed: u64, temperature: f64) -> Self {
        // `ProgramDraw` takes the temperature in, for lists as well.
        GrammarDesigner {
            rng: SmallRng::seed_from_u64(seed),
            seed,
            temperature,
        }
    }

    /// A valid change of `parent`, or `None` after [`TRIES`] draws.
    fn mutated(&mut self, g: &ModuleGrammar, parent: &Value) -> Option<String> {
        (0..TRIES).find_map(|_| {
            let mut v = parent.clone();
            mutate(g, &mut v, &mut self.rng);
            novel(g, render(&v, &g.schema), &[parent])
        })
    }

    /// A valid combination of `a` and `b` that is neither, or `None`
    /// after [`TRIES`] draws.
    fn crossed(&mut self, g: &ModuleGrammar, a: &Value, b: &Value) -> Option<String> {
        (0..TRIES).find_map(|_| {
            let v = cross(a, b, &g.schema, &mut self.rng);
            novel(g, render(&v, &g.schema), &[a, b])
        })
    }
}

/// `text` if it validates and is none of `parents`, neither as written
/// nor as a module (a child that only writes out or leaves out a default
/// is its parent).
fn novel(g: &ModuleGrammar, text: String, parents: &[&Value]) -> Option<String> {
    let m = module(g.kind, &text)?;
    let same = parents.iter().any(|p| {
        let t = render(p, &g.schema);
        t == text || module(g.kind, &t).as_ref() == Some(&m)
    });
    (!same).then_some(text)
}

impl Designer for GrammarDesigner {
    fn name(&self) -> String {
        format!("random grammar draws (no LLM), seed {}", self.seed)
    }

    fn is_llm(&self) -> bool {
        false
    }

    fn propose(&mut self, kind: ModuleKind, ctx: &ModuleContext) -> Result<Reply, LlmError> {
        let g = ModuleGrammar::new(kind, ctx, self.temperature);
        // Parents that do not parse are left out: a crossover with one
        // parent left mutates it, an operator with none draws afresh.
        let parents: Vec<Value> = ctx
            .parents
            .iter()
            .filter_map(|p| match &p.module {
                Some(m) => Some(m.value()),
                None => parent_value(kind, &p.source),
            })
            .collect();
        let changed = match (ctx.error.is_some(), ctx.operator.as_str(), &parents[..]) {
            (false, "mutate", [p, ..]) | (false, "crossover", [p]) => self.mutated(&g, p),
            (false, "crossover", [a, b, ..]) => {
                self.crossed(&g, a, b).or_else(|| self.mutated(&g, a))
            }
            _ => None,
        };
        let text =
            changed.unwrap_or_else(|| render(&draw(&g, &g.schema, &mut self.rng), &g.schema));
        Ok(Reply {
            module: crate::designer::read_reply(kind, &text).ok(),
            text,
            ..Default::default()
        })
    }

    /// The current micro instruction, unchanged: random draws read no
    /// instruction, so there is nothing to rewrite it from or for.
    fn refine(&mut self, ctx: &ModuleContext) -> Result<Reply, LlmError> {
        Ok(Reply {
            text: ctx.micro_instruction.clone(),
            ..Default::default()
        })
    }
}

/// What one module's draws read.
struct ModuleGrammar {
    kind: ModuleKind,
    /// The schema the Lark grammar writes out.
    schema: Value,
    /// What its programs may read.
    vars: VarSet,
    /// Whether its programs may use window functions (all but a reward's).
    windows: bool,
    temperature: f64,
}

impl ModuleGrammar {
    fn new(kind: ModuleKind, ctx: &ModuleContext, temperature: f64) -> Self {
        let names = ctx
            .variables
            .iter()
            .filter_map(|v| v["name"].as_str().map(String::from))
            .collect();
        ModuleGrammar {
            kind,
            schema: module_grammar_schema(kind),
            vars: VarSet::from_names(names),
            windows: kind != ModuleKind::Reward,
            temperature,
        }
    }

    fn programs(&self) -> ProgramDraw<'_> {
        ProgramDraw::new(&self.vars, self.windows, self.temperature)
    }

    /// A count from `min` to `max`, each one more with energy one more.
    fn count(&self, min: usize, max: usize, rng: &mut SmallRng) -> usize {
        let mut u = || rng.random::<f64>();
        min + self.programs().count(max.saturating_sub(min), &mut u)
    }
}

/// The module of `reply` if `generate` would accept it before its smoke
/// test: extracted, parsed and validated.
fn module(kind: ModuleKind, reply: &str) -> Option<Module> {
    Module::parse(kind, &extract(kind, reply)?).ok()
}

/// A parent's module text as JSON of its schema (a reward as
/// `{"program": ...}`), if it is one.
fn parent_value(kind: ModuleKind, source: &str) -> Option<Value> {
    let text = extract(kind, source)?;
    if kind.is_json() {
        serde_json::from_str(&text).ok().filter(Value::is_object)
    } else {
        Some(serde_json::json!({ "program": text }))
    }
}

/// Whether `schema` has a `program` property anywhere inside: the Lark
/// grammar writes such parts itself, the rest as `%json`.
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

/// The `anyOf` branch of `schema` that `v` follows: the first whose
/// required properties `v` has, whose constants it matches and whose
/// properties name all of `v`'s.
fn branch<'s>(v: &Value, schema: &'s Value) -> &'s Value {
    let Some(any) = schema["anyOf"].as_array().filter(|a| !a.is_empty()) else {
        return schema;
    };
    let fits = |b: &Value| {
        let Some(m) = v.as_object() else {
            return b["type"] != "object";
        };
        let props = &b["properties"];
        required(b).iter().all(|k| m.contains_key(*k))
            && m.iter().all(|(k, x)| {
                props
                    .get(k)
                    .is_some_and(|p| p.get("const").is_none_or(|c| c == x))
            })
    };
    let b = any.iter().find(|b| fits(branch(v, b))).unwrap_or(&any[0]);
    branch(v, b)
}

fn required(schema: &Value) -> Vec<&str> {
    schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The schema of item `i` of an array: its `prefixItems`, then `items`.
fn item_schema(schema: &Value, i: usize) -> &Value {
    schema["prefixItems"]
        .as_array()
        .and_then(|p| p.get(i))
        .unwrap_or(&schema["items"])
}

/// The least and most items an array of `schema` may have as the grammar
/// writes it: a list holding programs has at least one.
fn item_bounds(schema: &Value) -> (usize, usize) {
    let prefix = schema["prefixItems"].as_array().map_or(0, Vec::len);
    let mut min = schema["minItems"].as_u64().unwrap_or(0) as usize;
    if has_program(schema) {
        min = min.max(1);
    }
    let max = match schema.get("items") {
        None => prefix,
        Some(_) => schema["maxItems"].as_u64().map_or(min + 16, |m| m as usize),
    };
    (min, max.max(min))
}

/// A value of `schema`, drawn as [`GrammarDesigner`] says.
fn draw(g: &ModuleGrammar, schema: &Value, rng: &mut SmallRng) -> Value {
    if let Some(any) = schema["anyOf"].as_array().filter(|a| !a.is_empty()) {
        return draw(g, &any[rng.random_range(0..any.len())], rng);
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(e) = schema["enum"].as_array().filter(|e| !e.is_empty()) {
        return e[rng.random_range(0..e.len())].clone();
    }
    match schema["type"].as_str() {
        Some("object") => {
            let req = required(schema);
            // The grammar writes an object holding programs with its
            // required properties only.
            let optional = !has_program(schema);
            let mut out = Map::new();
            for (key, sub) in schema["properties"].as_object().into_iter().flatten() {
                if key == "program" {
                    let mut u = || rng.random::<f64>();
                    out.insert(key.clone(), g.programs().program(&mut u).to_string().into());
                } else if req.contains(&key.as_str()) || (optional && rng.random_bool(0.5)) {
                    out.insert(key.clone(), draw(g, sub, rng));
                }
            }
            Value::Object(out)
        }
        Some("array") => {
            let (min, max) = item_bounds(schema);
            let n = g.count(min, max, rng);
            (0..n)
                .map(|i| draw(g, item_schema(schema, i), rng))
                .collect()
        }
        Some("integer") => draw_number(schema, true, rng),
        Some("number") => draw_number(schema, false, rng),
        Some("string") => draw_string(schema, rng),
        Some("boolean") => Value::Bool(rng.random_bool(0.5)),
        _ => Value::Null,
    }
}

/// A number's range: the schema's bounds, [`NOMINAL`] where it has none.
fn number_range(schema: &Value) -> (f64, f64) {
    match (schema["minimum"].as_f64(), schema["maximum"].as_f64()) {
        (Some(lo), Some(hi)) => (lo, hi.max(lo)),
        (Some(lo), None) => (lo, lo.max(NOMINAL.0) + NOMINAL.1),
        (None, Some(hi)) => (hi.min(NOMINAL.1) - NOMINAL.1, hi),
        (None, None) => NOMINAL,
    }
}

fn draw_number(schema: &Value, integer: bool, rng: &mut SmallRng) -> Value {
    let (lo, hi) = number_range(schema);
    let x = if lo >= 0.0 && hi > LOG_SPAN * (lo + 1.0) {
        ((lo + 1.0).ln() + rng.random::<f64>() * ((hi + 1.0) / (lo + 1.0)).ln()).exp() - 1.0
    } else {
        lo + rng.random::<f64>() * (hi - lo)
    };
    number_value(x, schema, integer)
}

/// `x` as a value of `schema`: within its range, a whole multiple of its
/// `multipleOf` for an integer, else rounded to four decimals.
fn number_value(x: f64, schema: &Value, integer: bool) -> Value {
    let (lo, hi) = number_range(schema);
    if integer {
        let step = schema["multipleOf"]
            .as_f64()
            .filter(|m| *m >= 1.0)
            .unwrap_or(1.0);
        let (first, last) = ((lo / step).ceil(), (hi / step).floor());
        let k = (x / step).round().clamp(first, last.max(first));
        return Value::from((k * step) as i64);
    }
    let r = ((x * 1e4).round() / 1e4).clamp(lo, hi);
    serde_json::Number::from_f64(r).map_or(Value::Null, Value::Number)
}

/// A string: of a `^[class]{m,n}$` pattern (feature names), one to eight
/// characters of the class; of any other, `x`.
fn draw_string(schema: &Value, rng: &mut SmallRng) -> Value {
    let pattern = schema["pattern"].as_str().unwrap_or_default();
    let Some((class, counts)) = pattern
        .strip_prefix("^[")
        .and_then(|p| p.strip_suffix("}$"))
        .and_then(|p| p.split_once("]{"))
    else {
        return Value::String("x".into());
    };
    // The class's characters, `a-z` ranges spelt out.
    let chars: Vec<char> = class.chars().collect();
    let mut set = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let range = i + 2 < chars.len() && chars[i + 1] == '-';
        let last = if range { chars[i + 2] } else { chars[i] };
        set.extend(chars[i]..=last);
        i += if range { 3 } else { 1 };
    }
    if set.is_empty() {
        set.push('x');
    }
    let mut bounds = counts.split(',').filter_map(|c| c.parse::<usize>().ok());
    let min = bounds.next().unwrap_or(1).max(1);
    let max = bounds.next().unwrap_or(min).clamp(min, min.max(8));
    let n = rng.random_range(min..=max);
    let name: String = (0..n)
        .map(|_| set[rng.random_range(0..set.len())])
        .collect();
    Value::String(name)
}

/// `v` as the Lark grammar writes it: parts without programs as compact
/// JSON; objects holding programs with their required properties first,
/// `"key": value` joined by `", "`; their lists joined by `", "`.
fn render(v: &Value, schema: &Value) -> String {
    if !has_program(schema) {
        return v.to_string();
    }
    let schema = branch(v, schema);
    match v {
        Value::Object(m) => {
            let req = required(schema);
            let mut keys: Vec<&String> = m.keys().filter(|k| req.contains(&k.as_str())).collect();
            keys.sort_by_key(|k| req.iter().position(|r| r == k));
            keys.extend(m.keys().filter(|k| !req.contains(&k.as_str())));
            let fields: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    let value = render(&m[k], &schema["properties"][k.as_str()]);
                    format!("{}: {value}", Value::String(k.clone()))
                })
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .enumerate()
                .map(|(i, x)| render(x, item_schema(schema, i)))
                .collect();
            format!("[{}]", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// A place a mutation may change, by its JSON pointer.
enum Place {
    /// A program.
    Program(String),
    /// A number, string, enum or boolean, or a list's object item, with
    /// its schema: a number jittered, anything drawn again.
    Leaf(String, Value),
    /// A list, with its schema: one item added or removed.
    Resize(String, Value),
    /// An optional property of an object (the object's pointer, the key,
    /// the property's schema, the keys after it in the schema): dropped
    /// when present, drawn in its place when absent.
    Optional(String, String, Value, Vec<String>),
}

/// Every place of `v` (of `schema`) under pointer `at`.
fn places(v: &Value, schema: &Value, at: &str, out: &mut Vec<Place>) {
    let schema = branch(v, schema);
    match v {
        Value::Object(m) => {
            let req = required(schema);
            // The grammar writes no optional property of an object that
            // holds programs.
            let optional = !has_program(schema);
            let props = schema["properties"].as_object().into_iter().flatten();
            for (n, (key, sub)) in props.enumerate() {
                let p = format!("{at}/{key}");
                match m.get(key) {
                    Some(Value::String(_)) if key == "program" => out.push(Place::Program(p)),
                    Some(x) => places(x, sub, &p, out),
                    None => {}
                }
                if optional && !req.contains(&key.as_str()) {
                    let after = schema["properties"].as_object().into_iter().flatten();
                    let after = after.skip(n + 1).map(|(k, _)| k.clone()).collect();
                    out.push(Place::Optional(at.into(), key.clone(), sub.clone(), after));
                }
            }
        }
        Value::Array(items) => {
            let (min, max) = item_bounds(schema);
            if min < max && schema.get("items").is_some() {
                out.push(Place::Resize(at.into(), schema.clone()));
            }
            for (i, x) in items.iter().enumerate() {
                let p = format!("{at}/{i}");
                let s = item_schema(schema, i);
                if x.is_object() {
                    out.push(Place::Leaf(p.clone(), s.clone()));
                }
                places(x, s, &p, out);
            }
        }
        _ => {
            let choices = schema["enum"].as_array().map_or(2, Vec::len);
            if schema.get("const").is_none() && choices > 1 {
                out.push(Place::Leaf(at.into(), schema.clone()));
            }
        }
    }
}

/// Changes one random place of `v`.
fn mutate(g: &ModuleGrammar, v: &mut Value, rng: &mut SmallRng) {
    let mut all = Vec::new();
    places(v, &g.schema, "", &mut all);
    if all.is_empty() {
        return;
    }
    let place = all.swap_remove(rng.random_range(0..all.len()));
    match place {
        Place::Program(p) => {
            if let Some(Value::String(src)) = v.pointer_mut(&p) {
                if let Ok(t) = Tree::parse(src) {
                    let mut u = || rng.random::<f64>();
                    *src = t.mutated(&g.programs(), &mut u).to_string();
                }
            }
        }
        Place::Leaf(p, schema) => {
            let new = match schema["type"].as_str() {
                Some(t @ ("number" | "integer")) if rng.random_bool(0.75) => {
                    let x = v.pointer(&p).and_then(Value::as_f64).unwrap_or(0.0);
                    number_value(
                        jitter(x, number_range(&schema), rng),
                        &schema,
                        t == "integer",
                    )
                }
                _ => draw(g, &schema, rng),
            };
            if let Some(x) = v.pointer_mut(&p) {
                *x = new;
            }
        }
        Place::Resize(p, schema) => resize(g, v.pointer_mut(&p), &schema, rng),
        Place::Optional(p, key, schema, after) => {
            let mut drawn = Some(draw(g, &schema, rng));
            if let Some(Value::Object(m)) = v.pointer_mut(&p) {
                if m.remove(&key).is_some() {
                    return;
                }
                // Before the first property that follows it in the
                // schema, where the grammar writes it.
                let mut rebuilt = Map::new();
                for (k, x) in std::mem::take(m) {
                    if let Some(d) = drawn.take_if(|_| after.contains(&k)) {
                        rebuilt.insert(key.clone(), d);
                    }
                    rebuilt.insert(k, x);
                }
                if let Some(d) = drawn {
                    rebuilt.insert(key, d);
                }
                *m = rebuilt;
            }
        }
    }
}

/// `x` moved a little within `(lo, hi)`: by a random factor when it and
/// the range are positive, else by a tenth of the range at random.
fn jitter(x: f64, (lo, hi): (f64, f64), rng: &mut SmallRng) -> f64 {
    let z: f64 = Normal::new(0.0, JITTER).map_or(0.0, |n| n.sample(rng));
    if lo >= 0.0 && x > 0.0 {
        x * z.exp()
    } else {
        x + z * (hi - lo) / 10.0
    }
}

/// One item added to or removed from the list `list` of `schema`.
fn resize(g: &ModuleGrammar, list: Option<&mut Value>, schema: &Value, rng: &mut SmallRng) {
    let Some(Value::Array(items)) = list else {
        return;
    };
    let (min, max) = item_bounds(schema);
    let n = items.len();
    if n < max && (n <= min || rng.random_bool(0.5)) {
        let at = rng.random_range(0..=n);
        items.insert(at, draw(g, item_schema(schema, at), rng));
    } else if n > min {
        items.remove(rng.random_range(0..n));
    }
}

/// A child of `a` and `b` (both of `schema`): objects field by field, each
/// from one parent or both; programs subtree for subtree; lists cut at
/// a random point of each and joined, or item by item; other values from
/// one parent. Parents of different `anyOf` branches give one of them.
/// Programs cross by [`Tree::crossed`].
fn cross(a: &Value, b: &Value, schema: &Value, rng: &mut SmallRng) -> Value {
    let (sa, sb) = (branch(a, schema), branch(b, schema));
    let pick = |rng: &mut SmallRng| if rng.random_bool(0.5) { a } else { b }.clone();
    if !std::ptr::eq(sa, sb) {
        return pick(rng);
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let req = required(sa);
            let mut out = Map::new();
            for (key, sub) in sa["properties"].as_object().into_iter().flatten() {
                let v = match (x.get(key), y.get(key)) {
                    (Some(Value::String(p)), Some(Value::String(q))) if key == "program" => {
                        let mut u = || rng.random::<f64>();
                        let child = Tree::parse(p)
                            .ok()
                            .zip(Tree::parse(q).ok())
                            .and_then(|(tp, tq)| tp.crossed(&tq, &mut u));
                        Some(child.map_or_else(|| p.clone().into(), |c| c.to_string().into()))
                    }
                    (Some(p), Some(q)) => Some(cross(p, q, sub, rng)),
                    (Some(p), None) | (None, Some(p)) => {
                        (req.contains(&key.as_str()) || rng.random_bool(0.5)).then(|| p.clone())
                    }
                    (None, None) => None,
                };
                if let Some(v) = v {
                    out.insert(key.clone(), v);
                }
            }
            Value::Object(out)
        }
        (Value::Array(x), Value::Array(y)) => {
            let items: Vec<Value> = if sa.get("items").is_some() && rng.random_bool(0.5) {
                let (i, j) = (rng.random_range(0..=x.len()), rng.random_range(0..=y.len()));
                x[..i].iter().chain(&y[j..]).cloned().collect()
            } else {
                let mut items: Vec<Value> = x
                    .iter()
                    .zip(y)
                    .enumerate()
                    .map(|(i, (p, q))| cross(p, q, item_schema(sa, i), rng))
                    .collect();
                items.extend(x.iter().skip(y.len()).cloned());
                items
            };
            let (min, max) = item_bounds(sa);
            if (min..=max).contains(&items.len()) {
                Value::Array(items)
            } else {
                pick(rng)
            }
        }
        _ => pick(rng),
    }
}

#[cfg(test)]
#[path = "grammar_designer_tests.rs"]
mod tests;
