//! `serl run check` for every kind of run folder: what each kind writes
//! once it has finished, checked beside the records' readability, and
//! the runs a run holds (a study's evolve runs, a walk-forward's windows,
//! the policies of `--seeds`) checked as runs of their own.

use std::path::{Path, PathBuf};

use super::check::{check_evolve, unreadable_records, CheckReport};
use super::kind::{run_kind, study_runs, sub_dirs, RunKind};
use super::lock::RunLock;
use crate::error::Result;

/// What a finished run of a kind has written: the file whose presence
/// says it finished, and the others it then always has.
struct Finished {
    marker: &'static str,
    with: &'static [&'static str],
}

fn finished_files(kind: RunKind) -> Option<Finished> {
    let (marker, with): (&str, &[&str]) = match kind {
        RunKind::Train => (
            "final.json",
            &["final.bpk", "best.bpk", "metrics.jsonl", "report.md"],
        ),
        RunKind::WalkForward => (
            "walk_forward.json",
            &["walk-forward.md", "walk-forward.html"],
        ),
        RunKind::Backtest => ("report.html", &["summary.json", "report.md"]),
        RunKind::Simulate => (
            "report.html",
            &["calibration.json", "checks.json", "report.md"],
        ),
        RunKind::Impact => ("impact.json", &["report.md", "report.html"]),
        RunKind::Realism => ("realism.json", &["report.md", "report.html"]),
        RunKind::Fills => ("fills.json", &["probes.csv", "report.md", "report.html"]),
        // A planted study writes no HTML page; both kinds write these.
        RunKind::Study => ("report.md", &["summary.json"]),
        RunKind::Finetune => (
            "report.html",
            &["report.md", "adapter.json", "adapter.safetensors"],
        ),
        RunKind::Evolve | RunKind::TrainSeeds | RunKind::Dataset | RunKind::TaskCheck => {
            return None
        }
    };
    Some(Finished { marker, with })
}

impl CheckReport {
    /// What `serl run check DIR` prints of the report on `dir`: what was
    /// read, who holds the run, its repairs, then `whole`, or each
    /// problem and their count with the way to mend them.
    pub fn lines(&self, dir: &Path) -> Vec<String> {
        let state = if self.finished {
            "finished"
        } else {
            "not finished"
        };
        let kind = self.kind.map_or("run", |k| k.name());
        let inner = match self.inner.len() {
            0 => String::new(),
            n => format!(", {n} runs inside checked"),
        };
        let mut lines = vec![format!(
            "{} ({kind}, {state}): {} records read, {} planned outputs{inner}",
            dir.display(),
            self.records,
            self.planned
        )];
        lines.extend(RunLock::holder_of(dir).map(|h| format!("held by {h}")));
        lines.extend(self.repairs.iter().map(|r| format!("repaired: {r}")));
        if self.whole() {
            lines.push("whole".into());
            return lines;
        }
        lines.extend(self.problems.iter().map(|p| format!("problem: {p}")));
        let how = match self.kind {
            Some(RunKind::Evolve) => format!(
                "; `serl evolve --resume {}` recomputes unreadable records",
                dir.display()
            ),
            _ => String::new(),
        };
        lines.push(format!("{} problems{how}", self.problems.len()));
        lines
    }
}

/// Checks the run folder `dir`, whatever wrote it: every record readable,
/// what its kind writes once finished present, and each run inside it.
pub fn check_run(dir: &Path) -> Result<CheckReport> {
    let d = dir.display();
    if !dir.exists() {
        crate::bail!("{d} does not exist");
    }
    if !dir.is_dir() {
        crate::bail!("{d} is a file, not a run folder");
    }
    let Some(kind) = run_kind(dir) else {
        crate::bail!(
            "{d} is not a serl run folder: it has no {} and none of the files a serl command writes",
            super::lock::RUN_FILE
        );
    };
    let mut r = CheckReport {
        kind: Some(kind),
        ..CheckReport::default()
    };
    for u in unreadable_records(dir, &mut r.records) {
        r.problems.push(format!("{}: {}", u.file, u.problem));
    }
    r.finished = check_kind(dir, "", kind, &mut r);
    Ok(r)
}

