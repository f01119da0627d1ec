//! Filled-in module contexts, as the designer's prompts receive them:
//! what `serl prompts check` and `probe` render every template with.

use serde_json::{json, Value};
use serl_design::ModuleKind;

use crate::prompts::{CandidateFeedback, Example, Feedback, ModuleContext, Parent, TaskInfo};

/// A filled-in context for `kind`, with or without feedback, examples
/// and a retry error: what `serl prompts check` renders.
pub fn sample_context(kind: ModuleKind, full: bool) -> Value {
    let mut c = ModuleContext::new(
        kind,
        TaskInfo::default(),
        "beat TWAP robustly across stocks",
        "keep the design simple",
    );
    if full {
        c.examples = vec![Example {
            source: serl_design::DEFAULT_REWARD_PROGRAM.to_string(),
            score: 0.42,
            module: None,
        }];
        c.feedback = Some(Feedback {
            candidates: vec![CandidateFeedback {
                name: "c1".into(),
                score: 0.42,
                pa: 0.6,
                pa_std: 14.0,
                pa_dynamic: 0.3,
                wr: 0.55,
                glr: 1.1,
                afi: 0.001,
                illusory_gain: 0.3,
                repaired: 2,
            }],
            reward_stats: Some(json!({
                "mean": 0.1, "min": -3.0, "max": 2.0, "repaired": 0,
                "terms": [
                    {"term": "step_pa", "mean": 0.4, "std": 1.2, "repaired_share": 0.0},
                    {"term": "-(2 * remaining_inv^2 / steps)", "mean": -0.3, "std": 0.2, "repaired_share": 0.0},
                ],
                "trained_terms": [
                    {"term": "step_pa", "mean": 0.1, "std": 2.5, "repaired_share": 0.0},
                    {"term": "-(2 * remaining_inv^2 / steps)", "mean": -0.02, "std": 0.05, "repaired_share": 0.0},
                ],
            })),
            errors: vec![
                "reward module: line 1, column 3: unknown name `pa`; did you mean `step_pa`?"
                    .into(),
            ],
        });
        c.error = Some("invalid JSON at line 1 column 2".into());
        c.history =
            vec![json!({"instruction": "penalise inventory late in the day", "score": 0.42})];
    }
    c.to_value()
}

/// A `kind` context for `operator` (`mutate` or `crossover`) with real
/// parents (the default reward and the timing gain, with their results):
/// what `serl prompts check` renders the operator templates with.
pub fn operator_context(kind: ModuleKind, operator: &str) -> Value {
    let mut c: ModuleContext =
        ModuleContext::new(kind, TaskInfo::default(), "beat TWAP", "keep it simple");
    let sources = [
        serl_design::DEFAULT_REWARD_PROGRAM.to_string(),
        "twap_gain - 0.5 * abs(remaining_inv - time_left) / steps".to_string(),
    ];
    let count = if operator == "crossover" { 2 } else { 1 };
    c.operator = operator.to_string();
    c.parents = sources
        .iter()
        .take(count)
        .enumerate()
        .map(|(i, source)| Parent {
            key: format!("i0_c{i}"),
            source: if kind == ModuleKind::Reward {
                source.clone()
            } else {
                String::new()
            },
            score: 1.5 - i as f64,
            lower_bound: Some(0.4),
            pa: 2.0,
            pa_std: 12.0,
            wr: 0.55,
            afi: 0.08,
            pa_dynamic: 1.1,
            terms: vec![json!({"term": "step_pa", "mean": 0.4, "std": 1.2, "repaired_share": 0.0})],
            made_by: "fresh".into(),
            module: None,
        })
        .collect();
    c.to_value()
}
