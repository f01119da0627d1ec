//! The high-level DEK and the designer's feedback: what a round's results
//! tell the next round, and instructions the designer rewrites from their
//! history of scores.

use std::collections::{BTreeMap, HashMap};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serl_design::ModuleKind;
use serl_llm::prompts::{CandidateFeedback, Feedback, ModuleContext, TaskInfo};
use serl_llm::Designer;

use crate::config::EvolveConfig;
use crate::record::{CandidateResult, Operator};

/// Most characters a rewritten instruction may have; a longer one is
/// ignored.
const MAX_INSTRUCTION: usize = 600;

/// Rejection messages the feedback repeats.
const FEEDBACK_ERRORS: usize = 5;

/// The instruction the research direction is filed under in the logs.
pub(crate) const MACRO: &str = "macro";

/// The designer's instructions: the research direction (macro) and each
/// module's micro instruction, with each one's history of (instruction,
/// best score of its round), and the replays of the instruction cache.
#[derive(Debug, Clone)]
pub(crate) struct Instructions {
    pub micro: HashMap<ModuleKind, String>,
    /// Each instruction and the best score its round's designs reached
    /// (`None`: no design of the round was valid).
    pub history: HashMap<ModuleKind, Vec<(String, Option<f64>)>>,
    pub macro_instruction: String,
    pub macro_history: Vec<(String, Option<f64>)>,
    /// With the program database: the instruction each operator's prompt
    /// ends with (`mutate`, `crossover`), rewritten from its own history
    /// (the best score of the designs it made in each round).
    pub operators: BTreeMap<String, String>,
    pub operator_history: BTreeMap<String, Vec<(String, Option<f64>)>>,
    /// Every instruction the cache brought back, in order.
    pub replays: Vec<Replay>,
    rng: SmallRng,
}

/// One replay of the instruction cache: a past instruction that scored
/// best, used again instead of a rewrite.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Replay {
    /// The iteration it was replayed after, from 0.
    pub iteration: usize,
    /// The module's name, or `macro` for the research direction.
    pub instruction_of: String,
    pub instruction: String,
    /// The best score it led to.
    pub score: f64,
}

impl Instructions {
    /// The config's starting instructions.
    pub fn new(cfg: &EvolveConfig) -> Self {
        Instructions {
            micro: cfg
                .modules
                .iter()
                .map(|k| (*k, EvolveConfig::micro(*k).to_string()))
                .collect(),
            history: HashMap::new(),
            macro_instruction: cfg.macro_instruction.clone(),
            macro_history: Vec::new(),
            operators: match &cfg.search {
                Some(_) => [Operator::Mutate, Operator::Crossover]
                    .into_iter()
                    .map(|o| (o.name().to_string(), o.instruction().to_string()))
                    .collect(),
                None => BTreeMap::new(),
            },
            operator_history: BTreeMap::new(),
            replays: Vec::new(),
            rng: SmallRng::seed_from_u64(cfg.seed ^ 0x1A57_CAC4),
        }
    }

    /// Records each instruction with the round's best score (`None` when
    /// no design scored), then asks the designer to rewrite it from that
    /// history and the feedback. A language-model designer also rewrites
    /// the research direction, and with probability
    /// `cfg.instruction_replay` gets an instruction's best past version
    /// back instead of a rewrite (logged in `replays`). A designer that
    /// declines, or writes nothing or too much, leaves an instruction as
    /// it was.
    pub fn refine(&mut self, designer: &mut dyn Designer, round: &Refining) {
        let score = round.best_score;
        let llm = designer.is_llm();
        for &kind in &round.cfg.modules {
            let history = self.history.entry(kind).or_default();
            history.push((self.micro[&kind].clone(), score));
            let history = history.clone();
            if llm {
                if let Some(best) = self.replay(round, kind.name(), &history) {
                    self.micro.insert(kind, best);
                    continue;
                }
            }
            let ctx = self.context(round, kind, kind.name(), &history);
            if let Some(text) = rewrite(designer, &ctx) {
                self.micro.insert(kind, text);
            }
        }
        if llm {
            self.refine_operators(designer, round);
            self.macro_history
                .push((self.macro_instruction.clone(), score));
            let history = self.macro_history.clone();
            if let Some(best) = self.replay(round, MACRO, &history) {
                self.macro_instruction = best;
                return;
            }
            let ctx = self.context(round, round.cfg.modules[0], MACRO, &history);
            if let Some(text) = rewrite(designer, &ctx) {
                self.macro_instruction = text;
            }
        }
    }