/// The checks of `kind` on `dir` (named `at` in problems); whether it
/// has finished.
fn check_kind(dir: &Path, at: &str, kind: RunKind, r: &mut CheckReport) -> bool {
    match kind {
        RunKind::Evolve => {
            check_evolve(dir, at, r);
            return dir.join("report.html").is_file();
        }
        RunKind::TrainSeeds => {
            let seeds = inner_runs(dir, "seed-");
            return check_inner(dir, at, &seeds, r) && !seeds.is_empty();
        }
        RunKind::WalkForward => {
            check_inner(dir, at, &inner_runs(dir, "window-"), r);
        }
        RunKind::Study => {
            check_inner(dir, at, &study_evolve_runs(dir), r);
        }
        RunKind::Dataset => {
            if !has_parquet(dir) {
                r.problems.push(format!("{at}: no Parquet file"));
            }
            return true;
        }
        RunKind::TaskCheck => {
            check_task_plan(dir, at, r);
            return true;
        }
        _ => {}
    }
    let Some(f) = finished_files(kind) else {
        return true;
    };
    let finished = dir.join(f.marker).is_file();
    if finished {
        for file in f.with {
            if !dir.join(file).is_file() {
                r.problems.push(format!(
                    "{at}{file}: missing (a finished {kind} run writes it beside {})",
                    f.marker
                ));
            }
        }
    }
    finished
}

/// A task check keeps its plan.
fn check_task_plan(dir: &Path, at: &str, r: &mut CheckReport) {
    if !dir.join("tasks.jsonl").is_file() {
        r.problems.push(format!("{at}tasks.jsonl: missing"));
    }
}

/// Checks each run in `runs` (relative to `dir`); whether all finished.
fn check_inner(dir: &Path, at: &str, runs: &[PathBuf], r: &mut CheckReport) -> bool {
    let mut all = true;
    for rel in runs {
        let inner = dir.join(rel);
        let name = format!("{at}{}/", rel.display());
        let Some(kind) = run_kind(&inner) else {
            r.problems.push(format!(
                "{name}: not a run (no files a serl command writes)"
            ));
            all = false;
            continue;
        };
        r.inner.push(name.trim_end_matches('/').to_string());
        all &= check_kind(&inner, &name, kind, r);
    }
    all
}

/// The sub-folders of `dir` named `prefix…`, sorted.
fn inner_runs(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = sub_dirs(dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().starts_with(prefix))
        .collect();
    out.sort();
    out
}

/// A study's evolve runs (`kind.rs` walks the folder).
fn study_evolve_runs(dir: &Path) -> Vec<PathBuf> {
    study_runs(dir, &|d: &Path| d.join("evolve.toml").exists())
}

fn has_parquet(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|es| {
        es.flatten().any(|e| {
            let p = e.path();
            p.extension().is_some_and(|x| x == "parquet") || (p.is_dir() && has_parquet(&p))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, f: &str, text: &str) {
        let p = dir.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn a_finished_backtest_misses_a_file_and_an_unreadable_summary_is_named() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), "summary.json", "{}");
        touch(dir.path(), "orders.csv", "");
        touch(dir.path(), "report.html", "");
        let r = check_run(dir.path()).unwrap();
        assert_eq!(r.kind, Some(RunKind::Backtest));
        assert!(r.finished);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(r.problems[0].starts_with("report.md: missing"));
        touch(dir.path(), "report.md", "");
        touch(dir.path(), "summary.json", "{\"pa\": ");
        let r = check_run(dir.path()).unwrap();
        assert!(
            r.problems[0].starts_with("summary.json: "),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn a_walk_forward_checks_each_window_as_a_training() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), "train.toml", "");
        touch(dir.path(), "window-0/train.toml", "");
        touch(dir.path(), "window-0/final.json", "{}");
        touch(dir.path(), "window-1/train.toml", "");
        let r = check_run(dir.path()).unwrap();
        assert_eq!(r.kind, Some(RunKind::WalkForward));
        assert!(!r.finished, "no walk_forward.json yet");
        assert_eq!(r.inner, ["window-0", "window-1"]);
        assert!(
            r.problems
                .iter()
                .any(|p| p.starts_with("window-0/final.bpk: missing")),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn a_missing_path_and_a_folder_serl_did_not_write_are_said_so() {
        let dir = tempfile::tempdir().unwrap();
        let e = check_run(&dir.path().join("nope")).unwrap_err();
        assert!(e.to_string().ends_with("does not exist"), "{e}");
        touch(dir.path(), "notes.txt", "");
        let e = check_run(dir.path()).unwrap_err();
        assert!(e.to_string().contains("is not a serl run folder"), "{e}");
    }
}
