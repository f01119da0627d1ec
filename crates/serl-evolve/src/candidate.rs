//! Candidates: the states each passes through, what the run directory
//! keeps of each, what kind each is, and which are the best.
//!
//! A candidate is [`Designed`] (the designer's modules, valid or not),
//! then a [`ScoreJob`] (what training and scoring it needs, nothing
//! more, so that it runs here or as a cluster task alike), then
//! [`Scored`] (the job's result, from `score.rs`), and at last
//! recorded: a [`CandidateResult`] in `candidates/<key>.json`, which a
//! resumed run loads instead of designing and scoring it again.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serl_design::{Design, Module, ModuleKind, SmokeReport};
use serl_llm::prompts::Example;

use crate::database::Lineage;
use crate::error::{read_json, write_json, EvolveError};
use crate::paired::{DayPa, PairedScore, StockDayPa};
use crate::score::candidate_score;

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
    /// Each validation day's mean PA in the static replay, bps, for the
    /// paired score against plain PPO (`[evolve.search]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<DayPa>,
    /// Each validation stock-day's mean PA in the static replay, bps: the
    /// rows of the run's evidence file (`evidence.parquet`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stock_days: Vec<StockDayPa>,
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
    /// The parent it was taken from as it is (a mutation or crossover of
    /// the program database), with no attempt of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inherited_from: Option<String>,
}

impl ModuleRecord {
    /// `module` taken as it is from parent `from`: one attempt, accepted.
    pub(crate) fn inherited(kind: ModuleKind, module: &Module, from: &str) -> Self {
        ModuleRecord {
            kind,
            text: Some(module.text()),
            attempts: 1,
            errors: Vec::new(),
            prompt: String::new(),
            replies: Vec::new(),
            inherited_from: Some(from.to_string()),
        }
    }
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
    pub prescreen: Option<Screened>,
    /// Its daily edge over plain PPO on the validation days, where the run
    /// searches with a program database (`[evolve.search]`): what the
    /// search ranks by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired: Option<PairedScore>,
    /// Where it came from in the program database: the operator, its
    /// parents and its island (`[evolve.search]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lineage: Option<Lineage>,
    /// The fold it was trained and scored on, with its days
    /// (`[evolve.select] folds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fold: Option<crate::fold::FoldRecord>,
}

/// What the pre-screen (`[evolve.budget.prescreen]`) said of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Screened {
    /// Its validation PA after the short training, bps.
    pub pa: f64,
    /// Plain PPO's on the same short run, bps.
    pub plain_pa: f64,
    /// Whether it went on to its full training.
    pub passed: bool,
    /// Seconds the short training took.
    pub secs: f64,
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
            paired: None,
            lineage: None,
            fold: None,
        }
    }

    /// What selection ranks it by: the lower bound of its daily edge over
    /// plain PPO where the run pairs days (`[evolve.search]`), else its
    /// score; either charged for the designer's retries
    /// ([`candidate_score`]). `None` for an unscored candidate.
    pub fn selection_score(&self) -> Option<f64> {
        self.score?;
        match &self.paired {
            Some(p) => Some(candidate_score(p.lower, self.success_rate)),
            None => self.score,
        }
    }

    /// What kind of candidate it is.
    pub fn kind(&self) -> CandidateKind {
        CandidateKind::of_key(&self.key)
    }

    /// Candidate `key` as a run in `run_dir` recorded it, if it got that
    /// far.
    pub(crate) fn recorded(run_dir: &Path, key: &str) -> Option<Self> {
        read_json(&recorded_path(run_dir, key))
    }

    /// Records the candidate in `run_dir` (`candidates/<key>.json`), its
    /// last state.
    pub(crate) fn record(self, run_dir: &Path) -> Result<Self, EvolveError> {
        write_json(&recorded_path(run_dir, &self.key), &self)?;
        Ok(self)
    }
}

/// Where a run directory keeps recorded candidate `key`.
fn recorded_path(run_dir: &Path, key: &str) -> PathBuf {
    run_dir.join("candidates").join(format!("{key}.json"))
}

/// A candidate as the designer left it: its modules and how they were
/// written, and a design when every module was valid.
pub(crate) struct Designed {
    pub(crate) key: String,
    pub(crate) design: Option<Design>,
    pub(crate) modules: Vec<ModuleRecord>,
    pub(crate) success_rate: f64,
    /// The seed its training draws from.
    pub(crate) seed: u64,
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) reward_smoke: Option<SmokeReport>,
    /// Where the program database says it came from (none without one).
    pub(crate) lineage: Option<Lineage>,
}

impl Designed {
    /// The training it needs (none for an invalid design).
    pub(crate) fn job(&self, iteration: usize) -> Option<ScoreJob> {
        Some(ScoreJob {
            design: self.design.clone()?,
            key: self.key.clone(),
            iteration,
            success_rate: self.success_rate,
            seed: self.seed,
            fold: None,
        })
    }

    /// `result` (scored, stopped or invalid) with how the designer wrote
    /// it, recorded in `run_dir`.
    pub(crate) fn record(
        &self,
        mut result: CandidateResult,
        run_dir: &Path,
    ) -> Result<CandidateResult, EvolveError> {
        result.modules = self.modules.clone();
        result.prompt_tokens = self.prompt_tokens;
        result.completion_tokens = self.completion_tokens;
        result.reward_smoke = self.reward_smoke.clone();
        result.lineage = self.lineage.clone();
        result.record(run_dir)
    }
}

