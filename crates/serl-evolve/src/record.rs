//! What the run directory keeps of each candidate: its record
//! ([`CandidateResult`], `candidates/<key>.json`) and the types the record
//! is made of (its validation, its days, its paired edge over plain PPO,
//! its lineage in the program database), with the score they share.
//!
//! A leaf of the crate: every stage reads and writes these, and this file
//! imports none of them.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use serl_design::{Design, Module, ModuleKind, SmokeReport};

use crate::error::{read_json, write_json, EvolveError};
use crate::fold::FoldRecord;

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
    pub fold: Option<FoldRecord>,
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

/// A candidate's score from its validation PA (bps) and its designer's
/// success rate (in (0, 1]: 1 / attempts, averaged over its modules).
///
/// The paper's PA × success rate for a PA of zero or more; PA / success
/// rate below zero. Both halves meet at 0, so the score rises with PA at
/// any success rate, and with the success rate at any PA: a design that
/// needed more attempts never scores higher than the same PA in fewer.
/// (PA × success alone would rank a losing design *higher* the more
/// attempts it took: -4 × 0.5 = -2 > -4.)
pub fn candidate_score(pa: f64, success_rate: f64) -> f64 {
    let s = success_rate.clamp(1e-6, 1.0);
    if pa >= 0.0 {
        pa * s
    } else {
        pa / s
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

/// The valid candidate with the highest selection score
/// ([`CandidateResult::selection_score`]).
pub(crate) fn best_of(all: &[CandidateResult]) -> Option<&CandidateResult> {
    all.iter()
        .filter_map(|c| Some((c, c.selection_score()?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}

/// One validation day's mean PA, bps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DayPa {
    /// The session.
    pub date: NaiveDate,
    /// Mean whole-order PA of the day's validation orders, bps.
    pub pa: f64,
}

/// One validation stock-day's mean PA, bps: a row of the evidence file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StockDayPa {
    /// The session.
    pub date: NaiveDate,
    /// The stock.
    pub symbol: String,
    /// Mean whole-order PA of its validation orders that day, bps.
    pub pa: f64,
    /// Orders behind the mean.
    pub orders: u64,
}

/// A design's daily edge over plain PPO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedScore {
    /// Mean over days of (design − plain PPO), bps.
    pub mean: f64,
    /// Its standard error (the days' standard deviation over √days; 0
    /// with one day).
    pub se: f64,
    /// `mean − z · se`: what the search ranks by.
    pub lower: f64,
    /// Days paired.
    pub days: usize,
    /// Each day's difference, in date order.
    pub diffs: Vec<f64>,
}

/// What made a design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operator {
    /// Every module written from scratch.
    Fresh,
    /// One module of one parent rewritten.
    Mutate,
    /// Two parents combined.
    Crossover,
    /// The builtin offline search.
    Builtin,
    /// The low-level DEK's constants on the best design.
    Tune,
}

impl Operator {
    /// The instruction its prompt ends with before the high-level DEK
    /// rewrites it (`mutate.j2`, `crossover.j2` fall back to the same
    /// words); none for the operators without a prompt of their own.
    pub fn instruction(self) -> &'static str {
        match self {
            Operator::Mutate => "Change it to do better: keep what works and change one or two things (a term, a constant, a feature, a layer, a scenario).",
            Operator::Crossover => "Keep the strengths of both (for example the terms or features that each relies on), reconciled into a single valid module.",
            _ => "",
        }
    }

    /// Its name in configs, prompts and reports.
    pub fn name(self) -> &'static str {
        match self {
            Operator::Fresh => "fresh",
            Operator::Mutate => "mutate",
            Operator::Crossover => "crossover",
            Operator::Builtin => "builtin",
            Operator::Tune => "tune",
        }
    }

    /// Parents it needs.
    pub(crate) fn parents(self) -> usize {
        match self {
            Operator::Mutate | Operator::Tune => 1,
            Operator::Crossover => 2,
            Operator::Fresh | Operator::Builtin => 0,
        }
    }
}

/// Where a design came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lineage {
    /// The operator that made it.
    pub operator: Operator,
    /// Its parents' keys (none for `fresh` and `builtin`).
    pub parents: Vec<String>,
    /// The island it belongs to.
    pub island: usize,
    /// The module the designer rewrote (mutate, crossover); the others
    /// are the parents'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<serl_design::ModuleKind>,
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
    fn the_score_rises_with_pa_and_with_the_success_rate_on_both_sides_of_zero() {
        let pas = [-40.0, -4.0, -0.5, 0.0, 0.5, 4.0, 40.0];
        let rates = [0.2, 1.0 / 3.0, 0.5, 0.75, 1.0];
        for &s in &rates {
            for w in pas.windows(2) {
                assert!(
                    candidate_score(w[0], s) < candidate_score(w[1], s),
                    "{w:?} at {s}"
                );
            }
        }
        for &pa in &pas {
            for w in rates.windows(2) {
                let (lo, hi) = (candidate_score(pa, w[0]), candidate_score(pa, w[1]));
                if pa == 0.0 {
                    assert_eq!(lo, hi);
                } else {
                    assert!(lo < hi, "PA {pa}: {lo} at {} vs {hi} at {}", w[0], w[1]);
                }
            }
        }
        // The paper's rule where PA is positive; a full success is the PA.
        assert_eq!(candidate_score(4.0, 0.5), 2.0);
        assert_eq!(candidate_score(-4.0, 1.0), -4.0);
        assert_eq!(candidate_score(-4.0, 0.5), -8.0);
    }
}
