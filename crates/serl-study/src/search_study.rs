//! The equal-budget study of designers (`serl evolve study`): the same
//! task, data and budget for several arms (the random-grammar control,
//! the builtin search, a model without and with the program database),
//! each over several search seeds, so that what the language model adds
//! is measured rather than assumed.
//!
//! Every arm-seed is an ordinary evolve run in `OUT/ARM/seedS/` with its
//! test sealed (the lockbox) and convergence switched off, so every arm
//! trains the same number of candidates. A killed study resumes: finished
//! runs are read back, an unfinished one resumes from its directory. Once
//! every run is in, the study declares its winner on validation alone,
//! and only then opens the test of the winner's and the runner-up's runs
//! (`study/lockbox.json`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serl_evolve::{CandidateResult, EvolveOutcome, PairedScore, SearchConfig};

pub use crate::arm_run::ArmRun;
use crate::config::{read_toml, Base, EvolveFile, LlmChoice};
use crate::error::{Context, Result};
use crate::evolve::{EvolveRequest, Study};
use crate::evolve_overrides::{resolve, EvolveOverrides, EvolveStart};

/// A study file (`configs/study.toml`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StudyFile {
    /// The evolve config every arm starts from: the task, data and budget
    /// (iterations, candidates, training steps). Relative paths here and
    /// in `model` are from the study file's directory.
    pub base: PathBuf,
    /// Search seeds: each arm runs once per seed.
    pub seeds: Vec<u64>,
    /// Standard errors below the mean of the lower bound every design is
    /// compared by (the study's own score, the same for every arm).
    #[serde(default = "default_z")]
    pub z: f64,
    /// The arms.
    pub arms: Vec<Arm>,
    /// Runs the study on planted copies of the base's data instead, one
    /// per strength (`configs/study-planted.toml`,
    /// `planted_study.rs`).
    #[serde(default)]
    pub plant: Option<crate::plant_sweep::PlantSweep>,
}

fn default_z() -> f64 {
    1.0
}

/// One arm: a designer, with or without the program database.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    /// Its name (a directory name: letters, digits, `-`, `_`, `+`).
    pub name: String,
    /// The designer.
    pub llm: LlmChoice,
    /// The GGUF model for `llm = "local"`.
    #[serde(default)]
    pub model: Option<PathBuf>,
    /// Search with the program database (`[evolve.search]`: the base's
    /// table, or its defaults); without it, each round designs afresh.
    #[serde(default)]
    pub search: bool,
    /// Fine-tune the designer between rounds (`[evolve.finetune]`, e.g.
    /// `{ every = 1, tune = { epochs = 2 } }`; `llm = "local"` only);
    /// without it, the model stays as it is (a base's `[evolve.finetune]`
    /// is dropped).
    #[serde(default)]
    pub finetune: Option<serl_evolve::FinetuneConfig>,
}

impl StudyFile {
    /// The line a study starts with: its arms, seeds (and planted
    /// strengths) and the evolve runs they make, in `out`.
    pub fn plan_line(&self, out: &Path) -> String {
        let (arms, seeds) = (self.arms.len(), self.seeds.len());
        let strengths = self.plant.as_ref().map_or(1, |p| p.strengths.len());
        let planted = self.plant.as_ref().map_or(String::new(), |p| {
            format!("{} planted strengths × ", p.strengths.len())
        });
        let runs = arms * seeds * strengths;
        let out = out.display();
        format!("study: {planted}{arms} arms × {seeds} seeds = {runs} evolve runs in {out}")
    }

    /// The command that goes on with the study in `out` from `config`.
    pub fn resume_hint(config: &Path, out: &Path) -> String {
        let (config, out) = (config.display(), out.display());
        format!("resume with `serl evolve study --config {config} --out {out} --resume`")
    }

