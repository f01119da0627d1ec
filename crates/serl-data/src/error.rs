//! Problems found in market data, and the errors that stop a load.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// How bad a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The data was repaired or a row was set aside; the load goes on.
    Warning,
    /// The row or file could not be used. Under [`crate::ErrorPolicy::Fail`]
    /// an error fails the file.
    Error,
}

/// What kind of defect a [`Problem`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The file could not be opened or read.
    Io,
    /// A gzip or zip container is truncated or corrupt.
    Compression,
    /// The file holds no bytes, or only a header.
    Empty,
    /// The header lacks a column the mapping asks for.
    Header,
    /// A cell could not be parsed as a number, date or time.
    BadValue,
    /// A price is zero, negative or not finite.
    NonPositivePrice,
    /// A volume is negative or not finite.
    BadVolume,
    /// A bar traded no shares. Legal, but counted.
    ZeroVolume,
    /// A bar's high is below its low.
    HighBelowLow,
    /// Timestamps go backwards somewhere in the file.
    Unsorted,
    /// Rows identical to an earlier row, dropped.
    DuplicateRows,
    /// Rows sharing a timestamp with an earlier row but holding other values;
    /// the first is kept.
    ConflictingRows,
    /// A LEAN quote file without a trade file for the same day.
    Unpaired,
}

/// One defect, located as precisely as the input allows.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// The file it was found in (the dataset path for problems across
    /// files).
    pub file: PathBuf,
    /// 1-based line in the (decompressed) file, when the defect has one.
    pub line: Option<u64>,
    /// The column, when the defect has one.
    pub field: Option<String>,
    /// What kind of defect.
    pub kind: ProblemKind,
    /// Warning or error; errors are what [`crate::ErrorPolicy`] acts on.
    pub severity: Severity,
    /// How many rows share this defect (1 for a single cell; more for
    /// aggregated warnings such as duplicate rows).
    pub count: u64,
    /// A sentence for people: what is wrong and what was done about it.
    pub message: String,
}

impl Problem {
    pub(crate) fn file_error(file: &std::path::Path, kind: ProblemKind, message: String) -> Self {
        Problem {
            file: file.to_path_buf(),
            line: None,
            field: None,
            kind,
            severity: Severity::Error,
            count: 1,
            message,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        let level = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, ": {level}")?;
        if let Some(field) = &self.field {
            write!(f, " in field `{field}`")?;
        }
        write!(f, ": {}", self.message)?;
        if self.count > 1 {
            write!(f, " ({} rows)", self.count)?;
        }
        Ok(())
    }
}

/// Errors that stop a load as a whole.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The data path does not exist.
    #[error("{path}: no such file or directory")]
    NotFound {
        /// The path asked for.
        path: PathBuf,
    },
    /// The path holds no bar file, or its files yielded no session and no
    /// error (e.g. every bar lay outside the session).
    #[error(
        "{path}: no market data found (looked for *.csv, *.csv.gz, *.parquet, DBN *.dbn and *.dbn.zst, and LEAN *_trade.zip files; bars outside the session, in its time zone, are left out)"
    )]
    NoData {
        /// The path searched.
        path: PathBuf,
    },
    /// A file had an error under [`crate::ErrorPolicy::Fail`], or no session
    /// survived and this was the first error.
    #[error("{problem}")]
    FileFailed {
        /// The first error-severity problem.
        problem: Box<Problem>,
    },
    /// A config file does not parse or validate.
    #[error("{path}: {message}")]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong, naming the field.
        message: String,
    },
    /// A config file or a folder could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
