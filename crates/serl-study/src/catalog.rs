//! What `serl data inspect` shows of a dataset's [`Catalog`] (its
//! overview, short histories, sessions missing minutes, problems and
//! symbols, as titled tables), and what `serl data validate` finds
//! ([`Validation`]); the binary only draws them.

use std::path::PathBuf;

use serde::Serialize;
use serl_data::{Catalog, Dataset, ErrorPolicy, Problem, Severity};
use serl_report::Table;

/// A table under a line that says what it holds (none for the first).
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// The line above the table, empty where the table speaks for itself.
    pub title: String,
    /// The rows.
    pub table: Table,
}

/// The catalog's sections: the overview, then the short histories, the
/// sessions missing minutes (ten worst, or `all`), the problems (where
/// there are any) and the symbols (twenty, or `all`).
pub fn catalog_sections(cat: &Catalog, all: bool) -> Vec<Section> {
    let mut sections = vec![overview(cat)];
    sections.extend(short_histories(cat));
    sections.extend(missing_minutes(cat, all));
    sections.extend(problems(cat));
    sections.push(symbols(cat, all));
    sections
}

/// Files, symbols, sessions, rows, gaps and the splits.
fn overview(cat: &Catalog) -> Section {
    let range = match (cat.first_date, cat.last_date) {
        (Some(a), Some(b)) => format!("{a} .. {b}"),
        _ => "-".into(),
    };
    let split = |d: &[chrono::NaiveDate]| match (d.first(), d.last()) {
        (Some(a), Some(b)) => format!("{} dates ({a} .. {b})", d.len()),
        _ => "0 dates".into(),
    };
    let mut t = Table::new(["dataset", cat.path.as_str()]);
    let files = format!("{} ({} skipped)", cat.files, cat.files_skipped);
    t.row(["files".to_string(), files]);
    t.row(["symbols".to_string(), cat.symbols.to_string()]);
    let sessions = format!("{} over {} dates", cat.symbol_sessions, cat.dates);
    t.row(["symbol-sessions".to_string(), sessions]);
    t.row(["date range".to_string(), range]);
    t.row(["rows".to_string(), cat.rows.to_string()]);
    let outside = format!("{} (dropped)", cat.bars_outside_session);
    t.row(["bars outside session".to_string(), outside]);
    let missing = format!(
        "{} sessions, {} minutes missing, {} filled",
        cat.sessions_with_missing_minutes, cat.missing_minutes, cat.filled_minutes
    );
    t.row(["sessions missing minutes".to_string(), missing]);
    t.row(["train split".to_string(), split(&cat.splits.train)]);
    t.row([
        "validation split".to_string(),
        split(&cat.splits.validation),
    ]);
    t.row(["test split".to_string(), split(&cat.splits.test)]);
    Section {
        title: String::new(),
        table: t,
    }
}

/// Symbols with fewer sessions than the dataset has dates.
fn short_histories(cat: &Catalog) -> Option<Section> {
    if cat.short_histories.is_empty() {
        return None;
    }
    let mut t = Table::new(["symbol", "sessions", "first", "last"]);
    for s in &cat.short_histories {
        t.row([
            s.symbol.clone(),
            s.sessions.to_string(),
            s.first_date.to_string(),
            s.last_date.to_string(),
        ]);
    }
    Some(Section {
        title: format!(
            "Short histories (fewer sessions than the dataset's {} dates):",
            cat.dates
        ),
        table: t,
    })
}

/// Sessions with missing minutes, most gaps first (ten, or all).
fn missing_minutes(cat: &Catalog, all: bool) -> Option<Section> {
    if cat.missing_minute_sessions.is_empty() {
        return None;
    }
    let mut worst = cat.missing_minute_sessions.clone();
    worst.sort_by(|a, b| b.missing.cmp(&a.missing).then(a.symbol.cmp(&b.symbol)));
    let shown = if all {
        worst.len()
    } else {
        worst.len().min(10)
    };
    let more = if shown < worst.len() {
        ", --all for every one"
    } else {
        ""
    };
    let mut t = Table::new(["symbol", "date", "missing", "filled"]);
    for s in &worst[..shown] {
        t.row([
            s.symbol.clone(),
            s.date.to_string(),
            s.missing.to_string(),
            s.filled.to_string(),
        ]);
    }
    Some(Section {
        title: format!(
            "Sessions with missing minutes: {} (most gaps first{more}):",
            worst.len()
        ),
        table: t,
    })
}

