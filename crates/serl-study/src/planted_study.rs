//! The planted study (`configs/study-planted.toml`): the study's arms and
//! seeds on planted copies of the base's data, one copy per strength
//! (`serl data plant`), to measure what the search finds where the answer
//! is known.
//!
//! At strength 0 there is nothing to find: a run that recommends a design
//! over plain PPO is a false discovery, and the share of such runs is the
//! recommendation's false-positive rate. At a positive strength a design
//! that reads the `signal` column has a real edge: the share of runs that
//! recommend such a design is the arm's detection rate. Each run
//! recommends on validation alone; once every run of the study has, the
//! tests of the runs that recommended a design are opened, and each
//! recommended design's test lead over plain PPO is kept beside the
//! planted strength. Runs, plants and openings are all kept on disk, so a
//! study cut off anywhere resumes where it stopped.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serl_data::{PlantConfig, PlantReport};
use serl_evolve::EvolveOutcome;

use crate::error::{Context, Result};
pub use crate::plant_sweep::PlantSweep;
use crate::search_study::{Arm, StudyRunner};
use crate::search_study_report::{test_line, TestLine};
use crate::EvolveFile;

/// What one run of the planted study came to
/// (`OUT/strength-S/ARM/seedN/planted-run.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlantedRun {
    /// The planted strength.
    pub strength: f64,
    /// The arm.
    pub arm: String,
    /// The search seed.
    pub seed: u64,
    /// The design the run chose on validation.
    pub chosen: String,
    /// Its mean daily lead over plain PPO on validation, bps.
    pub chosen_edge: Option<f64>,
    /// The Reality Check's p-value over every design the run tried.
    pub p_value: Option<f64>,
    /// With folds: the chosen design's lead over plain PPO on the non-test
    /// days that did not pick it, bps, and the clustered t's p-value
    /// there, which the recommendation reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folded: Option<(f64, f64)>,
    /// The design recommended over plain PPO, if any.
    pub recommended: Option<String>,
    /// Whether the recommended design's state reads the planted `signal`.
    pub reads_signal: bool,
    /// Designs tried.
    pub designs: usize,
    /// The recommended design's test against plain PPO, once opened.
    pub test: Option<TestLine>,
}

impl PlantedRun {
    fn of(strength: f64, arm: &str, seed: u64, outcome: &EvolveOutcome) -> PlantedRun {
        let e = &outcome.evidence;
        let recommended = e.recommendation.design.clone();
        let reads_signal = recommended.as_ref().is_some_and(|key| {
            outcome
                .candidates
                .iter()
                .find(|c| &c.key == key)
                .and_then(|c| c.design.as_ref())
                .is_some_and(|d| d.state.features.signal_reader().is_some())
        });
        PlantedRun {
            strength,
            arm: arm.to_string(),
            seed,
            chosen: e.chosen.clone(),
            chosen_edge: e.chosen_edge,
            p_value: e.spa.as_ref().map(|s| s.p_value()),
            folded: e
                .folded
                .as_ref()
                .and_then(|f| Some((f.chosen_edge?, f.clustered.as_ref()?.p_value))),
            recommended,
            reads_signal,
            designs: e.designs,
            test: None,
        }
    }

    /// A run whose designs were all invalid: it recommends plain PPO.
    fn empty(strength: f64, arm: &str, seed: u64) -> PlantedRun {
        PlantedRun {
            strength,
            arm: arm.to_string(),
            seed,
            chosen: String::new(),
            chosen_edge: None,
            p_value: None,
            folded: None,
            recommended: None,
            reads_signal: false,
            designs: 0,
            test: None,
        }
    }
}

/// The folder of strength `s`'s runs, under the study's.
pub fn strength_dir(out: &Path, s: f64) -> PathBuf {
    out.join(format!("strength-{s}"))
}