    /// Reads and checks a study file, naming the field at fault.
    pub fn load(path: &Path) -> Result<StudyFile> {
        let mut s: StudyFile = read_toml(path)?;
        let mut written = std::collections::BTreeMap::new();
        let mut base = Some(s.base.clone());
        crate::paths::resolve("base", &mut base, Base::Config(path), &mut written)?;
        s.base = base.unwrap_or_default();
        for (i, a) in s.arms.iter_mut().enumerate() {
            let field = format!("arms[{i}].model");
            crate::paths::resolve(&field, &mut a.model, Base::Config(path), &mut written)?;
        }
        let bad = |m: String| crate::error::StudyError::msg(format!("{}: {m}", path.display()));
        if s.seeds.is_empty() {
            return Err(bad("seeds: give at least one search seed".into()));
        }
        if let Some(d) = s
            .seeds
            .iter()
            .enumerate()
            .find(|(i, x)| s.seeds[..*i].contains(x))
        {
            return Err(bad(format!("seeds: {} is given twice", d.1)));
        }
        if s.arms.len() < 2 {
            return Err(bad("arms: a study compares at least two arms".into()));
        }
        for (i, a) in s.arms.iter().enumerate() {
            let ok = !a.name.is_empty()
                && a.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_+".contains(c));
            if !ok {
                return Err(bad(format!(
                    "arms[{i}].name `{}`: use letters, digits, `-`, `_` or `+`",
                    a.name
                )));
            }
            if s.arms[..i].iter().any(|b| b.name == a.name) {
                return Err(bad(format!("arms[{i}].name `{}` is used twice", a.name)));
            }
            if a.llm == LlmChoice::Replay {
                return Err(bad(format!("arms[{i}].llm: replay cannot be an arm")));
            }
            // A model arm without its file would fail when its turn came,
            // perhaps an hour in: said now.
            match (&a.model, a.llm) {
                (None, LlmChoice::Local) => {
                    return Err(bad(format!(
                        "arms[{i}] `{}`: llm = \"local\" needs model = \"PATH.gguf\"",
                        a.name
                    )))
                }
                (Some(m), LlmChoice::Local) if !m.exists() => {
                    return Err(bad(format!(
                        "arms[{i}] `{}`: model {} does not exist (README, \"The embedded model\", says how to get it)",
                        a.name,
                        m.display()
                    )))
                }
                _ => {}
            }
        }
        if !(s.z.is_finite() && s.z >= 0.0) {
            return Err(bad(format!("z must be 0 or more, not {}", s.z)));
        }
        if let Some(p) = &s.plant {
            p.check().map_err(|m| bad(format!("plant.{m}")))?;
        }
        Ok(s)
    }
}

/// The study's score of candidate `c`: the lower bound of its daily edge
/// over `plain`'s validation days (`z` standard errors below the mean),
/// charged for the designer's retries as every score is.
pub fn study_score(c: &CandidateResult, plain: &CandidateResult, z: f64) -> Option<f64> {
    c.score?;
    let p = paired_of(c, plain, z)?;
    Some(serl_evolve::candidate_score(p.lower, c.success_rate))
}

fn paired_of(c: &CandidateResult, plain: &CandidateResult, z: f64) -> Option<PairedScore> {
    let days = &c.validation.as_ref()?.days;
    let plain_days = &plain.validation.as_ref()?.days;
    serl_evolve::paired_days(days, plain_days, z)
}

impl ArmRun {
    /// A run whose `designed` designs were all invalid.
    fn empty(arm: &str, seed: u64, designed: usize) -> ArmRun {
        ArmRun {
            arm: arm.to_string(),
            seed,
            curve: vec![None; designed],
            chosen: String::new(),
            chosen_paired: None,
            chosen_score: None,
            chosen_reward: String::new(),
            candidates: designed,
            valid: 0,
            designed,
            tokens: 0,
            secs: 0.0,
            operators: Default::default(),
            best_designs: Vec::new(),
            worst_designs: Vec::new(),
        }
    }
}

