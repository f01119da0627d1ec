//! The design stage: the designer writes each module of a candidate,
//! every reply validated and smoke-tested, with the error fed back on a
//! retry.

use std::collections::HashMap;
use std::sync::Mutex;

use serl_design::{smoke_test, Design, Module, ModuleKind, SmokeReport, StateModule};
use serl_env::{EnvConfig, MarketData, ParentOrder};
use serl_llm::prompts::{Feedback, ModuleContext, Prompts, TaskInfo};
use serl_llm::{generate, Designer};

use crate::candidate::{top_examples, Designed};

use crate::config::EvolveConfig;
use crate::error::EvolveError;
use crate::operators::{CandidatePlan, ModulePlan};
use crate::record::{CandidateResult, ModuleRecord};

/// What designing a round's candidates reads: the config, the task, the
/// current instructions, the last round's feedback and every result so far.
pub(crate) struct Round<'a> {
    pub cfg: &'a EvolveConfig,
    pub task: &'a TaskInfo,
    pub micro: &'a HashMap<ModuleKind, String>,
    /// Each operator's instruction (`mutate`, `crossover`), as the
    /// high-level DEK last left it.
    pub operator_instructions: &'a std::collections::BTreeMap<String, String>,
    /// The research direction, as the high-level DEK last left it.
    pub macro_instruction: &'a str,
    pub feedback: Option<&'a Feedback>,
    pub history: &'a [CandidateResult],
    pub prompts: Option<&'a Prompts>,
    pub smoke: SmokeBench<'a>,
}

impl Round<'_> {
    /// The context the designer sees for a `kind` module.
    pub fn context(&self, kind: ModuleKind) -> ModuleContext {
        let mut ctx = ModuleContext::new(
            kind,
            self.task.clone(),
            self.macro_instruction,
            &self.micro[&kind],
        );
        ctx.examples = top_examples(self.history, kind, self.cfg.top_k);
        ctx.feedback = self.feedback.cloned();
        ctx
    }

    /// The prompt a module's record keeps: the one sent (a constrained
    /// one says so); a designer that reads the context directly sent none,
    /// and its record shows the prompt a model would have had (the pairs
    /// that fine-tune a model on its designs are made from it).
    fn recorded_prompt(&self, kind: ModuleKind, ctx: &ModuleContext, sent: &str) -> String {
        match self.prompts {
            Some(p) if sent.is_empty() => {
                p.render(kind.name(), &ctx.to_value()).unwrap_or_default()
            }
            _ => sent.to_string(),
        }
    }

    /// Designs one candidate, module by module. A designer that cannot
    /// answer at all stops the run; a module it fails to write leaves the
    /// candidate invalid.
    /// `plan` (from the program database) says which modules come from
    /// parents as they are and which the designer writes under which
    /// operator; without one, every module is written afresh.
    pub fn design(
        &self,
        designer: &mut dyn Designer,
        key: String,
        seed: u64,
        plan: Option<&CandidatePlan>,
    ) -> Result<Designed, EvolveError> {
        let mut modules = Vec::new();
        let mut parts: HashMap<ModuleKind, Module> = HashMap::new();
        let (mut prompt_tokens, mut completion_tokens) = (0, 0);
        let reward_smoke: Mutex<Option<SmokeReport>> = Mutex::new(None);
        for &kind in &self.cfg.modules {
            let mut ctx = self.context(kind);
            match plan.and_then(|p| p.modules.get(&kind)) {
                Some(ModulePlan::Inherit { module, from }) => {
                    modules.push(ModuleRecord::inherited(kind, module, from));
                    parts.insert(kind, module.clone());
                    continue;
                }
                Some(ModulePlan::Write { operator, parents }) => {
                    ctx.operator = operator.name().to_string();
                    ctx.parents = parents.clone();
                    ctx.operator_instruction = self
                        .operator_instructions
                        .get(operator.name())
                        .cloned()
                        .unwrap_or_default();
                }
                None => {}
            }
            // The modules so far, the baseline's elsewhere: a network must
            // fit the observation they make.
            let so_far = assemble(&parts, 0).unwrap_or_else(Design::baseline);
            let check = |m: &Module| -> Result<(), String> {
                if let Module::Architecture(spec) = m {
                    let mut d = so_far.clone();
                    d.architecture = spec.clone();
                    network_fits(&self.cfg.train, &d)?;
                }
                let report = self.smoke.check(m)?;
                if matches!(m, Module::Reward(_)) {
                    *reward_smoke.lock().unwrap_or_else(|p| p.into_inner()) = report;
                }
                Ok(())
            };
            let g = generate(designer, kind, &ctx, self.cfg.max_attempts, &check);
            if let Some(f) = g.fatal {
                return Err(EvolveError::Designer(f));
            }
            prompt_tokens += g.prompt_tokens;
            completion_tokens += g.completion_tokens;
            modules.push(ModuleRecord {
                kind,
                text: g.module.as_ref().map(Module::text),
                attempts: g.attempts.len(),
                errors: g.attempts.iter().filter_map(|a| a.error.clone()).collect(),
                prompt: self.recorded_prompt(kind, &ctx, &g.prompt),
                replies: g.attempts.iter().map(|a| a.reply.clone()).collect(),
                inherited_from: None,
            });
            if let Some(m) = g.module {
                parts.insert(kind, m);
            }
        }
        let mut design = assemble(&parts, self.cfg.modules.len());
        // A module written after the network (the messages) can still
        // widen the observation past what the network may take.
        if let Some(e) = design
            .as_ref()
            .and_then(|d| network_fits(&self.cfg.train, d).err())
        {
            // The network's record carries it where the network was
            // designed or inherited, else the last module's.
            let at = modules
                .iter()
                .rposition(|m| m.kind == ModuleKind::Architecture)
                .or(modules.len().checked_sub(1));
            if let Some(m) = at.and_then(|i| modules.get_mut(i)) {
                m.errors.push(e);
            }
            design = None;
        }
        Ok(Designed {
            seed,
            key,
            design,
            success_rate: success_rate(&modules),
            modules,
            prompt_tokens,
            completion_tokens,
            reward_smoke: reward_smoke.into_inner().unwrap_or_else(|p| p.into_inner()),
            lineage: plan.map(|p| p.lineage.clone()),
        })
    }
}

