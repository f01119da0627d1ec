//! The one list of prompt templates: a template per designable module
//! (every [`ModuleKind`], in its order) and the four that are not a
//! module's. `serl prompts list`, `render`, `check` and `probe` read it,
//! so a module added to `ModuleKind` is listed, rendered, checked and
//! probed without another list to update.

use serde_json::{json, Value};
use serl_design::ModuleKind;

use crate::samples::{operator_context, sample_context};

/// A template serl renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Template {
    /// The prompt that designs one module.
    Module(ModuleKind),
    /// The shared task description, included by every module template.
    System,
    /// The last round's results and a rejected reply's error, included by
    /// every module template.
    Feedback,
    /// High-level DEK: a module's micro instruction rewritten from its
    /// score history.
    Refine,
    /// The LLM reward critic of `serl train` (`[train.reward_critic]
    /// critic = "llm"`).
    RewardCritic,
    /// The program database's mutate operator: a parent's module and the
    /// request to change it, included by `feedback.j2`.
    Mutate,
    /// The program database's crossover operator: two parents' modules to
    /// combine, included by `feedback.j2`.
    Crossover,
}

impl Template {
    /// Every template: the modules in [`ModuleKind::ALL`]'s order, then
    /// the others.
    pub fn all() -> Vec<Template> {
        ModuleKind::ALL
            .into_iter()
            .map(Template::Module)
            .chain([
                Template::System,
                Template::Feedback,
                Template::Refine,
                Template::RewardCritic,
                Template::Mutate,
                Template::Crossover,
            ])
            .collect()
    }

    /// Every template's name, as [`Template::all`] orders them.
    pub fn names() -> Vec<&'static str> {
        Template::all().into_iter().map(Template::name).collect()
    }

    /// The file's name without `.j2`.
    pub fn name(self) -> &'static str {
        match self {
            Template::Module(kind) => kind.name(),
            Template::System => "system",
            Template::Feedback => "feedback",
            Template::Refine => "refine",
            Template::RewardCritic => "reward_critic",
            Template::Mutate => "mutate",
            Template::Crossover => "crossover",
        }
    }

    /// The template named `name`, if serl renders one by that name.
    pub fn parse_name(name: &str) -> Option<Template> {
        Template::all().into_iter().find(|t| t.name() == name)
    }

    /// Whether every prompt directory must have it. The plan's and the
    /// reward critic's came later: a directory written before them still
    /// loads and checks, and asks for them only where a run uses them.
    pub fn required(self) -> bool {
        !matches!(
            self,
            Template::Module(ModuleKind::Plan)
                | Template::RewardCritic
                | Template::Mutate
                | Template::Crossover
        )
    }

    /// What it is for, in a few words (`serl prompts list`).
    pub fn role(self) -> &'static str {
        match self {
            Template::Module(_) => "designs the module",
            Template::System => "the task, included by every module template",
            Template::Feedback => "last round's results, included by every module template",
            Template::Refine => "high-level DEK: a new micro instruction",
            Template::RewardCritic => "the LLM reward critic in training",
            Template::Mutate => "[evolve.search]: change a parent's module",
            Template::Crossover => "[evolve.search]: combine two parents' modules",
        }
    }

    /// The contexts `serl prompts check` renders it with; the first is
    /// the one `serl prompts render` shows. A module's are its sample
    /// contexts without and with feedback, examples and a retry error;
    /// the included parts render with a module's, as they are rendered.
    pub fn sample_contexts(self) -> Vec<Value> {
        match self {
            Template::Module(kind) => vec![sample_context(kind, true), sample_context(kind, false)],
            Template::System | Template::Feedback | Template::Refine => vec![
                sample_context(ModuleKind::Reward, true),
                sample_context(ModuleKind::Reward, false),
            ],
            Template::RewardCritic => vec![critic_context()],
            Template::Mutate => vec![operator_context(ModuleKind::Reward, "mutate")],
            Template::Crossover => vec![operator_context(ModuleKind::Reward, "crossover")],
        }
    }
}

impl std::fmt::Display for Template {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that `{:<14}` lines up `serl prompts list`.
        f.pad(self.name())
    }
}

/// A review window as the reward critic's template receives it (the
/// critic in `serl-evolve` fills the same fields; docs/prompts.md lists
/// them).
fn critic_context() -> Value {
    json!({
        "update": 10,
        "terms": [{"term": "step_pa", "mean": 0.4, "std": 3.0, "repaired_share": 0.0},
                  {"term": "-(2 * remaining_inv)", "mean": -0.3, "std": 0.2, "repaired_share": 0.01}],
        "weights": [1.0, 1.0],
        "windows": [{"weights": [1.0, 1.0], "pa": -1.5}],
        "min_weight": 0.25,
        "max_weight": 4.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_kind_has_a_template_and_names_are_unique() {
        let names = Template::names();
        for kind in ModuleKind::ALL {
            assert!(names.contains(&kind.name()), "{kind}");
        }
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        for t in Template::all() {
            assert_eq!(Template::parse_name(t.name()), Some(t));
        }
        assert_eq!(Template::parse_name("nonsense"), None);
    }
}