/// The study's record of a finished run.
pub fn arm_run(arm: &str, seed: u64, outcome: &EvolveOutcome, run_dir: &Path, z: f64) -> ArmRun {
    let plain = &outcome.baseline;
    let mut best: Option<f64> = None;
    let curve = outcome
        .candidates
        .iter()
        .map(|c| {
            if let Some(s) = study_score(c, plain, z) {
                best = Some(best.map_or(s, |b: f64| b.max(s)));
            }
            best
        })
        .collect();
    let mut scored: Vec<(String, f64, String)> = outcome
        .candidates
        .iter()
        .filter_map(|c| {
            let s = study_score(c, plain, z)?;
            let reward = c.design.as_ref()?.reward.source().to_string();
            Some((c.key.clone(), s, reward))
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    let designed: Vec<&CandidateResult> = outcome
        .candidates
        .iter()
        .filter(|c| c.kind() == serl_evolve::CandidateKind::Designed)
        .collect();
    let operators = serl_evolve::Database::read(run_dir)
        .map(|db| {
            let mut ops = std::collections::BTreeMap::<String, (usize, usize)>::new();
            for r in &db.rounds {
                for (op, (n, v)) in &r.operators {
                    let e = ops.entry(op.clone()).or_default();
                    e.0 += n;
                    e.1 += v;
                }
            }
            ops
        })
        .unwrap_or_default();
    ArmRun {
        arm: arm.to_string(),
        seed,
        curve,
        chosen: outcome.best.key.clone(),
        chosen_paired: paired_of(&outcome.best, plain, z),
        chosen_score: study_score(&outcome.best, plain, z),
        chosen_reward: outcome
            .best
            .design
            .as_ref()
            .map(|d| d.reward.source().to_string())
            .unwrap_or_default(),
        candidates: outcome.candidates.len(),
        valid: designed.iter().filter(|c| c.score.is_some()).count(),
        designed: designed.len(),
        tokens: outcome
            .candidates
            .iter()
            .map(|c| c.prompt_tokens + c.completion_tokens)
            .sum(),
        secs: outcome.wall_secs,
        operators,
        best_designs: scored.iter().take(3).cloned().collect(),
        worst_designs: scored.iter().rev().take(3).cloned().collect(),
    }
}

/// How the study runs: where, what it shows, and what it hears.
pub struct StudyRunner<'a> {
    /// The study.
    pub file: &'a StudyFile,
    /// The study's directory.
    pub out: &'a Path,
    /// What each run shows (a progress bar).
    pub shown: fn(&serl_evolve::EvolveConfig) -> serl_evolve::OnEvent<'static>,
    /// Hears what a data load left out.
    pub warn: &'a dyn Fn(&str),
    /// Hears each run as it starts: arm, seed, and whether it resumes.
    pub starting: &'a dyn Fn(&str, u64, bool),
    /// The data every new run reads instead of the base's (a planted
    /// copy); `None`: the base's.
    pub data: Option<PathBuf>,
}

impl StudyRunner<'_> {
    /// The run directory of `arm` with `seed`.
    pub fn run_dir(&self, arm: &str, seed: u64) -> PathBuf {
        self.out.join(arm).join(format!("seed{seed}"))
    }

    /// Every arm-seed run, in the study file's order: read back where
    /// finished, else run (or resumed) now.
    pub fn run_all(&self) -> Result<Vec<ArmRun>> {
        std::fs::create_dir_all(self.out)
            .with_context(|| format!("creating {}", self.out.display()))?;
        let mut runs = Vec::new();
        for arm in &self.file.arms {
            for &seed in &self.file.seeds {
                runs.push(self.one(arm, seed)?);
            }
        }
        Ok(runs)
    }

    fn one(&self, arm: &Arm, seed: u64) -> Result<ArmRun> {
        let dir = self.run_dir(&arm.name, seed);
        let record = dir.join("study-run.json");
        if let Some(r) = std::fs::read_to_string(&record)
            .ok()
            .and_then(|t| serde_json::from_str::<ArmRun>(&t).ok())
        {
            return Ok(r);
        }
        let resuming = dir.join("evolve.toml").exists();
        (self.starting)(&arm.name, seed, resuming);
        let (outcome, cfg) = self.evolve(arm, seed, &dir, false)?;
        let run = match outcome {
            Some(outcome) => arm_run(&arm.name, seed, &outcome, &dir, self.file.z),
            // Every design invalid: a result of the arm, not a failure
            // of the study.
            None => ArmRun::empty(
                &arm.name,
                seed,
                cfg.evolve.iterations * cfg.evolve.candidates,
            ),
        };
        let text = serde_json::to_string_pretty(&run).unwrap_or_default();
        serl_report::write_atomic(&record, text.as_bytes())
            .with_context(|| format!("writing {}", record.display()))?;
        Ok(run)
    }

    /// Runs (or resumes) `arm`'s run with `seed` in `dir`, its test
    /// opened when `open_test` (the lockbox declared), with its config;
    /// no outcome when every design of the run was invalid.
    pub fn evolve(
        &self,
        arm: &Arm,
        seed: u64,
        dir: &Path,
        open_test: bool,
    ) -> Result<(Option<EvolveOutcome>, EvolveFile)> {
        let resuming = dir.join("evolve.toml").exists();
        let (dir, cfg) = if resuming {
            resolve(EvolveStart::Resume(dir), &EvolveOverrides::default())?
        } else {
            let overrides = EvolveOverrides {
                data: self.data.clone(),
                llm: Some(arm.llm),
                model: arm.model.clone(),
                seed: Some(seed),
                lockbox: true,
                ..EvolveOverrides::default()
            };
            let start = EvolveStart::New {
                out: dir,
                config: Some(&self.file.base),
                force: false,
            };
            let (dir, mut cfg) = resolve(start, &overrides)?;
            cfg.evolve.search = arm.search.then(|| {
                cfg.evolve
                    .search
                    .clone()
                    .unwrap_or_else(SearchConfig::default)
            });
            cfg.evolve.finetune = arm.finetune.clone();
            // Equal budgets: every arm runs every iteration, and no arm
            // stops early for its tokens or seconds.
            cfg.evolve.convergence.window = cfg.evolve.iterations + 1;
            cfg.evolve.budget = None;
            cfg.evolve.ablations.clear();
            cfg.validate()?;
            (dir, cfg)
        };
        let request = EvolveRequest {
            seeds: 0,
            walk_forward: false,
            open_test,
            new_run: !resuming,
            replay_from: None,
        };
        let p = crate::evolve::prepare(&dir, &cfg, &request, self.warn)?;
        let show = self.shown;
        let shown = move |c: &serl_evolve::EvolveConfig| -> serl_evolve::OnEvent<'_> { show(c) };
        let study = Study {
            cfg: &cfg,
            data: &p.data,
            open_test,
            cluster: p.cluster.as_ref(),
            prompts_dir: &p.prompts_dir,
            shown: &shown,
        };
        match study.evolve(cfg.evolve.clone(), p.designer, p.prompts, &dir) {
            Ok(outcome) => Ok((Some(outcome), cfg)),
            Err(serl_evolve::EvolveError::NoValidDesign(_)) => Ok((None, cfg)),
            Err(e) => Err(e.into()),
        }
    }
}

