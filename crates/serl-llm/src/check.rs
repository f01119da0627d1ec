//! Checking a prompt directory: every template renders against its
//! sample contexts (`samples.rs`), and the module prompts show the
//! program database's parents (`serl prompts check`, and every run before
//! it designs).

use serl_design::ModuleKind;

use crate::backend::LlmError;
use crate::prompts::Prompts;
use crate::samples::operator_context;
use crate::templates::Template;

impl Prompts {
    /// Renders every template of [`Template::all`] against its sample
    /// contexts; returns every problem found: a required template missing,
    /// or one that does not render (an optional one is checked when
    /// present).
    pub fn check(&self) -> Vec<LlmError> {
        let mut problems = Vec::new();
        for t in Template::all() {
            if !self.has(t.name()) {
                if t.required() {
                    problems.push(LlmError::Template {
                        file: self.dir().join(format!("{t}.j2")).display().to_string(),
                        line: 0,
                        message: "missing".into(),
                    });
                }
                continue;
            }
            // The first error of a template is enough to fix it.
            if let Some(e) = t
                .sample_contexts()
                .iter()
                .find_map(|ctx| self.render(t.name(), ctx).err())
            {
                problems.push(e);
            }
        }
        // Where the operator templates are, the module prompts must show
        // the parents through them.
        if self.has("mutate") || self.has("crossover") {
            problems.extend(check_operators(self));
        }
        problems
    }
}

/// Whether `prompts`' module templates show the parents under each
/// operator: every `kind` prompt rendered with [`operator_context`] must
/// carry each parent's module text. One message per template that does
/// not (a prompt directory written before the operators existed, whose
/// `feedback.j2` does not include `mutate.j2` and `crossover.j2`).
pub fn check_operators(prompts: &Prompts) -> Vec<LlmError> {
    let mut problems = Vec::new();
    for operator in ["mutate", "crossover"] {
        let kind = ModuleKind::Reward;
        let ctx = operator_context(kind, operator);
        match prompts.render(kind.name(), &ctx) {
            Err(e) => problems.push(e),
            Ok(text) => {
                let missing = ctx["parents"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| !text.contains(p["source"].as_str().unwrap_or_default()));
                if missing {
                    problems.push(LlmError::Template {
                        file: prompts.dir().join("reward.j2").display().to_string(),
                        line: 0,
                        message: format!(
                            "the {operator} operator's prompt does not show its parents' modules; \
                             include {operator}.j2 (the shipped feedback.j2 does)"
                        ),
                    });
                }
            }
        }
    }
    problems
}

impl Prompts {
    /// Every template serl renders, one a line (`serl prompts list`): its
    /// name, its file, what it is for, and whether the directory lacks
    /// it; then a note for each `.j2` file serl never renders, so that a
    /// misspelt file is found.
    pub fn listing(&self) -> (Vec<String>, Vec<String>) {
        let lines = Template::all()
            .into_iter()
            .map(|t| {
                let file = self.dir().join(format!("{t}.j2"));
                let absent = match (self.has(t.name()), t.required()) {
                    (true, _) => "",
                    (false, true) => " (missing)",
                    (false, false) => " (optional; absent)",
                };
                format!(
                    "{t:<14} {:<28} {}{absent}",
                    file.display().to_string(),
                    t.role()
                )
            })
            .collect();
        let notes = self
            .list()
            .iter()
            .filter(|name| Template::parse_name(name).is_none())
            .map(|name| format!("note: {name}.j2 is not a template serl renders"))
            .collect();
        (lines, notes)
    }

