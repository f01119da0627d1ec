//! What wrote a run directory, and the one rule every command follows for
//! an output folder that exists already.
//!
//! Every command that writes a folder records its kind there
//! ([`RUN_FILE`]), so `serl run check` knows what to look for and a
//! resume can refuse a folder of another kind. The rule
//! ([`check_out`]): a new run refuses a folder that is not empty; `--resume`
//! continues a run of the same kind; `--force` writes over a folder that
//! holds a serl run (and nothing else), starting afresh.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::lock::{LOCK_FILE, RUN_FILE};
use crate::error::{Context, Result};

/// The command that wrote a run directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunKind {
    /// `serl evolve`.
    Evolve,
    /// `serl train`, one policy.
    Train,
    /// `serl train --seeds N`: a policy per seed in `seed-S/`.
    TrainSeeds,
    /// `serl train --walk-forward`: a policy per window in `window-W/`.
    WalkForward,
    /// `serl backtest` (of strategies or of teams).
    Backtest,
    /// `serl simulate`: one symbol-day in the simulated market.
    Simulate,
    /// `serl simulate impact`.
    Impact,
    /// `serl simulate realism`.
    Realism,
    /// `serl simulate fills`.
    Fills,
    /// `serl evolve study`: arms of evolve runs.
    Study,
    /// `serl llm finetune`: an adapter.
    Finetune,
    /// `serl data convert` or `serl data plant`: a Parquet dataset.
    Dataset,
    /// `serl task check`: probe tasks through an engine.
    TaskCheck,
}

impl RunKind {
    /// The kind in words, as recorded (`walk-forward`).
    pub fn name(self) -> &'static str {
        match self {
            RunKind::Evolve => "evolve",
            RunKind::Train => "train",
            RunKind::TrainSeeds => "train-seeds",
            RunKind::WalkForward => "walk-forward",
            RunKind::Backtest => "backtest",
            RunKind::Simulate => "simulate",
            RunKind::Impact => "impact",
            RunKind::Realism => "realism",
            RunKind::Fills => "fills",
            RunKind::Study => "study",
            RunKind::Finetune => "finetune",
            RunKind::Dataset => "dataset",
            RunKind::TaskCheck => "task-check",
        }
    }

    /// How a run of this kind in `dir` goes on, where it can.
    pub fn resume_hint(self, dir: &Path) -> Option<String> {
        let d = dir.display();
        Some(match self {
            RunKind::Evolve => format!("serl evolve --resume {d}"),
            RunKind::Train => format!("serl train --resume --out {d}"),
            RunKind::TrainSeeds => format!("serl train --resume --out {d} --seeds N (N as before)"),
            RunKind::WalkForward => format!("serl train --resume --out {d} --walk-forward"),
            RunKind::Study => format!("serl evolve study --config F --out {d} --resume"),
            RunKind::Finetune => {
                format!("serl llm finetune --from RUN --model F.gguf --out {d} --resume")
            }
            _ => return None,
        })
    }

    /// The three kinds `serl train` writes, which its own resume check
    /// tells apart with the flags that make each.
    fn is_training(self) -> bool {
        matches!(
            self,
            RunKind::Train | RunKind::TrainSeeds | RunKind::WalkForward
        )
    }
}

/// `a train run`, `an evolve run`.
fn a_run(k: RunKind) -> String {
    let article = if matches!(k, RunKind::Evolve | RunKind::Impact) {
        "an"
    } else {
        "a"
    };
    format!("{article} {k} run")
}

impl std::fmt::Display for RunKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `RUN/serl-run.json`: what wrote the run directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// The command's kind.
    pub kind: RunKind,
    /// The command line that began the run.
    pub command: String,
    /// serl's version.
    pub serl_version: String,
    /// When the run began (UTC).
    pub started: String,
}

/// What the command line asks of an output folder that may exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutRule {
    /// A new run: the folder must be missing or empty.
    New,
    /// `--force`: a new run over a serl run folder's old contents.
    Force,
    /// `--resume`: go on with the run there.
    Resume,
}

impl OutRule {
    /// The rule the flags ask for (`--resume` and `--force` together are
    /// refused by the command line).
    pub fn from_flags(force: bool, resume: bool) -> OutRule {
        match (force, resume) {
            (_, true) => OutRule::Resume,
            (true, false) => OutRule::Force,
            (false, false) => OutRule::New,
        }
    }
}

/// The kind of the run in `dir`: its record's, or, for a folder written
/// before runs recorded their kind (and the runs a study or a walk-forward
/// writes inside itself), the kind its files show.
pub fn run_kind(dir: &Path) -> Option<RunKind> {
    read_record(dir).map(|r| r.kind).or_else(|| infer_kind(dir))
}