/// What a study came to.
pub struct StudyResult {
    /// Every arm-seed run.
    pub runs: Vec<ArmRun>,
    /// The winner and runner-up, and their tests.
    pub lockbox: crate::search_study_report::StudyLockbox,
}

impl StudyRunner<'_> {
    /// Runs (or resumes) every arm-seed, declares the winner on
    /// validation, opens the winner's and the runner-up's tests once
    /// (`lockbox.json`; a resumed study reads it back), and writes the
    /// report (`report.md`, `report.html`, `summary.json`, `curves.svg`).
    pub fn run(&self) -> Result<StudyResult> {
        use crate::search_study_report as report;
        let runs = self.run_all()?;
        let arms: Vec<String> = self.file.arms.iter().map(|a| a.name.clone()).collect();
        let path = self.out.join("lockbox.json");
        let lockbox = match std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<report::StudyLockbox>(&t).ok())
        {
            Some(l) => l,
            None => {
                let ranking = report::ranking(&report::summarize(&arms, &runs));
                let (winner, runner_up) = (ranking[0].clone(), ranking[1].clone());
                let declared_at = serl_evolve::utc_now();
                let mut tests = Vec::new();
                for name in [&winner, &runner_up] {
                    let arm = self.file.arms.iter().find(|a| &a.name == name);
                    for (arm, &seed) in arm
                        .into_iter()
                        .flat_map(|a| self.file.seeds.iter().map(move |s| (a, s)))
                    {
                        (self.starting)(&format!("{} (test)", arm.name), seed, true);
                        let dir = self.run_dir(&arm.name, seed);
                        if let (Some(outcome), _) = self.evolve(arm, seed, &dir, true)? {
                            tests.extend(report::test_line(&arm.name, seed, &outcome.test));
                        }
                    }
                }
                let l = report::StudyLockbox {
                    winner,
                    runner_up,
                    declared_at,
                    tests,
                };
                let text = serde_json::to_string_pretty(&l).unwrap_or_default();
                serl_report::write_atomic(&path, text.as_bytes())
                    .with_context(|| format!("writing {}", path.display()))?;
                l
            }
        };
        report::write(self.out, &runs, &arms, Some(&lockbox))?;
        Ok(StudyResult { runs, lockbox })
    }
}