    /// What `serl prompts check` says of a directory whose templates all
    /// render.
    pub fn rendered_line(&self) -> String {
        let present = Template::all()
            .into_iter()
            .filter(|t| self.has(t.name()))
            .count();
        format!(
            "{present} templates in {} render against the sample contexts",
            self.dir().display()
        )
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use serde_json::json;

    use super::*;
    use crate::prompts::{ModuleContext, TaskInfo};
    use crate::samples::sample_context;

    fn shipped() -> PathBuf {
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("../../prompts")
    }

    #[test]
    fn the_shipped_prompts_pass_the_check() {
        let p = Prompts::load(&shipped()).unwrap();
        let problems = p.check();
        assert!(problems.is_empty(), "{problems:?}");
        let text = p
            .render("reward", &sample_context(ModuleKind::Reward, true))
            .unwrap();
        assert!(
            text.contains("remaining_inv") && text.contains("did you mean"),
            "{text}"
        );
    }

    /// The reply a template asks for is the shape the module's schema
    /// constrains it to: each JSON module's template asks for JSON with
    /// the schema's required fields, and the reward's asks for
    /// `{"program": ...}` when constrained and a fenced program when not.
    #[test]
    fn each_template_asks_for_the_shape_its_schema_constrains_the_reply_to() {
        let p = Prompts::load(&shipped()).unwrap();
        for kind in ModuleKind::ALL {
            let mut ctx = sample_context(kind, false);
            ctx["constrained"] = json!(true);
            let text = p.render(kind.name(), &ctx).unwrap();
            let ask = &text[text
                .rfind("Reply with")
                .unwrap_or_else(|| panic!("{kind:?}: no reply instruction"))..];
            let schema = serl_design::module_schema(kind);
            assert!(ask.starts_with("Reply with JSON"), "{kind:?}: {ask}");
            // A schema of several forms (the plan's) asks for each one's.
            let forms = schema["anyOf"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| vec![schema.clone()]);
            for field in forms.iter().flat_map(|f| f["required"].as_array().unwrap()) {
                let field = field.as_str().unwrap();
                assert!(
                    ask.contains(&format!("\"{field}\"")),
                    "{kind:?}: `{field}` not asked for in: {ask}"
                );
            }
            ctx["constrained"] = json!(false);
            let text = p.render(kind.name(), &ctx).unwrap();
            if kind == ModuleKind::Reward {
                assert!(text.contains("```serl fenced block"), "{text}");
            }
        }
    }

    /// Each operator's prompt carries its parents' module text, scores and
    /// validation breakdown, and the request to change or combine them.
    #[test]
    fn each_operator_prompt_shows_its_parents_and_what_they_achieved() {
        let p = Prompts::load(&shipped()).unwrap();
        assert!(check_operators(&p).is_empty());
        let mutate = p
            .render("reward", &operator_context(ModuleKind::Reward, "mutate"))
            .unwrap();
        for needle in [
            serl_design::DEFAULT_REWARD_PROGRAM,
            "Improve this reward (from design i0_c0",
            "0.4 bps at the lower bound",
            "AFI 0.08",
            "`step_pa`: mean 0.4",
            "Write the whole new reward",
        ] {
            assert!(mutate.contains(needle), "`{needle}` not in:\n{mutate}");
        }
        let cross = p
            .render("reward", &operator_context(ModuleKind::Reward, "crossover"))
            .unwrap();
        assert!(
            cross.contains("Combine these two reward modules"),
            "{cross}"
        );
        assert!(cross.contains("twap_gain - 0.5 * abs(remaining_inv - time_left) / steps"));
        assert!(cross.contains(serl_design::DEFAULT_REWARD_PROGRAM));
        assert!(cross.contains("Keep the strengths of both"), "{cross}");
        // The high-level DEK's rewrite of an operator's instruction
        // replaces the template's own words.
        let mut ctx = operator_context(ModuleKind::Reward, "mutate");
        ctx["operator_instruction"] = "Try a smaller penalty on the inventory.".into();
        let rewritten = p.render("reward", &ctx).unwrap();
        assert!(rewritten
            .contains("Try a smaller penalty on the inventory. Write the whole new reward"));
        assert!(
            !rewritten.contains("change one or two things"),
            "{rewritten}"
        );
        let fresh = p
            .render("reward", &sample_context(ModuleKind::Reward, true))
            .unwrap();
        assert!(
            !fresh.contains("Improve this"),
            "a fresh prompt shows no parent"
        );
    }

    #[test]
    fn an_undefined_variable_and_a_syntax_error_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        for f in std::fs::read_dir(shipped()).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, dir.path().join(f.file_name().unwrap())).unwrap();
        }
        std::fs::write(
            dir.path().join("reward.j2"),
            "line one\n{{ task.descripton }}\n",
        )
        .unwrap();
        let p = Prompts::load(dir.path()).unwrap();
        let e = p.check().into_iter().next().unwrap().to_string();
        assert!(
            e.contains("reward.j2") && e.contains("line 2") && e.contains("undefined"),
            "{e}"
        );
        // A directory whose feedback block predates the operators loads,
        // but a search would not show the model its parents: said so.
        std::fs::write(dir.path().join("feedback.j2"), "no parents here\n").unwrap();
        std::fs::write(
            dir.path().join("reward.j2"),
            "{% include \"feedback.j2\" %}\n",
        )
        .unwrap();
        let p = Prompts::load(dir.path()).unwrap();
        let problems = check_operators(&p);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].to_string().contains("include mutate.j2"),
            "{}",
            problems[0]
        );
        std::fs::write(dir.path().join("state.j2"), "ok\n{% if x %}\nno end").unwrap();
        let e = Prompts::load(dir.path()).err().unwrap().to_string();
        assert!(e.contains("state.j2") && e.contains("syntax"), "{e}");
    }

    /// A placing agent's state prompt lists its resting order's columns
    /// (and its grammar derives them); a crossing agent's and every
    /// broadcast prompt do not.
    #[test]
    fn a_placing_tasks_state_prompt_offers_the_resting_orders_columns() {
        let p = Prompts::load(&shipped()).unwrap();
        let placing = TaskInfo {
            placements: vec!["cross".into(), "touch".into()],
            ..TaskInfo::default()
        };
        let render = |kind: ModuleKind, task: TaskInfo| {
            let ctx = ModuleContext::new(kind, task, "m", "m");
            let text = p.render(kind.name(), &ctx.to_value()).unwrap();
            (text, ctx.grammar, ctx.obs_dim)
        };
        let (text, grammar, obs_dim) = render(ModuleKind::State, placing.clone());
        assert!(
            text.contains("queue_ahead") && text.contains("minutes_resting"),
            "{text}"
        );
        assert!(grammar.contains("\"queue_ahead\""), "{grammar}");
        assert_eq!(obs_dim, serl_design::OBS_DIM + 2);
        for (kind, task) in [
            (ModuleKind::State, TaskInfo::default()),
            (ModuleKind::Communication, placing),
        ] {
            let (text, grammar, _) = render(kind, task);
            assert!(!text.contains("queue_ahead"), "{kind:?}: {text}");
            assert!(!grammar.contains("queue_ahead"), "{kind:?}");
        }
    }

    /// On data that carries a planted forecast, the state prompt offers
    /// `signal` with what it means, and does not call it a resting
    /// order's column; without one it is not offered.
    #[test]
    fn a_planted_signal_is_offered_to_the_state_module_with_its_meaning() {
        let p = Prompts::load(&shipped()).unwrap();
        let render = |signal: bool| {
            let task = TaskInfo {
                signal,
                ..TaskInfo::default()
            };
            let ctx = ModuleContext::new(ModuleKind::State, task, "m", "m");
            p.render("state", &ctx.to_value()).unwrap()
        };
        let with = render(true);
        assert!(
            with.contains("`signal`: a forecast of the price move"),
            "{with}"
        );
        assert!(!with.contains("resting order"), "{with}");
        assert!(!render(false).contains("`signal`"));
    }
}
