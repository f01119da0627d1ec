//! Candidates: what the run directory keeps of each, what kind each is,
//! and which are the best.

use serde::{Deserialize, Serialize};
use serl_design::{Design, Module, ModuleKind, SmokeReport};
use serl_llm::prompts::Example;

/// Validation metrics of a trained candidate.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Validation {
    /// Mean PA, bps, in the static replay.
    pub pa: f64,
    /// Its standard deviation over orders.
    pub pa_std: f64,
    /// Win rate: share of orders with positive PA.
    pub wr: f64,
    /// Gain-loss ratio.
    pub glr: f64,
    /// Average fill incompleteness: share of the order left unfilled.
    pub afi: f64,
    /// Static minus dynamic PA on the dynamic subset.
    pub illusory_gain: f64,
    /// Mean PA, bps, in the dynamic market.
    pub pa_dynamic: f64,
}

/// One module's generation, as recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModuleRecord {
    /// Which module.
    pub kind: ModuleKind,
    /// The accepted module's text; `None` when every attempt failed.
    pub text: Option<String>,
    /// Attempts made.
    pub attempts: usize,
    /// Why each rejected attempt was rejected.
    pub errors: Vec<String>,
    /// The rendered prompt (for the fine-tuning dataset).
    pub prompt: String,
    /// The designer's replies, in order.
    pub replies: Vec<String>,
}

/// A candidate as the run directory keeps it (`candidates/<key>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CandidateResult {
    /// Its name; [`CandidateKind::of_key`] reads what kind it is.
    pub key: String,
    /// The iteration it belongs to.
    pub iteration: usize,
    /// The design; `None` when a module failed.
    pub design: Option<Design>,
    /// How each module was generated.
    pub modules: Vec<ModuleRecord>,
    /// Mean over modules of 1/attempts (0 when a module failed).
    pub success_rate: f64,
    /// Its validation metrics; `None` for invalid designs.
    pub validation: Option<Validation>,
    /// PA × success rate (the paper's score); `None` for invalid designs.
    pub score: Option<f64>,
    /// NaN, ±∞ and division-by-zero values its reward repaired in training.
    pub repaired: u64,
    /// Seconds its training took.
    pub train_secs: f64,
    /// Where they went (not stored: a result's file holds no timings).
    #[serde(skip)]
    pub train_profile: serl_train::TrainProfile,
    /// Tokens the designer read for it.
    pub prompt_tokens: u64,
    /// Tokens the designer wrote for it.
    pub completion_tokens: u64,
    /// The reward's statistics on the smoke episode, fed back to the
    /// designer with the round's results.
    #[serde(default)]
    pub reward_smoke: Option<SmokeReport>,
    /// Each term of its reward on the trained policy's static validation
    /// episodes, fed back to the designer with the round's results.
    #[serde(default)]
    pub reward_terms: Option<Vec<serl_design::TermStats>>,
    /// What the pre-screen said of it (`[evolve.budget.prescreen]`): a
    /// design it stopped has no score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prescreen: Option<crate::prescreen::Screened>,
}

impl CandidateResult {
    /// An invalid candidate: a module failed, nothing was trained.
    pub(crate) fn invalid(key: String, iteration: usize, success_rate: f64) -> Self {
        CandidateResult {
            key,
            iteration,
            design: None,
            modules: Vec::new(),
            success_rate,
            validation: None,
            score: None,
            repaired: 0,
            train_secs: 0.0,
            train_profile: Default::default(),
            prompt_tokens: 0,
            completion_tokens: 0,
            reward_smoke: None,
            reward_terms: None,
            prescreen: None,
        }
    }

    /// What kind of candidate it is.
    pub fn kind(&self) -> CandidateKind {
        CandidateKind::of_key(&self.key)
    }
}

/// Where a candidate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CandidateKind {
    /// Designed by the designer (`i<iteration>_c<k>`).
    Designed,
    /// A low-level DEK trial: the best design with tuned constants
    /// (`ll<iteration>_g<generation>_m<member>`).
    LowLevel,
    /// Plain PPO with the default modules (`baseline`).
    Baseline,
}