/// A design to train on the candidates' budget and validate: everything
/// its result depends on besides the run's config and data, so that it
/// runs here or as a cluster task (a line of `tasks.jsonl`) alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ScoreJob {
    pub(crate) design: Design,
    pub(crate) key: String,
    pub(crate) iteration: usize,
    pub(crate) success_rate: f64,
    pub(crate) seed: u64,
    /// Trains and scores on a fold of the non-test days instead of the
    /// train and validation splits (`[evolve.select] folds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) fold: Option<crate::fold::Fold>,
}

/// A scored job: its result, with the seconds its training took, and the
/// seconds its validation took.
#[derive(Debug, Clone)]
pub(crate) struct Scored {
    pub(crate) result: CandidateResult,
    pub(crate) eval_secs: f64,
}

/// The seconds of a scored job, kept beside its result
/// (`scores/<key>.secs.json`).
#[derive(Serialize, Deserialize)]
struct ScoreSecs {
    train: f64,
    eval: f64,
    /// Where the training's seconds went.
    #[serde(default)]
    profile: serl_train::TrainProfile,
}

impl Scored {
    /// Writes it as a scoring task's output: the result at `path` without
    /// timings, so that scoring a job twice writes the same bytes, and its
    /// seconds beside it. A local run writes it too, so that a resumed run
    /// need not score the job again.
    pub(crate) fn write(&self, path: &Path) -> Result<(), EvolveError> {
        let secs = ScoreSecs {
            train: self.result.train_secs,
            eval: self.eval_secs,
            profile: self.result.train_profile,
        };
        write_json(&secs_path(path), &secs)?;
        let untimed = CandidateResult {
            train_secs: 0.0,
            train_profile: Default::default(),
            ..self.result.clone()
        };
        write_json(path, &untimed)
    }

    /// A scoring task's output as [`Scored::write`] left it; `None` when
    /// the result is absent or cut short (missing seconds read as 0).
    pub(crate) fn read(path: &Path) -> Option<Scored> {
        let mut result: CandidateResult = read_json(path)?;
        let secs: Option<ScoreSecs> = read_json(&secs_path(path));
        result.train_secs = secs.as_ref().map_or(0.0, |s| s.train);
        result.train_profile = secs.as_ref().map(|s| s.profile).unwrap_or_default();
        Some(Scored {
            result,
            eval_secs: secs.map_or(0.0, |s| s.eval),
        })
    }
}

fn secs_path(path: &Path) -> PathBuf {
    path.with_extension("secs.json")
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

/// The valid candidate with the highest selection score
/// ([`CandidateResult::selection_score`]).
pub(crate) fn best_of(all: &[CandidateResult]) -> Option<&CandidateResult> {
    all.iter()
        .filter_map(|c| Some((c, c.selection_score()?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}

/// `d`'s `kind` module (`None` for a part the design leaves out).
pub(crate) fn module_of(d: &Design, kind: ModuleKind) -> Option<Module> {
    Some(match kind {
        ModuleKind::Reward => Module::Reward(d.reward.clone()),
        ModuleKind::State => Module::State(d.state.clone()),
        ModuleKind::Architecture => Module::Architecture(d.architecture.clone()),
        ModuleKind::Imagination => Module::Imagination(d.imagination.clone()),
        ModuleKind::Profiling => Module::Profiling(d.profiling.clone()?),
        ModuleKind::Communication => Module::Communication(d.communication.clone()?),
        ModuleKind::Plan => Module::Plan(d.plan.clone()?),
    })
}

pub(crate) fn module_text(d: &Design, kind: ModuleKind) -> Option<String> {
    module_of(d, kind).map(|m| m.text())
}

/// The `k` best distinct `kind` modules so far, for the prompt's examples.
pub(crate) fn top_examples(all: &[CandidateResult], kind: ModuleKind, k: usize) -> Vec<Example> {
    let mut scored: Vec<(&CandidateResult, f64)> = all
        .iter()
        .filter_map(|c| c.selection_score().map(|s| (c, s)))
        .collect();
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
    fn a_scored_job_is_written_without_timings_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scores").join("i0_c0.json");
        let mut result = CandidateResult::invalid("i0_c0".into(), 0, 0.5);
        result.design = Some(Design::baseline());
        result.score = Some(0.1 + 0.2);
        result.train_secs = 12.25;
        result.train_profile.learn_secs = 3.5;
        let scored = Scored {
            result,
            eval_secs: 1.5,
        };
        scored.write(&path).unwrap();
        let untimed: CandidateResult = read_json(&path).unwrap();
        assert_eq!(untimed.train_secs, 0.0, "the output holds no timings");
        let back = Scored::read(&path).unwrap();
        assert_eq!(back.eval_secs, 1.5);
        assert_eq!(back.result.train_profile, scored.result.train_profile);
        let json = |r: &CandidateResult| serde_json::to_string(r).unwrap();
        assert_eq!(
            json(&back.result),
            json(&scored.result),
            "what a run keeps in memory"
        );
        assert!(Scored::read(&dir.path().join("missing.json")).is_none());
    }

    #[test]
    fn a_recorded_candidate_is_found_by_its_key() {
        let dir = tempfile::tempdir().unwrap();
        assert!(CandidateResult::recorded(dir.path(), "baseline").is_none());
        let r = CandidateResult::invalid("baseline".into(), 0, 1.0)
            .record(dir.path())
            .unwrap();
        let again = CandidateResult::recorded(dir.path(), "baseline").unwrap();
        assert_eq!(again.key, r.key);
        assert!(dir.path().join("candidates").join("baseline.json").exists());
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
