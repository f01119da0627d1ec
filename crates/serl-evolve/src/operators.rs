//! What each operator asks of the designer, module by module: `fresh`
//! and `builtin` write every module; `mutate` rewrites one module of its
//! parent and keeps the others; `crossover` takes each module from one
//! parent or the other and has the designer reconcile one in which they
//! differ. The rewritten module's prompt shows the parents' text, scores
//! and validation breakdown (`prompts/mutate.j2`, `prompts/crossover.j2`).

use std::collections::HashMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serl_design::{Module, ModuleKind};
use serl_llm::prompts::Parent;

use crate::candidate::{module_of, module_text};

use crate::database::Choice;
use crate::record::{CandidateResult, Lineage, Operator};

/// How one module of a candidate comes about.
#[derive(Debug, Clone)]
pub(crate) enum ModulePlan {
    /// Taken as it is from parent `from`.
    Inherit { module: Module, from: String },
    /// Written by the designer under `operator` from `parents` (none:
    /// afresh).
    Write {
        operator: Operator,
        parents: Vec<Parent>,
    },
}

/// A candidate as the database planned it: its lineage and each module's
/// plan (a module it does not name is written afresh).
#[derive(Debug, Clone)]
pub(crate) struct CandidatePlan {
    pub lineage: Lineage,
    pub modules: HashMap<ModuleKind, ModulePlan>,
}

impl CandidatePlan {
    /// Whether the builtin search writes it (instead of the run's
    /// designer).
    pub fn builtin(&self) -> bool {
        self.lineage.operator == Operator::Builtin
    }
}

/// `c`'s `kind` module as a parent shown to the designer.
pub(crate) fn parent_view(c: &CandidateResult, kind: ModuleKind) -> Option<Parent> {
    let module = module_of(c.design.as_ref()?, kind)?;
    let v = c.validation.clone().unwrap_or_default();
    let terms = match kind {
        ModuleKind::Reward => c
            .reward_terms
            .iter()
            .flatten()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect(),
        _ => Vec::new(),
    };
    Some(Parent {
        key: c.key.clone(),
        source: module.text(),
        module: Some(module),
        score: c.selection_score()?,
        lower_bound: c.paired.as_ref().map(|p| p.lower),
        pa: v.pa,
        pa_std: v.pa_std,
        wr: v.wr,
        afi: v.afi,
        pa_dynamic: v.pa_dynamic,
        terms,
        made_by: c
            .lineage
            .as_ref()
            .map_or("fresh", |l| l.operator.name())
            .to_string(),
    })
}

/// The plan for `choice` over `modules`, its parents read from `all`;
/// the module a mutation or crossover rewrites is drawn with `seed`.
pub(crate) fn plan(
    choice: &Choice,
    modules: &[ModuleKind],
    all: &[CandidateResult],
    seed: u64,
) -> CandidatePlan {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0B5E_55ED);
    let find = |key: &String| all.iter().find(|c| &c.key == key);
    let parents: Vec<&CandidateResult> = choice.parents.iter().filter_map(find).collect();
    let mut lineage = Lineage {
        operator: choice.operator,
        parents: choice.parents.clone(),
        island: choice.island,
        module: None,
    };
    let mut plans = HashMap::new();
    match (choice.operator, parents.as_slice()) {
        (Operator::Mutate, [p, ..]) => {
            let rewrite = modules[rng.random_range(0..modules.len())];
            lineage.module = Some(rewrite);
            for &kind in modules {
                let plan = if kind == rewrite {
                    write(Operator::Mutate, &[p], kind)
                } else {
                    inherit(p, kind)
                };
                plans.insert(kind, plan);
            }
        }
        (Operator::Crossover, [a, b, ..]) => {
            let differ: Vec<ModuleKind> = modules
                .iter()
                .copied()
                .filter(|&k| text(a, k) != text(b, k))
                .collect();
            let pool = if differ.is_empty() { modules } else { &differ };
            let rewrite = pool[rng.random_range(0..pool.len())];
            lineage.module = Some(rewrite);
            for &kind in modules {
                let plan = if kind == rewrite {
                    write(Operator::Crossover, &[a, b], kind)
                } else if rng.random_bool(0.5) {
                    inherit(a, kind)
                } else {
                    inherit(b, kind)
                };
                plans.insert(kind, plan);
            }
        }
        (op, _) => {
            // Fresh and builtin write every module with no parent; an
            // operator left without its parents writes afresh too.
            lineage.parents.clear();
            if op != Operator::Builtin {
                lineage.operator = Operator::Fresh;
            }
        }
    }
    CandidatePlan {
        lineage,
        modules: plans,
    }
}