    /// Each operator's instruction, judged by the best score of the
    /// designs it made in the round (replayed or rewritten as a module's).
    fn refine_operators(&mut self, designer: &mut dyn Designer, round: &Refining) {
        let names: Vec<String> = self.operators.keys().cloned().collect();
        for op in names {
            let score = round.operator_best.get(&op).copied().flatten();
            let history = self.operator_history.entry(op.clone()).or_default();
            history.push((self.operators[&op].clone(), score));
            let history = history.clone();
            if let Some(best) = self.replay(round, &op, &history) {
                self.operators.insert(op, best);
                continue;
            }
            let ctx = self.context(round, round.cfg.modules[0], &op, &history);
            if let Some(text) = rewrite(designer, &ctx) {
                self.operators.insert(op, text);
            }
        }
    }

    /// With probability `instruction_replay`, the best-scoring instruction
    /// of `history` (rounds without a valid design never count) when it is
    /// not the current one (the last), logged.
    fn replay(
        &mut self,
        round: &Refining,
        of: &str,
        history: &[(String, Option<f64>)],
    ) -> Option<String> {
        let p = round.cfg.instruction_replay;
        if p <= 0.0 || !self.rng.random_bool(p.min(1.0)) {
            return None;
        }
        let (best, score) = history
            .iter()
            .filter_map(|(i, s)| Some((i, (*s)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        if Some(best) == history.last().map(|h| &h.0) {
            return None;
        }
        tracing::info!("high-level DEK: replaying the {of} instruction that scored {score:.3}");
        self.replays.push(Replay {
            iteration: round.iteration,
            instruction_of: of.to_string(),
            instruction: best.clone(),
            score,
        });
        Some(best.clone())
    }

    /// The refine prompt's context: `module` is the module's name, or
    /// [`MACRO`] for the research direction.
    fn context(
        &self,
        round: &Refining,
        kind: ModuleKind,
        module: &str,
        history: &[(String, Option<f64>)],
    ) -> ModuleContext {
        let mut ctx = ModuleContext::new(
            kind,
            round.task.clone(),
            &self.macro_instruction,
            &self.micro[&kind],
        );
        ctx.module = module.to_string();
        ctx.history = history
            .iter()
            .map(|(i, s)| serde_json::json!({"instruction": i, "score": s}))
            .collect();
        ctx.feedback = Some(round.feedback.clone());
        ctx
    }

    /// What `instructions.json` holds: every instruction's history and the
    /// cache's replays.
    pub fn log(&self) -> serde_json::Value {
        let modules: HashMap<&str, &Vec<(String, Option<f64>)>> =
            self.history.iter().map(|(k, v)| (k.name(), v)).collect();
        serde_json::json!({
            "modules": modules,
            "macro": self.macro_history,
            "operators": self.operator_history,
            "replays": self.replays,
        })
    }
}

/// What a round of instruction rewriting reads.
pub(crate) struct Refining<'a> {
    pub cfg: &'a EvolveConfig,
    pub task: &'a TaskInfo,
    /// The round, from 0.
    pub iteration: usize,
    pub best_score: Option<f64>,
    /// The best score of the round's designs by the operator that made
    /// them (with the program database).
    pub operator_best: BTreeMap<String, Option<f64>>,
    pub feedback: &'a Feedback,
}

/// The designer's rewrite of an instruction, when it gives one of a
/// sensible length.
fn rewrite(designer: &mut dyn Designer, ctx: &ModuleContext) -> Option<String> {
    let r = designer.refine(ctx).ok()?;
    let text = r.text.trim();
    (!text.is_empty() && text.len() <= MAX_INSTRUCTION).then(|| text.to_string())
}

/// What iteration `j`'s results tell the designer: every scored candidate
/// of the round, the reward statistics of its best one on the smoke
/// episode, and the first rejection messages.
pub(crate) fn feedback(all: &[CandidateResult], j: usize) -> Feedback {
    let scored: Vec<&CandidateResult> = all
        .iter()
        .filter(|c| c.iteration == j && c.score.is_some())
        .collect();
    let best = scored
        .iter()
        .filter(|c| c.reward_smoke.is_some())
        .max_by(|a, b| {
            a.selection_score()
                .unwrap_or(f64::MIN)
                .total_cmp(&b.selection_score().unwrap_or(f64::MIN))
        });
    Feedback {
        candidates: scored
            .iter()
            .map(|c| {
                let v = c.validation.clone().unwrap_or_default();
                CandidateFeedback {
                    name: c.key.clone(),
                    score: c.selection_score().unwrap_or(0.0),
                    pa: v.pa,
                    pa_std: v.pa_std,
                    pa_dynamic: v.pa_dynamic,
                    wr: v.wr,
                    glr: v.glr,
                    afi: v.afi,
                    illusory_gain: v.illusory_gain,
                    repaired: c.repaired,
                }
            })
            .collect(),
        reward_stats: best.and_then(|c| c.reward_smoke.as_ref()).map(|s| {
            serde_json::json!({
                "mean": s.reward_mean,
                "min": s.reward_min,
                "max": s.reward_max,
                "repaired": s.repaired,
                "terms": s.terms,
                "trained_terms": best.and_then(|c| c.reward_terms.clone()),
            })
        }),
        errors: all
            .iter()
            .filter(|c| c.iteration == j)
            .flat_map(|c| c.modules.iter().flat_map(|m| m.errors.iter().cloned()))
            .take(FEEDBACK_ERRORS)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serl_design::SmokeReport;

    fn candidate(key: &str, iteration: usize, score: Option<f64>, mean: f64) -> CandidateResult {
        let mut c = CandidateResult::invalid(key.into(), iteration, 1.0);
        c.score = score;
        c.reward_smoke = Some(SmokeReport {
            steps: 13,
            reward_min: mean - 1.0,
            reward_max: mean + 1.0,
            reward_mean: mean,
            repaired: 0,
            features: Vec::new(),
            terms: vec![serl_design::TermStats {
                term: "-(2 * remaining_inv^2 / steps)".into(),
                mean: -0.3,
                std: 0.1,
                repaired_share: 0.0,
            }],
        });
        c.reward_terms = Some(vec![serl_design::TermStats {
            term: "step_pa".into(),
            mean: mean * 2.0,
            std: 1.0,
            repaired_share: 0.0,
        }]);
        c
    }

    #[test]
    fn feedback_reports_the_round_and_the_reward_statistics_of_its_best() {
        let all = vec![
            candidate("i0_c0", 0, Some(9.0), 5.0),
            candidate("i1_c0", 1, Some(1.0), 0.5),
            candidate("i1_c1", 1, Some(2.0), 0.7),
            candidate("i1_c2", 1, None, 9.9),
        ];
        let f = feedback(&all, 1);
        let names: Vec<&str> = f.candidates.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["i1_c0", "i1_c1"], "this round's scored candidates");
        let stats = f
            .reward_stats
            .expect("the smoke statistics reach the prompt");
        assert_eq!(stats["mean"], 0.7);
        assert_eq!(stats["max"], 1.7);
        assert_eq!(stats["terms"][0]["term"], "-(2 * remaining_inv^2 / steps)");
        assert_eq!(
            stats["trained_terms"][0]["mean"], 1.4,
            "the trained policy's terms on validation reach the prompt"
        );
    }

    /// Rewrites every instruction it is asked to (as `<module> (round
    /// <n>)`), unless told to decline; a language model or not.
    struct Rewriter {
        decline: bool,
        llm: bool,
    }

    impl Designer for Rewriter {
        fn name(&self) -> String {
            "rewriter".into()
        }
        fn is_llm(&self) -> bool {
            self.llm
        }
        fn propose(
            &mut self,
            _kind: ModuleKind,
            _ctx: &ModuleContext,
        ) -> Result<serl_llm::Reply, serl_llm::LlmError> {
            unreachable!("refining proposes nothing")
        }
        fn refine(&mut self, ctx: &ModuleContext) -> Result<serl_llm::Reply, serl_llm::LlmError> {
            if self.decline {
                return Err(serl_llm::LlmError::MissingKey("NO_KEY".into()));
            }
            Ok(serl_llm::Reply {
                text: format!("{} (round {})", ctx.module, ctx.history.len()),
                ..Default::default()
            })
        }
    }

    fn refine(
        ins: &mut Instructions,
        d: &mut Rewriter,
        cfg: &EvolveConfig,
        j: usize,
        best: Option<f64>,
    ) {
        let fb = feedback(&[], 0);
        let round = Refining {
            cfg,
            task: &TaskInfo::default(),
            iteration: j,
            best_score: best,
            operator_best: BTreeMap::from([("mutate".to_string(), best)]),
            feedback: &fb,
        };
        ins.refine(d, &round);
    }

    /// With the program database, each operator's instruction is judged by
    /// the designs it made and rewritten from its own history.
    #[test]
    fn operator_instructions_keep_their_own_history() {
        let cfg = EvolveConfig {
            search: Some(crate::database::SearchConfig::default()),
            instruction_replay: 0.0,
            ..EvolveConfig::default()
        };
        let mut ins = Instructions::new(&cfg);
        assert_eq!(ins.operators["mutate"], Operator::Mutate.instruction());
        let mut model = Rewriter {
            decline: false,
            llm: true,
        };
        refine(&mut ins, &mut model, &cfg, 0, Some(2.0));
        assert_eq!(
            ins.operator_history["mutate"],
            vec![(Operator::Mutate.instruction().to_string(), Some(2.0))]
        );
        assert_eq!(
            ins.operator_history["crossover"],
            vec![(Operator::Crossover.instruction().to_string(), None)],
            "a round in which crossover made nothing scores it none"
        );
        assert_eq!(ins.operators["mutate"], "mutate (round 1)");
        assert!(ins.log()["operators"]["crossover"].is_array());
        // Without the database there is nothing to rewrite.
        let plain = Instructions::new(&EvolveConfig::default());
        assert!(plain.operators.is_empty());
    }

    #[test]
    fn instructions_keep_their_history_and_take_the_rewrite() {
        let cfg = EvolveConfig::default();
        let mut ins = Instructions::new(&cfg);
        let first = ins.micro[&cfg.modules[0]].clone();
        let mut builtin = Rewriter {
            decline: false,
            llm: false,
        };
        refine(&mut ins, &mut builtin, &cfg, 0, Some(1.5));
        let kind = cfg.modules[0];
        assert_eq!(ins.history[&kind], vec![(first, Some(1.5))]);
        assert_eq!(ins.micro[&kind], format!("{} (round 1)", kind.name()));
        assert_eq!(
            ins.macro_instruction, cfg.macro_instruction,
            "only a language model rewrites the research direction"
        );
        let before = ins.micro.clone();
        builtin.decline = true;
        refine(&mut ins, &mut builtin, &cfg, 1, None);
        assert_eq!(
            ins.micro, before,
            "a declined rewrite keeps the instruction"
        );
        assert_eq!(
            ins.history[&kind][1].1, None,
            "a round without a valid design"
        );
    }

    #[test]
    fn a_language_model_rewrites_the_research_direction_and_the_cache_replays_the_best() {
        let mut cfg = EvolveConfig {
            instruction_replay: 0.0,
            ..Default::default()
        };
        let mut ins = Instructions::new(&cfg);
        let mut llm = Rewriter {
            decline: false,
            llm: true,
        };
        refine(&mut ins, &mut llm, &cfg, 0, Some(2.0));
        assert_eq!(ins.macro_instruction, "macro (round 1)");
        assert_eq!(
            ins.macro_history,
            vec![(cfg.macro_instruction.clone(), Some(2.0))]
        );
        refine(&mut ins, &mut llm, &cfg, 1, Some(1.0));
        assert_eq!(ins.macro_instruction, "macro (round 2)");
        assert!(ins.replays.is_empty());

        // Now always replay: the round-0 instructions scored best (2.0).
        cfg.instruction_replay = 1.0;
        refine(&mut ins, &mut llm, &cfg, 2, Some(0.5));
        let kind = cfg.modules[0];
        assert_eq!(ins.micro[&kind], EvolveConfig::micro(kind));
        assert_eq!(ins.macro_instruction, cfg.macro_instruction);
        assert_eq!(
            ins.replays.len(),
            cfg.modules.len() + 1,
            "{:?}",
            ins.replays
        );
        let last = ins.replays.last().unwrap();
        assert_eq!(
            (last.instruction_of.as_str(), last.score, last.iteration),
            (MACRO, 2.0, 2)
        );
        let log = ins.log();
        assert_eq!(log["replays"].as_array().unwrap().len(), ins.replays.len());
        assert_eq!(log["macro"][0][1], 2.0);

        // The best is already in use: nothing to replay.
        let n = ins.replays.len();
        refine(&mut ins, &mut llm, &cfg, 3, Some(5.0));
        assert_eq!(ins.replays.len(), n);
    }
}