/// `dir`'s run record, if it has a readable one.
pub fn read_record(dir: &Path) -> Option<RunRecord> {
    let text = std::fs::read_to_string(dir.join(RUN_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The kind a run folder's files show.
pub fn infer_kind(dir: &Path) -> Option<RunKind> {
    let has = |f: &str| dir.join(f).exists();
    let kind = if has("evolve.toml") {
        RunKind::Evolve
    } else if has("window-0") || has("walk_forward.json") {
        RunKind::WalkForward
    } else if has("seeds.json") {
        RunKind::TrainSeeds
    } else if has("train.toml") {
        RunKind::Train
    } else if has("calibration.json") {
        RunKind::Simulate
    } else if has("impact.json") {
        RunKind::Impact
    } else if has("realism.json") {
        RunKind::Realism
    } else if has("fills.json") || has("probes.csv") {
        RunKind::Fills
    } else if has("adapter.json") || has("history.json") {
        RunKind::Finetune
    } else if has("summary.json") && (has("orders.csv") || has("team.csv")) {
        RunKind::Backtest
    } else if has("tasks.jsonl") {
        RunKind::TaskCheck
    } else if holds_study_runs(dir) {
        RunKind::Study
    } else if has("PLANT.json") || has("SCALE.json") {
        RunKind::Dataset
    } else {
        return None;
    };
    Some(kind)
}

/// A study's folder holds evolve runs two or three levels down
/// (`ARM/seedS/` or `strength-R/ARM/seedS/`), each with its study record.
fn holds_study_runs(dir: &Path) -> bool {
    let marked =
        |d: &Path| d.join("study-run.json").exists() || d.join("planted-run.json").exists();
    !study_runs(dir, &marked).is_empty()
}

/// The runs of a study folder `dir` that `marked` recognises, relative:
/// `ARM/seedS`, or `strength-R/ARM/seedS` in a planted study (its copies
/// of the data, `planted/`, are not runs); sorted.
pub(super) fn study_runs(dir: &Path, marked: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for a in sub_dirs(dir)
        .into_iter()
        .filter(|a| a != Path::new("planted"))
    {
        for s in sub_dirs(&dir.join(&a)) {
            let rel = a.join(&s);
            if marked(&dir.join(&rel)) {
                out.push(rel);
                continue;
            }
            for t in sub_dirs(&dir.join(&rel)) {
                if marked(&dir.join(&rel).join(&t)) {
                    out.push(rel.join(t));
                }
            }
        }
    }
    out.sort();
    out
}

/// The names of `dir`'s sub-folders.
pub(super) fn sub_dirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|es| {
            es.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| PathBuf::from(e.file_name()))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `dir` holds anything but its lock and run record.
fn has_contents(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|es| {
        es.flatten().any(|e| {
            let name = e.file_name();
            name != LOCK_FILE && name != RUN_FILE
        })
    })
}

/// Whether a command of `kind` may write `dir` under `rule`; nothing is
/// written. A refusal says what the folder holds and what to pass.
pub fn check_out(dir: &Path, kind: RunKind, rule: OutRule) -> Result<()> {
    let d = dir.display();
    if dir.exists() && !dir.is_dir() {
        crate::bail!("{d} is a file, not a folder: choose another --out");
    }
    let found = run_kind(dir);
    match rule {
        OutRule::New if has_contents(dir) => {
            let what = found.map_or(String::new(), |k| format!(" ({})", a_run(k)));
            let resume = found
                .filter(|k| *k == kind)
                .and_then(|k| k.resume_hint(dir))
                .map_or(String::new(), |h| format!("continue it with `{h}`, "));
            crate::bail!(
                "{d} exists and is not empty{what}: {resume}write over it with --force, or choose another --out"
            )
        }
        OutRule::Force if has_contents(dir) && found.is_none() => crate::bail!(
            "{d} holds files serl did not write; --force writes over a serl run folder only: choose another --out"
        ),
        OutRule::Resume => match found {
            None if !has_contents(dir) => crate::bail!("{d} holds no run to resume"),
            None => crate::bail!("{d} holds no serl run to resume"),
            Some(f) if f != kind && !(f.is_training() && kind.is_training()) => {
                let how = f
                    .resume_hint(dir)
                    .map_or(String::new(), |h| format!(": resume it with `{h}`"));
                crate::bail!("{d} is {}, not {}{how}", a_run(f), a_run(kind))
            }
            Some(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Begins (or resumes) a run of `kind` in `dir`, which the caller has
/// locked after [`check_out`] agreed: `--force` first clears the old
/// run's files (the lock stays), and the run record is written unless a
/// resumed run has one.
pub fn begin_run(dir: &Path, kind: RunKind, rule: OutRule, command: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if rule == OutRule::Force {
        clear_run(dir)?;
    }
    if rule == OutRule::Resume && read_record(dir).is_some() {
        return Ok(());
    }
    let record = RunRecord {
        kind,
        command: command.to_string(),
        serl_version: env!("CARGO_PKG_VERSION").to_string(),
        started: serl_evolve::utc_now(),
    };
    let text = serde_json::to_string_pretty(&record)?;
    serl_report::write_atomic(&dir.join(RUN_FILE), text.as_bytes())
        .with_context(|| format!("writing {}", dir.join(RUN_FILE).display()))?;
    Ok(())
}

/// Removes everything in `dir` but its lock.
fn clear_run(dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for e in entries.flatten() {
        if e.file_name() == LOCK_FILE {
            continue;
        }
        let p = e.path();
        let removed = if p.is_dir() && !p.is_symlink() {
            std::fs::remove_dir_all(&p)
        } else {
            std::fs::remove_file(&p)
        };
        removed.with_context(|| format!("--force: removing {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, f: &str) {
        let p = dir.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "{}").unwrap();
    }

    #[test]
    fn a_new_run_refuses_a_folder_that_is_not_empty_and_names_the_way_on() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        assert!(
            check_out(&out, RunKind::Backtest, OutRule::New).is_ok(),
            "missing"
        );
        std::fs::create_dir_all(&out).unwrap();
        assert!(
            check_out(&out, RunKind::Backtest, OutRule::New).is_ok(),
            "empty"
        );
        touch(&out, "summary.json");
        touch(&out, "orders.csv");
        let e = check_out(&out, RunKind::Backtest, OutRule::New)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("(a backtest run)") && e.contains("--force"),
            "{e}"
        );
        assert!(!e.contains("--resume"), "a backtest does not resume: {e}");
        touch(&out, "other/evolve.toml");
        let evolve = out.join("other");
        let e = check_out(&evolve, RunKind::Evolve, OutRule::New)
            .unwrap_err()
            .to_string();
        assert!(e.contains("serl evolve --resume"), "{e}");
    }

    #[test]
    fn force_writes_over_a_serl_run_only_and_keeps_nothing_of_it() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), "notes.txt");
        let e = check_out(dir.path(), RunKind::Backtest, OutRule::Force).unwrap_err();
        assert!(e.to_string().contains("serl did not write"), "{e}");

        let run = tempfile::tempdir().unwrap();
        touch(run.path(), "plot9.svg");
        begin_run(run.path(), RunKind::Backtest, OutRule::New, "serl backtest").unwrap();
        check_out(run.path(), RunKind::Backtest, OutRule::Force).unwrap();
        begin_run(
            run.path(),
            RunKind::Backtest,
            OutRule::Force,
            "serl backtest --force",
        )
        .unwrap();
        assert!(
            !run.path().join("plot9.svg").exists(),
            "the old run's files are gone"
        );
        assert_eq!(
            read_record(run.path()).unwrap().command,
            "serl backtest --force"
        );
    }

    #[test]
    fn a_resume_keeps_the_kind_and_its_record() {
        let run = tempfile::tempdir().unwrap();
        begin_run(
            run.path(),
            RunKind::Study,
            OutRule::New,
            "serl evolve study",
        )
        .unwrap();
        touch(run.path(), "grammar/seed1/study-run.json");
        let e = check_out(run.path(), RunKind::Evolve, OutRule::Resume).unwrap_err();
        assert!(
            e.to_string().contains("is a study run, not an evolve run"),
            "{e}"
        );
        check_out(run.path(), RunKind::Study, OutRule::Resume).unwrap();
        begin_run(run.path(), RunKind::Study, OutRule::Resume, "again").unwrap();
        assert_eq!(
            read_record(run.path()).unwrap().command,
            "serl evolve study"
        );
        let e = check_out(&run.path().join("none"), RunKind::Study, OutRule::Resume);
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("holds no run to resume"));
    }

    #[test]
    fn folders_written_before_the_record_are_known_by_their_files() {
        let run = tempfile::tempdir().unwrap();
        touch(run.path(), "grammar/seed1/study-run.json");
        assert_eq!(infer_kind(run.path()), Some(RunKind::Study));
        touch(run.path(), "window-0/train.toml");
        assert_eq!(infer_kind(run.path()), Some(RunKind::WalkForward));
        assert_eq!(
            infer_kind(&run.path().join("window-0")),
            Some(RunKind::Train)
        );
    }
}
