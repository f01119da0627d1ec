//! Finding the module in a reply: models wrap it in prose and markdown
//! fences, and JSON modules in both.

use crate::kind::ModuleKind;

/// The module text inside `reply`, or `None` when there is nothing that
/// could be one. Programs: `{"program": "..."}` (the shape a constrained
/// reply has, [`crate::module_schema`]), else the first fenced block, else
/// the reply itself (a leading `reward =` or similar label is dropped).
/// JSON modules: the first balanced `{...}` or `[...]`, fenced or not.
pub fn extract(kind: ModuleKind, reply: &str) -> Option<String> {
    if !kind.is_json() {
        // The whole reply, or its fence, or the first object in its prose.
        let wrapped = [Some(reply), fenced(reply)]
            .into_iter()
            .flatten()
            .find_map(wrapped_program)
            .or_else(|| balanced(reply).as_deref().and_then(wrapped_program));
        if wrapped.is_some() {
            return wrapped;
        }
    }
    // Programs: a fence, else an inline `code span` inside prose.
    let body = fenced(reply)
        .or_else(|| (!kind.is_json()).then(|| inline_code(reply)).flatten())
        .unwrap_or(reply);
    let text = if kind.is_json() {
        balanced(body).or_else(|| balanced(reply))?
    } else {
        let t = body.trim();
        // "reward = <program>" or "reward: <program>" on one line.
        let t = t
            .strip_prefix(kind.name())
            .map(str::trim_start)
            .filter(|r| r.starts_with(['=', ':']))
            .map(|r| r[1..].trim())
            .unwrap_or(t);
        t.to_string()
    };
    let text = text.trim().to_string();
    let text = match kind {
        ModuleKind::State => unique_names(text, "features"),
        ModuleKind::Communication => unique_names(text, "broadcast"),
        _ => text,
    };
    (!text.is_empty()).then_some(text)
}

/// [`extract`], or why nothing could be taken from the reply, in words
/// (the parser's "EOF while parsing" on an empty text says nothing of
/// the reply).
pub fn extract_or_why(kind: ModuleKind, reply: &str) -> Result<String, String> {
    extract(kind, reply).ok_or_else(|| {
        if reply.trim().is_empty() {
            "the reply was empty".to_string()
        } else if kind.is_json() {
            "no JSON object found in the reply".to_string()
        } else {
            "no expression found in the reply".to_string()
        }
    })
}

/// The reply with each feature name in `list` given once: a feature
/// repeated whole is dropped, another program under a name already used
/// gets the name with `_2`, `_3`, ... A context-free grammar cannot forbid
/// a repeated name, and small models repeat them (SmolLM2: 2 state replies
/// in 10); features read only the observation, never each other, so the
/// names carry no meaning to keep. Files are not repaired: `Module::parse`
/// refuses a name defined twice.
fn unique_names(text: String, list: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return text;
    };
    let Some(items) = v.get_mut(list).and_then(|l| l.as_array_mut()) else {
        return text;
    };
    let key = |f: &serde_json::Value, k: &str| f.get(k).and_then(|n| n.as_str()).map(String::from);
    // (name as written, program) of the features kept, and every name used.
    let mut written: std::collections::HashSet<(String, Option<String>)> = Default::default();
    let mut used: std::collections::HashSet<String> = Default::default();
    let mut changed = false;
    let mut kept = Vec::new();
    for mut f in items.drain(..) {
        let (Some(name), program) = (key(&f, "name"), key(&f, "program")) else {
            kept.push(f);
            continue;
        };
        if !written.insert((name.clone(), program)) {
            changed = true;
            continue;
        }
        let mut unique = name.clone();
        let mut k = 2;
        while used.contains(&unique) {
            let suffix = format!("_{k}");
            // By characters: the name is not checked yet, and may not be
            // ASCII.
            let stem: String = name
                .chars()
                .take(crate::MAX_FEATURE_NAME - suffix.len())
                .collect();
            unique = format!("{stem}{suffix}");
            k += 1;
        }
        if unique != name {
            f["name"] = serde_json::Value::String(unique.clone());
            changed = true;
        }
        used.insert(unique);
        kept.push(f);
    }
    if !changed {
        return text;
    }
    *items = kept;
    v.to_string()
}

/// The program of a reply that is the JSON object `{"program": "..."}`.
fn wrapped_program(reply: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(reply.trim()).ok()?;
    let p = v.as_object()?.get("program")?.as_str()?.trim();
    (!p.is_empty()).then(|| p.to_string())
}