/// Plants the base's data at every strength (each once: a copy whose
/// `PLANT.json` says the same is kept), then runs every strength × arm ×
/// seed, then opens the tests of the runs that recommended a design.
pub fn run_planted(runner: &StudyRunner, sweep: &PlantSweep) -> Result<Vec<PlantedRun>> {
    let base = EvolveFile::read(&runner.file.base)?;
    let mut copies = Vec::new();
    for &s in &sweep.strengths {
        copies.push(planted_copy(runner.out, &base, &sweep.config(s))?);
    }
    let mut runs = Vec::new();
    for (&s, copy) in sweep.strengths.iter().zip(&copies) {
        let out = strength_dir(runner.out, s);
        let sub = StudyRunner {
            out: &out,
            data: Some(copy.clone()),
            ..*runner
        };
        for arm in &runner.file.arms {
            for &seed in &runner.file.seeds {
                runs.push(one(&sub, arm, seed, s)?);
            }
        }
    }
    // Every run has recommended on validation: now the tests. A run
    // resumes from its own config, which names its planted copy.
    for run in runs
        .iter_mut()
        .filter(|r| r.recommended.is_some() && r.test.is_none())
    {
        let Some(arm) = runner.file.arms.iter().find(|a| a.name == run.arm) else {
            continue;
        };
        let out = strength_dir(runner.out, run.strength);
        let sub = StudyRunner {
            out: &out,
            data: None,
            ..*runner
        };
        (runner.starting)(
            &format!("{} (test, strength {})", arm.name, run.strength),
            run.seed,
            true,
        );
        let dir = sub.run_dir(&arm.name, run.seed);
        if let (Some(outcome), _) = sub.evolve(arm, run.seed, &dir, true)? {
            run.test = test_line(&arm.name, run.seed, &outcome.test);
        }
        write_record(&dir, run)?;
    }
    Ok(runs)
}

/// One strength × arm × seed: read back where finished, else run (or
/// resumed) now.
fn one(sub: &StudyRunner, arm: &Arm, seed: u64, strength: f64) -> Result<PlantedRun> {
    let dir = sub.run_dir(&arm.name, seed);
    let record = dir.join("planted-run.json");
    if let Some(r) = std::fs::read_to_string(&record)
        .ok()
        .and_then(|t| serde_json::from_str::<PlantedRun>(&t).ok())
    {
        return Ok(r);
    }
    let resuming = dir.join("evolve.toml").exists();
    (sub.starting)(
        &format!("{} (strength {strength})", arm.name),
        seed,
        resuming,
    );
    let run = match sub.evolve(arm, seed, &dir, false)?.0 {
        Some(outcome) => PlantedRun::of(strength, &arm.name, seed, &outcome),
        None => PlantedRun::empty(strength, &arm.name, seed),
    };
    write_record(&dir, &run)?;
    Ok(run)
}

fn write_record(dir: &Path, run: &PlantedRun) -> Result<()> {
    let record = dir.join("planted-run.json");
    let text = serde_json::to_string_pretty(run).unwrap_or_default();
    serl_report::write_atomic(&record, text.as_bytes())
        .with_context(|| format!("writing {}", record.display()))
}