fn text(c: &CandidateResult, kind: ModuleKind) -> Option<String> {
    module_text(c.design.as_ref()?, kind)
}

/// `kind` from parent `p` as it is, or written afresh where `p` has none.
fn inherit(p: &CandidateResult, kind: ModuleKind) -> ModulePlan {
    match p.design.as_ref().and_then(|d| module_of(d, kind)) {
        Some(module) => ModulePlan::Inherit {
            module,
            from: p.key.clone(),
        },
        None => ModulePlan::Write {
            operator: Operator::Fresh,
            parents: Vec::new(),
        },
    }
}

/// `kind` rewritten by `operator` from `parents`' versions of it.
fn write(operator: Operator, parents: &[&CandidateResult], kind: ModuleKind) -> ModulePlan {
    let views: Vec<Parent> = parents
        .iter()
        .filter_map(|p| parent_view(p, kind))
        .collect();
    if views.len() < parents.len() {
        // A parent without this module (a plan the other lacks): afresh.
        return ModulePlan::Write {
            operator: Operator::Fresh,
            parents: Vec::new(),
        };
    }
    ModulePlan::Write {
        operator,
        parents: views,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Validation;
    use serl_design::{Design, RewardModule};

    fn scored(key: &str, reward: &str) -> CandidateResult {
        let mut c = CandidateResult::invalid(key.into(), 0, 1.0);
        let mut d = Design::baseline();
        d.reward = RewardModule::compile(reward).unwrap();
        c.design = Some(d);
        c.score = Some(2.5);
        c.validation = Some(Validation {
            pa: 3.0,
            afi: 0.1,
            ..Validation::default()
        });
        c
    }

    #[test]
    fn a_mutation_rewrites_one_module_and_keeps_the_parents_others() {
        let all = vec![scored("p", "step_pa - 2 * remaining_inv")];
        let choice = Choice {
            island: 0,
            operator: Operator::Mutate,
            parents: vec!["p".into()],
        };
        let modules = [ModuleKind::Reward, ModuleKind::State];
        for seed in 0..8 {
            let plan = plan(&choice, &modules, &all, seed);
            let rewritten = plan.lineage.module.unwrap();
            for kind in modules {
                match (&plan.modules[&kind], kind == rewritten) {
                    (ModulePlan::Write { operator, parents }, true) => {
                        assert_eq!(*operator, Operator::Mutate);
                        assert_eq!(parents[0].key, "p");
                        assert_eq!(parents[0].score, 2.5);
                        assert_eq!(parents[0].afi, 0.1);
                        if kind == ModuleKind::Reward {
                            assert_eq!(parents[0].source, "step_pa - 2 * remaining_inv");
                        }
                    }
                    (ModulePlan::Inherit { from, .. }, false) => assert_eq!(from, "p"),
                    (p, _) => panic!("{kind:?} of seed {seed}: {p:?}"),
                }
            }
        }
    }

    #[test]
    fn a_crossover_reconciles_a_module_in_which_the_parents_differ() {
        let all = vec![scored("a", "step_pa"), scored("b", "twap_gain")];
        let choice = Choice {
            island: 1,
            operator: Operator::Crossover,
            parents: vec!["a".into(), "b".into()],
        };
        let modules = [
            ModuleKind::Reward,
            ModuleKind::State,
            ModuleKind::Architecture,
        ];
        let plan = plan(&choice, &modules, &all, 3);
        assert_eq!(
            plan.lineage.module,
            Some(ModuleKind::Reward),
            "the only difference"
        );
        let ModulePlan::Write { operator, parents } = &plan.modules[&ModuleKind::Reward] else {
            panic!("the reward is written");
        };
        assert_eq!(*operator, Operator::Crossover);
        let sources: Vec<&str> = parents.iter().map(|p| p.source.as_str()).collect();
        assert_eq!(sources, ["step_pa", "twap_gain"]);
        assert_eq!(plan.lineage.island, 1);
    }

    #[test]
    fn fresh_and_builtin_write_every_module_without_parents() {
        for operator in [Operator::Fresh, Operator::Builtin] {
            let choice = Choice {
                island: 0,
                operator,
                parents: Vec::new(),
            };
            let plan = plan(&choice, &[ModuleKind::Reward], &[], 1);
            assert!(plan.modules.is_empty());
            assert_eq!(plan.builtin(), operator == Operator::Builtin);
        }
    }
}
