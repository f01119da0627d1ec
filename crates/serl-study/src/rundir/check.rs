//! The parts of `serl run check` every run shares (every record
//! readable) and an evolve run's own (every output its plan promises
//! present, the data it read unchanged, the repairs it has had); the
//! other kinds' checks are in `whole.rs`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serl_evolve::repairs::{problem_of, read_record, read_repairs, Repair};

use super::kind::RunKind;
use crate::config::{read_toml, EvolveFile};
use crate::error::Result;

/// What a check of a run directory found.
#[derive(Debug, Default, Serialize)]
pub struct CheckReport {
    /// What wrote the run (its record's kind, or the kind its files show).
    pub kind: Option<RunKind>,
    /// The runs inside it that were checked too (a study's evolve runs,
    /// a walk-forward's windows, relative paths).
    pub inner: Vec<String>,
    /// Records read (JSON files and JSON-lines files).
    pub records: usize,
    /// Outputs of the run's task plan checked.
    pub planned: usize,
    /// Whether the run has finished (its report is written).
    pub finished: bool,
    /// What is wrong, one line each (`file: what`); empty for a whole run.
    pub problems: Vec<String>,
    /// Records that were unreadable earlier and recomputed.
    pub repairs: Vec<Repair>,
}

impl CheckReport {
    /// Whether nothing is wrong.
    pub fn whole(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Files a finished evolve run always writes.
const FINISHED: [&str; 4] = [
    "report.md",
    "costs.json",
    "test/summary.json",
    "test/orders.csv",
];

/// The data's fingerprint, recorded when the run starts.
pub const FINGERPRINTS_FILE: &str = "fingerprints.json";

/// What a run read from outside itself, fingerprinted when it started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fingerprints {
    /// The bar data: its files' names and sizes.
    pub data: String,
}

/// The checks of an evolve run `dir` beyond its records' readability:
/// its config, its task plan's outputs, a finished run's files and its
/// data. `at` names `dir` in the problems (empty for the run checked).
pub(super) fn check_evolve(dir: &Path, at: &str, r: &mut CheckReport) {
    let finished = dir.join("report.html").is_file();
    let mut own = CheckReport {
        finished,
        ..CheckReport::default()
    };
    let cfg = match read_toml::<EvolveFile>(&dir.join("evolve.toml")) {
        Ok(c) => Some(c),
        Err(e) => {
            own.problems.push(format!("evolve.toml: {}", e.chain()));
            None
        }
    };
    check_plan(dir, &mut own);
    if finished {
        for f in FINISHED {
            if !dir.join(f).is_file() {
                own.problems
                    .push(format!("{f}: missing (a finished run writes it)"));
            }
        }
    }
    if let Some(cfg) = cfg {
        check_fingerprints(dir, &cfg, &mut own);
    }
    r.planned += own.planned;
    r.repairs.extend(read_repairs(dir));
    r.problems
        .extend(own.problems.into_iter().map(|p| format!("{at}{p}")));
}

/// A record of the run that does not read as JSON.
pub(super) struct Unreadable {
    /// The file, relative to the run directory.
    pub(super) file: String,
    /// What is wrong with it (a JSON-lines file's: `line N: ...`).
    pub(super) problem: String,
    /// A `.jsonl` log, whose readable lines are kept.
    lines: bool,
}

/// Every `.json` and `.jsonl` below `run` (the prompt templates and the
/// records set aside excepted) that does not read as JSON; `records`
/// counts those read.
pub(super) fn unreadable_records(run: &Path, records: &mut usize) -> Vec<Unreadable> {
    let mut out = Vec::new();
    walk_records(run, run, records, &mut out);
    out
}

fn walk_records(run: &Path, at: &Path, records: &mut usize, out: &mut Vec<Unreadable>) {
    let Ok(entries) = std::fs::read_dir(at) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        let file = p.strip_prefix(run).unwrap_or(&p).display().to_string();
        if p.is_dir() {
            if file != "prompts" && file != "repaired" {
                walk_records(run, &p, records, out);
            }
            continue;
        }
        let (problem, lines) = match p.extension().and_then(|e| e.to_str()) {
            Some("json") => (read_record::<serde_json::Value>(&p).err(), false),
            Some("jsonl") if file != serl_evolve::repairs::REPAIRS_FILE => {
                (jsonl_problem(&p), true)
            }
            _ => continue,
        };
        *records += 1;
        if let Some(problem) = problem {
            out.push(Unreadable {
                file,
                problem,
                lines,
            });
        }
    }
}

fn jsonl_problem(p: &Path) -> Option<String> {
    let text = match std::fs::read_to_string(p) {
        Ok(t) => t,
        Err(e) => return Some(format!("unreadable ({e})")),
    };
    text.lines().enumerate().find_map(|(i, l)| {
        serde_json::from_str::<serde_json::Value>(l)
            .err()
            .map(|e| format!("line {}: {}", i + 1, problem_of(l, &e)))
    })
}