impl CandidateKind {
    const LOW_LEVEL_PREFIX: &'static str = "ll";
    const BASELINE_KEY: &'static str = "baseline";

    /// The key of designed candidate `k` of iteration `j`.
    pub fn designed_key(j: usize, k: usize) -> String {
        format!("i{j}_c{k}")
    }

    /// The key of member `m` of generation `g` of iteration `j`'s ES.
    pub fn low_level_key(j: usize, g: usize, m: usize) -> String {
        format!("{}{j}_g{g}_m{m}", Self::LOW_LEVEL_PREFIX)
    }

    /// The baseline's key.
    pub fn baseline_key() -> String {
        Self::BASELINE_KEY.into()
    }

    /// The kind a key names.
    pub fn of_key(key: &str) -> Self {
        if key == Self::BASELINE_KEY {
            CandidateKind::Baseline
        } else if key.starts_with(Self::LOW_LEVEL_PREFIX) {
            CandidateKind::LowLevel
        } else {
            CandidateKind::Designed
        }
    }
}

/// The best-scoring valid candidate.
pub(crate) fn best_of(all: &[CandidateResult]) -> Option<&CandidateResult> {
    all.iter().filter(|c| c.score.is_some()).max_by(|a, b| {
        a.score
            .unwrap_or(f64::MIN)
            .total_cmp(&b.score.unwrap_or(f64::MIN))
    })
}

fn module_text(d: &Design, kind: ModuleKind) -> Option<String> {
    let m = match kind {
        ModuleKind::Reward => Module::Reward(d.reward.clone()),
        ModuleKind::State => Module::State(d.state.clone()),
        ModuleKind::Architecture => Module::Architecture(d.architecture.clone()),
        ModuleKind::Imagination => Module::Imagination(d.imagination.clone()),
        ModuleKind::Profiling => Module::Profiling(d.profiling.clone()?),
        ModuleKind::Communication => Module::Communication(d.communication.clone()?),
        ModuleKind::Plan => Module::Plan(d.plan.clone()?),
    };
    Some(m.text())
}

/// The `k` best distinct `kind` modules so far, for the prompt's examples.
pub(crate) fn top_examples(all: &[CandidateResult], kind: ModuleKind, k: usize) -> Vec<Example> {
    let mut scored: Vec<(&CandidateResult, f64)> =
        all.iter().filter_map(|c| c.score.map(|s| (c, s))).collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    let mut seen = std::collections::HashSet::new();
    scored
        .into_iter()
        .filter_map(|(c, s)| {
            let text = module_text(c.design.as_ref()?, kind)?;
            seen.insert(text.clone()).then_some(Example {
                source: text,
                score: s,
            })
        })
        .take(k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_kind() {
        assert_eq!(
            CandidateKind::of_key(&CandidateKind::designed_key(2, 1)),
            CandidateKind::Designed
        );
        assert_eq!(
            CandidateKind::of_key(&CandidateKind::low_level_key(1, 0, 3)),
            CandidateKind::LowLevel
        );
        assert_eq!(
            CandidateKind::of_key(&CandidateKind::baseline_key()),
            CandidateKind::Baseline
        );
    }

    #[test]
    fn the_best_is_the_highest_score_and_examples_are_distinct() {
        let scored = |key: &str, score: Option<f64>, program: &str| {
            let mut c = CandidateResult::invalid(key.into(), 0, 1.0);
            c.score = score;
            let mut d = Design::baseline();
            d.reward = serl_design::RewardModule::compile(program).unwrap();
            c.design = Some(d);
            c
        };
        let all = vec![
            scored("i0_c0", Some(1.0), "step_pa"),
            scored("i0_c1", Some(3.0), "step_pa"),
            scored("i0_c2", None, "done"),
            scored("i0_c3", Some(2.0), "twap_gain"),
        ];
        assert_eq!(best_of(&all).unwrap().key, "i0_c1");
        let ex = top_examples(&all, ModuleKind::Reward, 3);
        let sources: Vec<&str> = ex.iter().map(|e| e.source.as_str()).collect();
        assert_eq!(sources, ["step_pa", "twap_gain"], "best first, each once");
    }
}