/// Whether `d`'s network takes the observation `d` trains on under `base`
/// (the size limit counts the designed features and heard messages).
fn network_fits(base: &serl_train::TrainConfig, d: &Design) -> Result<(), String> {
    let train = base.with_design(d);
    let width = train.obs_dim();
    train
        .network
        .validate(width)
        .map(|_| ())
        .map_err(|e| format!("architecture over the design's {width}-column observation: {e}"))
}

/// Mean over modules of 1/attempts (0 for a module that failed).
fn success_rate(modules: &[ModuleRecord]) -> f64 {
    modules
        .iter()
        .map(|m| {
            if m.text.is_some() {
                1.0 / m.attempts.max(1) as f64
            } else {
                0.0
            }
        })
        .sum::<f64>()
        / modules.len().max(1) as f64
}

/// Where smoke tests play: one real training order.
#[derive(Clone, Copy)]
pub(crate) struct SmokeBench<'a> {
    pub market: &'a MarketData,
    pub env_cfg: &'a EnvConfig,
    pub order: Option<&'a ParentOrder>,
    /// Whether the task's agent places its orders (its features may read
    /// the resting order's queue).
    pub placing: bool,
    /// Whether a design has a plan module (configured or designed): without
    /// one a reward of `plan_gap` or `subgoal_hit` alone is 0 throughout.
    pub plan: bool,
}

