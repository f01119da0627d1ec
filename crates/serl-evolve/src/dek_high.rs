//! The high-level DEK and the designer's feedback: what a round's results
//! tell the next round, and instructions the designer rewrites from their
//! history of scores.

use std::collections::HashMap;

use serl_design::ModuleKind;
use serl_llm::prompts::{CandidateFeedback, Feedback, ModuleContext, TaskInfo};
use serl_llm::Designer;

use crate::candidate::CandidateResult;
use crate::config::EvolveConfig;

/// Most characters a rewritten instruction may have; a longer one is
/// ignored.
const MAX_INSTRUCTION: usize = 600;

/// Rejection messages the feedback repeats.
const FEEDBACK_ERRORS: usize = 5;

/// The designer's micro instruction for each module, and each one's
/// history of (instruction, best score of its round).
#[derive(Debug, Clone)]
pub(crate) struct Instructions {
    pub micro: HashMap<ModuleKind, String>,
    pub history: HashMap<ModuleKind, Vec<(String, f64)>>,
}

impl Instructions {
    /// The config's starting instruction for each designed module.
    pub fn new(cfg: &EvolveConfig) -> Self {
        Instructions {
            micro: cfg
                .modules
                .iter()
                .map(|k| (*k, EvolveConfig::micro(*k).to_string()))
                .collect(),
            history: HashMap::new(),
        }
    }

    /// Records each instruction with the round's best score (0 when no
    /// candidate scored), then asks the designer to rewrite it from that
    /// history and the feedback. A designer that declines, or writes
    /// nothing or too much, leaves the instruction as it was.
    pub fn refine(
        &mut self,
        designer: &mut dyn Designer,
        cfg: &EvolveConfig,
        task: &TaskInfo,
        best_round: Option<f64>,
        feedback: &Feedback,
    ) {
        for &kind in &cfg.modules {
            let score = best_round.unwrap_or(0.0);
            let history = self.history.entry(kind).or_default();
            history.push((self.micro[&kind].clone(), score));
            let mut ctx = ModuleContext::new(
                kind,
                task.clone(),
                &cfg.macro_instruction,
                &self.micro[&kind],
            );
            ctx.history = history
                .iter()
                .map(|(i, s)| serde_json::json!({"instruction": i, "score": s}))
                .collect();
            ctx.feedback = Some(feedback.clone());
            if let Ok(r) = designer.refine(&ctx) {
                let text = r.text.trim();
                if !text.is_empty() && text.len() <= MAX_INSTRUCTION {
                    self.micro.insert(kind, text.to_string());
                }
            }
        }
    }
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
            a.score
                .unwrap_or(f64::MIN)
                .total_cmp(&b.score.unwrap_or(f64::MIN))
        });
    Feedback {
        candidates: scored
            .iter()
            .map(|c| {
                let v = c.validation.clone().unwrap_or_default();
                CandidateFeedback {
                    name: c.key.clone(),
                    score: c.score.unwrap_or(0.0),
                    pa: v.pa,
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
    }

    /// Rewrites every instruction it is asked to, unless told to decline.
    struct Rewriter(bool);

    impl Designer for Rewriter {
        fn name(&self) -> String {
            "rewriter".into()
        }
        fn is_llm(&self) -> bool {
            false
        }
        fn propose(
            &mut self,
            _kind: ModuleKind,
            _ctx: &ModuleContext,
        ) -> Result<serl_llm::Reply, serl_llm::LlmError> {
            unreachable!("refining proposes nothing")
        }
        fn refine(&mut self, ctx: &ModuleContext) -> Result<serl_llm::Reply, serl_llm::LlmError> {
            if self.0 {
                return Err(serl_llm::LlmError::MissingKey("NO_KEY".into()));
            }
            Ok(serl_llm::Reply {
                text: format!("{} (round {})", ctx.module, ctx.history.len()),
                ..Default::default()
            })
        }
    }

    #[test]
    fn instructions_keep_their_history_and_take_the_rewrite() {
        let cfg = EvolveConfig::default();
        let mut ins = Instructions::new(&cfg);
        let first = ins.micro[&cfg.modules[0]].clone();
        let fb = feedback(&[], 0);
        ins.refine(
            &mut Rewriter(false),
            &cfg,
            &TaskInfo::default(),
            Some(1.5),
            &fb,
        );
        let kind = cfg.modules[0];
        assert_eq!(ins.history[&kind], vec![(first, 1.5)]);
        assert_eq!(ins.micro[&kind], format!("{} (round 1)", kind.name()));
        let before = ins.micro.clone();
        ins.refine(&mut Rewriter(true), &cfg, &TaskInfo::default(), None, &fb);
        assert_eq!(
            ins.micro, before,
            "a declined rewrite keeps the instruction"
        );
        assert_eq!(ins.history[&kind][1].1, 0.0, "no score counts as 0");
    }
}