/// A finished run's task plan (`tasks.jsonl`) promises every task's
/// output.
fn check_plan(dir: &Path, r: &mut CheckReport) {
    let Ok(text) = std::fs::read_to_string(dir.join("tasks.jsonl")) else {
        return;
    };
    for line in text.lines() {
        let Ok(task) = serde_json::from_str::<serde_json::Value>(line) else {
            continue; // named by check_records
        };
        let Some(output) = task["output"].as_str() else {
            continue;
        };
        r.planned += 1;
        if r.finished && !dir.join(output).is_file() {
            r.problems.push(format!(
                "{output}: missing (task {} of the plan, kind {}, writes it)",
                task["index"], task["kind"]
            ));
        }
    }
}

fn check_fingerprints(dir: &Path, cfg: &EvolveFile, r: &mut CheckReport) {
    let data = cfg.data_path();
    match changed_data(dir, &data) {
        Some((Some(now), recorded)) => r.problems.push(format!(
            "{FINGERPRINTS_FILE}: the data at {} is not the data the run started with (fingerprint {now}, recorded {recorded})",
            data.display(),
        )),
        Some((None, _)) => r.problems.push(format!(
            "{FINGERPRINTS_FILE}: the run's data {} is not there",
            data.display()
        )),
        None => {}
    }
}

/// How the data at `data` differs from what run `dir` recorded when it
/// began: `(now, recorded)`, `now` being `None` where nothing is there;
/// `None` when it is the same data, or the run recorded no fingerprint.
pub fn changed_data(dir: &Path, data: &Path) -> Option<(Option<String>, String)> {
    let recorded = read_record::<Fingerprints>(&dir.join(FINGERPRINTS_FILE))
        .ok()
        .flatten()?
        .data;
    let now = data_fingerprint(data);
    (now.as_ref() != Some(&recorded)).then_some((now, recorded))
}

/// A fingerprint of the bar data at `path`: its files' names (relative)
/// and sizes, hashed (FNV-1a); cheap on a large directory, and it changes
/// when a file is added, removed, renamed or rewritten to another size.
pub fn data_fingerprint(path: &Path) -> Option<String> {
    let mut files = Vec::new();
    list_files(path, path, &mut files).ok()?;
    files.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, size) in &files {
        for b in name.bytes().chain(size.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    Some(format!("{} files, {h:016x}", files.len()))
}

fn list_files(root: &Path, at: &Path, out: &mut Vec<(String, u64)>) -> std::io::Result<()> {
    let meta = std::fs::metadata(at)?;
    if meta.is_file() {
        let name = at.strip_prefix(root).unwrap_or(at).display().to_string();
        out.push((name, meta.len()));
        return Ok(());
    }
    for e in std::fs::read_dir(at)? {
        list_files(root, &e?.path(), out)?;
    }
    Ok(())
}

/// Before a run resumes: every JSON record of `dir` that cannot be read
/// is named in a warning, listed in the run's repairs, and moved aside
/// into `RUN/repaired/` (nothing is deleted), so the run recomputes it
/// as it would a missing one.
pub fn set_aside_unreadable(dir: &Path) -> Result<Vec<Repair>> {
    let before = read_repairs(dir).len();
    // A JSON-lines log keeps its readable lines.
    for u in unreadable_records(dir, &mut 0)
        .into_iter()
        .filter(|u| !u.lines)
    {
        let from = dir.join(&u.file);
        let aside = dir.join("repaired").join(&u.file);
        if let Some(parent) = aside.parent() {
            std::fs::create_dir_all(parent)?;
        }
        serl_evolve::repairs::note(&from, &u.problem);
        std::fs::rename(&from, &aside)?;
    }
    Ok(read_repairs(dir).split_off(before))
}

/// Records the run's fingerprints when it starts (kept if already there).
pub fn record_fingerprints(dir: &Path, cfg: &EvolveFile) -> Result<()> {
    let path = dir.join(FINGERPRINTS_FILE);
    if path.exists() {
        return Ok(());
    }
    let Some(data) = data_fingerprint(&cfg.data_path()) else {
        return Ok(()); // the data's own load names what is missing
    };
    let text = serde_json::to_string_pretty(&Fingerprints { data })?;
    serl_report::write_atomic(&path, text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_fingerprint_changes_with_a_file_and_not_with_the_directory() {
        let a = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(a.path().join("AAPL")).unwrap();
        std::fs::write(a.path().join("AAPL/2018.csv"), "1,2,3\n").unwrap();
        let fa = data_fingerprint(a.path()).unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(b.path().join("AAPL")).unwrap();
        std::fs::write(b.path().join("AAPL/2018.csv"), "4,5,6\n").unwrap();
        assert_eq!(
            data_fingerprint(b.path()).unwrap(),
            fa,
            "same names and sizes"
        );
        std::fs::write(b.path().join("AAPL/2019.csv"), "7\n").unwrap();
        assert_ne!(data_fingerprint(b.path()).unwrap(), fa);
        assert!(data_fingerprint(&b.path().join("none")).is_none());
    }
}
