//! Candidates: the states each passes through on its way to its record
//! ([`CandidateResult`], in `record.rs`), and the modules a prompt shows.
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

use crate::error::{read_json, write_json, EvolveError};
use crate::record::{CandidateResult, Lineage, ModuleRecord};

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
            let example = Example::of(module_of(c.design.as_ref()?, kind)?, s);
            seen.insert(example.source.clone()).then_some(example)
        })
        .take(k)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::best_of;

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