/// Every kind of problem met, with its counts.
fn problems(cat: &Catalog) -> Option<Section> {
    if cat.problems.is_empty() {
        return None;
    }
    let mut t = Table::new(["kind", "severity", "reports", "rows"]);
    for p in &cat.problems {
        t.row([
            format!("{:?}", p.kind),
            format!("{:?}", p.severity).to_lowercase(),
            p.reports.to_string(),
            p.rows.to_string(),
        ]);
    }
    Some(Section {
        title: "Problems (`serl data validate` lists each one):".into(),
        table: t,
    })
}

/// One row per symbol (twenty, or all).
fn symbols(cat: &Catalog, all: bool) -> Section {
    let n = cat.per_symbol.len();
    let shown = if all { n } else { n.min(20) };
    let more = if shown < n {
        ", first 20; --all for every one"
    } else {
        ""
    };
    let mut t = Table::new([
        "symbol",
        "sessions",
        "rows",
        "first",
        "last",
        "sessions missing minutes",
        "quotes",
    ]);
    for s in &cat.per_symbol[..shown] {
        t.row([
            s.symbol.clone(),
            s.sessions.to_string(),
            s.rows.to_string(),
            s.first_date.to_string(),
            s.last_date.to_string(),
            s.sessions_with_missing_minutes.to_string(),
            if s.has_quotes { "yes" } else { "no" }.to_string(),
        ]);
    }
    Section {
        title: format!("Symbols ({n}{more}):"),
        table: t,
    }
}

/// What `serl data validate` finds: the files that fail under the error
/// policy and every problem (its JSON, as `--json` prints it).
#[derive(Debug, Serialize)]
pub struct Validation {
    /// No file fails under the policy, and some session loaded.
    pub ok: bool,
    /// Files read.
    pub files: usize,
    /// Files with an error, under the `fail` policy (none under `skip`).
    pub failed_files: Vec<PathBuf>,
    /// Every problem met.
    pub problems: Vec<Problem>,
    #[serde(skip)]
    sessions: usize,
    #[serde(skip)]
    policy: ErrorPolicy,
}

impl Validation {
    /// The findings of a dataset scanned under `policy`.
    pub fn of(ds: &Dataset, policy: ErrorPolicy) -> Self {
        let failed_files: Vec<PathBuf> = ds
            .files
            .iter()
            .filter(|f| policy == ErrorPolicy::Fail && f.failed)
            .map(|f| f.path.clone())
            .collect();
        Validation {
            ok: failed_files.is_empty() && !ds.sessions.is_empty(),
            files: ds.files.len(),
            failed_files,
            problems: ds.problems.clone(),
            sessions: ds.sessions.len(),
            policy,
        }
    }

    /// A line per problem, errors first (fifty, or `all`), then the sums.
    pub fn lines(&self, all: bool) -> Vec<String> {
        let mut problems: Vec<&Problem> = self.problems.iter().collect();
        problems.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then(a.file.cmp(&b.file))
                .then(a.line.cmp(&b.line))
        });
        let shown = if all {
            problems.len()
        } else {
            problems.len().min(50)
        };
        let mut lines: Vec<String> = problems[..shown].iter().map(|p| p.to_string()).collect();
        if shown < problems.len() {
            let more = problems.len() - shown;
            lines.push(format!("... and {more} more (--all to show them)"));
        }
        let errors = self
            .problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count();
        let policy = match self.policy {
            ErrorPolicy::Fail => "fail",
            ErrorPolicy::Skip => "skip",
        };
        lines.push(format!(
            "{} files, {} sessions, {} problems ({errors} errors); {} files fail under policy `{policy}`",
            self.files,
            self.sessions,
            self.problems.len(),
            self.failed_files.len(),
        ));
        if self.sessions == 0 {
            lines.push("no session could be loaded".into());
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_sample_is_cataloged_overview_first_and_symbols_last() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/lean");
        let cat = Catalog::scan(&root, &serl_data::DataConfig::default()).unwrap();
        let sections = catalog_sections(&cat, false);
        let first = &sections[0];
        assert!(first.title.is_empty());
        assert!(first.table.markdown().contains("| train split |"));
        let last = sections.last().unwrap();
        assert!(last.title.starts_with("Symbols ("), "{}", last.title);
        assert_eq!(last.table.len(), cat.per_symbol.len().min(20));
    }
}
