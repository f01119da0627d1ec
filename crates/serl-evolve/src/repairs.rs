//! Visible repairs: a record of the run directory that is there but cannot
//! be read (cut short, not JSON, wrong fields) is recomputed as a missing
//! one would be, and never silently. Each is named in a warning, with what
//! was wrong, and appended to the run's `repairs.jsonl`, which the report's
//! provenance lists and `serl run check` shows.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file of a run directory that lists its repairs, one JSON per line.
pub const REPAIRS_FILE: &str = "repairs.jsonl";

/// One record that could not be read, and was recomputed (or started
/// over).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repair {
    /// The file, relative to the run directory.
    pub file: String,
    /// What was wrong with it.
    pub problem: String,
    /// When it was found, Unix seconds.
    pub found: i64,
}

impl std::fmt::Display for Repair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.problem)
    }
}

/// Why the text of a JSON record did not read as a `T`, in words.
pub fn problem_of(text: &str, e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    if text.trim().is_empty() {
        return "empty".into();
    }
    match e.classify() {
        Category::Eof => format!("cut short after {} bytes", text.len()),
        Category::Syntax => format!("not JSON ({e})"),
        Category::Data => format!("wrong fields ({e})"),
        Category::Io => format!("unreadable ({e})"),
    }
}

/// Reads the JSON record at `path`: `Ok(None)` when absent, `Err` with
/// what is wrong when it is there but unreadable.
pub fn read_record<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("unreadable ({e})")),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| problem_of(&text, &e))
}

/// Records that `path` could not be read (`problem`) and is being
/// recomputed: a warning, and a line in the run directory's
/// [`REPAIRS_FILE`] (the nearest directory above it holding
/// `evolve.toml`).
pub fn note(path: &Path, problem: &str) {
    tracing::warn!(
        "{}: {problem}; recomputing it (listed in the run's {REPAIRS_FILE})",
        path.display()
    );
    let Some(run) = run_dir_of(path) else {
        return;
    };
    let repair = Repair {
        file: path
            .strip_prefix(&run)
            .unwrap_or(path)
            .display()
            .to_string(),
        problem: problem.to_string(),
        found: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64),
    };
    let Ok(line) = serde_json::to_string(&repair) else {
        return;
    };
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(run.join(REPAIRS_FILE))
        .and_then(|mut f| writeln!(f, "{line}"));
    if let Err(e) = appended {
        tracing::warn!("{}: {e}", run.join(REPAIRS_FILE).display());
    }
}

/// The repairs made in `run_dir` so far, oldest first (a line that is
/// itself cut short is left out).
pub fn read_repairs(run_dir: &Path) -> Vec<Repair> {
    std::fs::read_to_string(run_dir.join(REPAIRS_FILE))
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect()
        })
        .unwrap_or_default()
}

fn run_dir_of(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .find(|d| d.join("evolve.toml").is_file())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Rec {
        score: f64,
    }

    #[test]
    fn an_unreadable_record_says_what_is_wrong_and_an_absent_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        assert_eq!(read_record::<Rec>(&p).unwrap().map(|r| r.score), None);
        let cases = [
            ("", "empty"),
            ("{\"score\": 1.", "cut short after 12 bytes"),
            ("score = 1", "not JSON"),
            ("{\"points\": 1}", "wrong fields"),
        ];
        for (text, expected) in cases {
            std::fs::write(&p, text).unwrap();
            let e = read_record::<Rec>(&p).unwrap_err();
            assert!(e.starts_with(expected), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_repair_is_listed_in_the_run_directory_above_the_record() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("evolve.toml"), "").unwrap();
        let rec = dir.path().join("candidates/it1-c1.json");
        note(&rec, "cut short after 10 bytes");
        let repairs = read_repairs(dir.path());
        assert_eq!(repairs.len(), 1);
        assert_eq!(repairs[0].file, "candidates/it1-c1.json");
        assert_eq!(
            repairs[0].to_string(),
            "candidates/it1-c1.json: cut short after 10 bytes"
        );
    }
}