impl SmokeBench<'_> {
    /// Plays a reward or state module on the smoke episode (a state module
    /// with the default reward, a reward without designed features); other
    /// modules pass. The report is `None` for those.
    fn check(&self, m: &Module) -> Result<Option<SmokeReport>, String> {
        if let Module::State(s) = m {
            s.check_task(self.placing).map_err(|e| e.message)?;
        }
        if let Module::Reward(r) = m {
            r.check_reads_state_in(self.plan).map_err(|e| e.message)?;
        }
        let Some(o) = self.order else { return Ok(None) };
        let (reward, state) = match m {
            Module::Reward(r) => (r.clone(), StateModule::default()),
            Module::State(s) => (Design::baseline().reward, s.clone()),
            _ => return Ok(None),
        };
        let view = self
            .market
            .get(&o.symbol, o.date)
            .ok_or("no session for the smoke order")?;
        smoke_test(&reward, &state, view, o, self.env_cfg, self.placing)
            .map(Some)
            .map_err(|e| format!("smoke test: {e}"))
    }
}

/// A design from the generated modules; modules not designed keep the
/// baseline's. `None` when any designed module failed.
pub(crate) fn assemble(parts: &HashMap<ModuleKind, Module>, wanted: usize) -> Option<Design> {
    if parts.len() < wanted {
        return None;
    }
    let mut d = Design::baseline();
    for m in parts.values() {
        match m {
            Module::Reward(r) => d.reward = r.clone(),
            Module::State(s) => d.state = s.clone(),
            Module::Architecture(a) => d.architecture = a.clone(),
            Module::Imagination(i) => d.imagination = i.clone(),
            Module::Profiling(p) => d.profiling = Some(p.clone()),
            Module::Communication(c) => d.communication = Some(c.clone()),
            Module::Plan(p) => d.plan = Some(p.clone()),
        }
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(text: bool, attempts: usize) -> ModuleRecord {
        ModuleRecord {
            kind: ModuleKind::Reward,
            text: text.then(|| "step_pa".into()),
            attempts,
            errors: Vec::new(),
            prompt: String::new(),
            replies: Vec::new(),
            inherited_from: None,
        }
    }

    #[test]
    fn a_network_must_fit_the_observation_its_design_makes() {
        let wide = |width: usize| -> Module {
            let spec = format!(
                r#"{{"window": 1, "blocks": [{{"kind": "dense", "width": {width}, "activation": "tanh"}}, {{"kind": "dense", "width": 1024, "activation": "tanh"}}]}}"#
            );
            Module::parse(ModuleKind::Architecture, &spec).unwrap()
        };
        let state = Module::parse(
            ModuleKind::State,
            &format!(
                r#"{{"features": [{}]}}"#,
                (0..32)
                    .map(|k| format!(r#"{{"name": "f{k}", "program": "volume * {k}"}}"#))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .unwrap();
        // 1,850 × (29 + 1) + 1,850 × 1,024 + 1,024 weights and biases fit
        // the bare observation (the module's own check), but 32 designed
        // features add 1,850 × 32 and pass the 2 M limit.
        let parts = |with_state: bool| {
            let mut p = HashMap::from([(ModuleKind::Architecture, wide(1850))]);
            if with_state {
                p.insert(ModuleKind::State, state.clone());
            }
            assemble(&p, 0).unwrap()
        };
        let base = serl_train::TrainConfig::default();
        network_fits(&base, &parts(false)).unwrap();
        let e = network_fits(&base, &parts(true)).unwrap_err();
        assert!(
            e.starts_with("architecture over the design's 61-column observation: "),
            "{e}"
        );
        assert!(e.contains("at most 2000000"), "{e}");
    }

    #[test]
    fn the_success_rate_charges_retries_and_failures() {
        assert_eq!(success_rate(&[record(true, 1), record(true, 2)]), 0.75);
        assert_eq!(success_rate(&[record(true, 1), record(false, 3)]), 0.5);
    }

    #[test]
    fn a_design_needs_every_wanted_module_and_keeps_the_baseline_elsewhere() {
        let reward = Module::parse(ModuleKind::Reward, "twap_gain").unwrap();
        let parts = HashMap::from([(ModuleKind::Reward, reward)]);
        assert!(assemble(&parts, 2).is_none(), "one module failed");
        let d = assemble(&parts, 1).unwrap();
        assert_eq!(d.reward.source(), "twap_gain");
        assert_eq!(d.architecture, Design::baseline().architecture);
    }
}