/// The contents of the first ``` fence (its language tag dropped).
fn fenced(s: &str) -> Option<&str> {
    let start = s.find("```")?;
    let rest = &s[start + 3..];
    let body_start = rest.find('\n').map_or(0, |i| i + 1);
    let rest = &rest[body_start..];
    let end = rest.find("```").unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The first `inline code span` of a line that has prose around it.
fn inline_code(s: &str) -> Option<&str> {
    let start = s.find('`')? + 1;
    let len = s[start..].find('`')?;
    (len > 0).then(|| &s[start..start + len])
}

/// The first balanced JSON object or array, strings respected.
fn balanced(s: &str) -> Option<String> {
    let start = s.find(['{', '['])?;
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    for (i, c) in s[start..].char_indices() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(s[start..start + i + 1].to_string());
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether `reply` is a well-formed `kind` reply, short of validation: a
/// module can be extracted from it, JSON modules are JSON, and every
/// program in it parses (names, types, bounds and values are the
/// validator's, [`crate::Module::parse`]). Grammar tests and `serl prompts
/// probe` count replies with it.
pub fn well_formed(kind: ModuleKind, reply: &str) -> bool {
    let Some(text) = extract(kind, reply) else {
        return false;
    };
    if !kind.is_json() {
        return serl_expr::check_syntax(&text).is_ok();
    }
    let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    programs_parse(&json)
}

fn programs_parse(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Object(m) => m.iter().all(|(k, x)| match (k.as_str(), x) {
            ("program", serde_json::Value::String(s)) => serl_expr::check_syntax(s).is_ok(),
            _ => programs_parse(x),
        }),
        serde_json::Value::Array(a) => a.iter().all(programs_parse),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_with_nothing_to_take_says_so_in_words() {
        let e = extract_or_why(ModuleKind::Architecture, "I think a wide net is best.");
        assert_eq!(e.unwrap_err(), "no JSON object found in the reply");
        assert_eq!(
            extract_or_why(ModuleKind::Reward, "  ").unwrap_err(),
            "the reply was empty"
        );
    }

    #[test]
    fn programs_come_out_of_fences_and_labels() {
        let r = "Here is my reward:\n```serl\nstep_pa - 2 * remaining_inv^2\n```\nIt penalises inventory.";
        assert_eq!(
            extract(ModuleKind::Reward, r).unwrap(),
            "step_pa - 2 * remaining_inv^2"
        );
        assert_eq!(
            extract(ModuleKind::Reward, "reward = step_pa").unwrap(),
            "step_pa"
        );
        assert_eq!(extract(ModuleKind::Reward, "  \n "), None);
        assert_eq!(
            extract(ModuleKind::Reward, "{\"program\": \" twap_gain - done \"}").unwrap(),
            "twap_gain - done",
            "a constrained reply"
        );
        for r in [
            "```json\n{\"program\": \"step_pa\"}\n```",
            "<think>short</think> Here: {\"program\": \"step_pa\"} done",
        ] {
            assert_eq!(extract(ModuleKind::Reward, r).unwrap(), "step_pa", "{r}");
        }
    }

    #[test]
    fn a_repeated_feature_name_is_dropped_or_renamed() {
        let r = r#"{"features": [{"name": "a", "program": "spread"}, {"name": "a", "program": "spread"}, {"name": "a", "program": "time_left"}, {"name": "a", "program": "time_left"}, {"name": "a_2", "program": "volume"}]}"#;
        let v: serde_json::Value =
            serde_json::from_str(&extract(ModuleKind::State, r).unwrap()).unwrap();
        let names: Vec<&str> = v["features"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "a_2", "a_2_2"]);
        // Nothing repeated: the text as it was.
        let once = r#"{"features": [{"program": "spread", "name": "a"}]}"#;
        assert_eq!(extract(ModuleKind::State, once).unwrap(), once);
        let long = "x".repeat(crate::MAX_FEATURE_NAME);
        let r = format!(
            r#"{{"broadcast": [{{"name": "{long}", "program": "spread"}}, {{"name": "{long}", "program": "volume"}}], "aggregate": "mean"}}"#
        );
        let m = crate::Module::parse(
            ModuleKind::Communication,
            &extract(ModuleKind::Communication, &r).unwrap(),
        );
        assert!(m.is_ok(), "{m:?}");
    }

    #[test]
    fn json_comes_out_of_prose_with_braces_in_strings() {
        let r = "Sure! {\"window\": 1, \"blocks\": [{\"kind\": \"dense\", \"width\": 8, \"note\": \"}\"}]} done";
        let j = extract(ModuleKind::Architecture, r).unwrap();
        assert!(j.ends_with("}]}"), "{j}");
        assert_eq!(extract(ModuleKind::Architecture, "no json here"), None);
    }
}