/// The planted copy of `base`'s data for `plant` under the study's
/// `out/planted/`, written unless a copy of the same plant is there.
fn planted_copy(out: &Path, base: &EvolveFile, plant: &PlantConfig) -> Result<PathBuf> {
    let Some(src) = &base.data_path else {
        crate::bail!("the study's base config has no data_path to plant a signal in");
    };
    let dst = out
        .join("planted")
        .join(format!("strength-{}", plant.strength));
    let same = |r: &PlantReport| r.config.as_ref() == Some(plant);
    if serl_data::read_plant_manifest(&dst).is_some_and(|r| same(&r)) {
        return Ok(absolute(&dst));
    }
    serl_data::plant(src, &dst, &base.data, plant, &|_| {})
        .with_context(|| format!("planting strength {} in {}", plant.strength, dst.display()))?;
    Ok(absolute(&dst))
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// One strength × arm's line of the planted study's table.
#[derive(Debug, Clone, Serialize)]
pub struct PlantedSummary {
    /// The planted strength.
    pub strength: f64,
    /// The arm.
    pub arm: String,
    /// Its runs.
    pub runs: usize,
    /// Runs that recommended a design over plain PPO.
    pub recommended: usize,
    /// Their share's 95% Wilson interval.
    pub recommended_interval: (f64, f64),
    /// Runs that recommended a design that reads the signal.
    pub detected: usize,
    /// Their share's 95% Wilson interval.
    pub detected_interval: (f64, f64),
    /// The recommended designs' mean test lead over plain PPO, bps (those
    /// opened).
    pub test_lead: Option<f64>,
}

/// Each strength × arm's rates, in the order of the runs.
pub fn summarize(runs: &[PlantedRun]) -> Vec<PlantedSummary> {
    let mut keys: Vec<(f64, String)> = Vec::new();
    for r in runs {
        if !keys.iter().any(|(s, a)| *s == r.strength && *a == r.arm) {
            keys.push((r.strength, r.arm.clone()));
        }
    }
    keys.into_iter()
        .map(|(strength, arm)| {
            let mine: Vec<&PlantedRun> = runs
                .iter()
                .filter(|r| r.strength == strength && r.arm == arm)
                .collect();
            let n = mine.len();
            let recommended = mine.iter().filter(|r| r.recommended.is_some()).count();
            let detected = mine.iter().filter(|r| r.reads_signal).count();
            let leads: Vec<f64> = mine
                .iter()
                .filter_map(|r| r.test.as_ref().map(|t| t.best_pa - t.plain_pa))
                .collect();
            PlantedSummary {
                strength,
                arm,
                runs: n,
                recommended,
                recommended_interval: serl_eval::selection::wilson_interval(recommended, n, 0.95),
                detected,
                detected_interval: serl_eval::selection::wilson_interval(detected, n, 0.95),
                test_lead: (!leads.is_empty())
                    .then(|| leads.iter().sum::<f64>() / leads.len() as f64),
            }
        })
        .collect()
}

/// The planted study's table in Markdown.
pub fn markdown(summaries: &[PlantedSummary]) -> String {
    let mut s = String::from(
        "# The planted study\n\n\
         Each run recommends on validation alone; a recommended design at strength 0 is a false discovery.\n\n\
         | strength | arm | runs | recommended a design [95% CI] | recommended a signal reader [95% CI] | test lead of the recommended over plain PPO (bps) |\n\
         |---|---|---|---|---|---|\n",
    );
    for m in summaries {
        let rate =
            |k: usize, (lo, hi): (f64, f64)| format!("{k}/{} [{:.2}, {:.2}]", m.runs, lo, hi);
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            m.strength,
            m.arm,
            m.runs,
            rate(m.recommended, m.recommended_interval),
            rate(m.detected, m.detected_interval),
            m.test_lead.map_or("–".into(), |l| format!("{l:+.2}")),
        ));
    }
    s
}

/// Writes `report.md` and `summary.json` of a planted study under `out`.
pub fn write_report(out: &Path, runs: &[PlantedRun]) -> Result<Vec<PlantedSummary>> {
    let summaries = summarize(runs);
    let md = out.join("report.md");
    serl_report::write_atomic(&md, markdown(&summaries).as_bytes())
        .with_context(|| format!("writing {}", md.display()))?;
    let json = out.join("summary.json");
    let text =
        serde_json::to_string_pretty(&serde_json::json!({"runs": runs, "summary": summaries}))
            .unwrap_or_default();
    serl_report::write_atomic(&json, text.as_bytes())
        .with_context(|| format!("writing {}", json.display()))?;
    Ok(summaries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(strength: f64, arm: &str, recommended: bool, reads: bool) -> PlantedRun {
        PlantedRun {
            recommended: recommended.then(|| "i1_c0".to_string()),
            reads_signal: reads,
            ..PlantedRun::empty(strength, arm, 1)
        }
    }

    #[test]
    fn rates_are_counted_per_strength_and_arm_with_their_intervals() {
        let runs = vec![
            run(0.0, "grammar", false, false),
            run(0.0, "grammar", true, false),
            run(0.3, "grammar", true, true),
            run(0.3, "grammar", true, false),
            run(0.0, "builtin", false, false),
        ];
        let s = summarize(&runs);
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[0].strength, s[0].arm.as_str(), s[0].runs),
            (0.0, "grammar", 2)
        );
        assert_eq!((s[0].recommended, s[0].detected), (1, 0));
        assert_eq!((s[1].recommended, s[1].detected), (2, 1));
        assert_eq!(s[2].arm, "builtin");
        let (lo, hi) = s[1].detected_interval;
        assert!(lo < 0.5 && hi > 0.5, "{lo} {hi}");
        let md = markdown(&s);
        assert!(md.contains("| 0.3 | grammar | 2 | 2/2"), "{md}");
    }
}
