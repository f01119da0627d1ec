//! # serl-expr: the expression language
//!
//! serl's own small language: the form in which a designer writes
//! rewards, state features and messages.
//!
//! The grammar is the sandbox: there are no loops, no recursion, no
//! strings and no I/O, and a program's size, node count and depth are
//! bounded. A program is parsed and type-checked once against a whitelist
//! of variables ([`VarSet`]), compiled to a flat, branch-free bytecode,
//! and then evaluated one step at a time ([`Program::eval`]) or over whole
//! columns ([`Program::eval_columns`]). Division by zero, NaN and overflow
//! are defined: the value is replaced (NaN by 0, ±∞ by ±10¹²) and counted,
//! and the count is reported back to the designer as feedback.
//!
//! ```
//! use serl_expr::{Program, VarSet};
//! let vars = VarSet::new(&["step_pa", "remaining_inv", "time_left"]);
//! let p = Program::compile("step_pa - 2 * max(remaining_inv - time_left, 0)^2", &vars).unwrap();
//! let mut state = p.new_state();
//! assert_eq!(p.eval(&mut state, &[1.0, 0.5, 0.25]), 1.0 - 2.0 * 0.0625);
//!
//! let e = Program::compile("step_pa - remaining_inventory", &vars).unwrap_err();
//! assert_eq!(e.to_string(), "line 1, column 11: unknown name `remaining_inventory`; did you mean `remaining_inv`?");
//! ```

mod closures;
mod compile;
pub mod grammar;
mod ops;
mod syntax;

pub use compile::{Program, State, WindowKind};

/// A place in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

/// Why a program does not compile.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {}, column {}: {message}{}", pos.line, pos.col, suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
pub struct CompileError {
    pub pos: Pos,
    pub message: String,
    pub suggestion: Option<String>,
}

impl CompileError {
    pub(crate) fn at(pos: Pos, message: impl Into<String>) -> Self {
        CompileError {
            pos,
            message: message.into(),
            suggestion: None,
        }
    }
}

/// Bounds on what a program may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_source: usize,
    pub max_nodes: usize,
    pub max_depth: usize,
    /// Longest window a window function may look back.
    pub max_window: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_source: 4096,
            max_nodes: 256,
            max_depth: 24,
            max_window: 64,
        }
    }
}

/// The variables a program may read, in the order their values are passed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VarSet {
    names: Vec<String>,
}

impl VarSet {
    pub fn new(names: &[&str]) -> Self {
        VarSet {
            names: names.iter().map(|s| s.to_string()).collect(),
        }
    }

    pub fn from_names(names: Vec<String>) -> Self {
        VarSet { names }
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Edit distance, for "did you mean" suggestions.
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest of `candidates` to `name`, if it is close enough to be a
/// likely typo (or `name` starts with it, as in `remaining_inventory`).
pub(crate) fn suggest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    candidates
        .map(|c| {
            let d = distance(name, c);
            let prefix = name.starts_with(c) || c.starts_with(name);
            (if prefix { d.min(2) } else { d }, c)
        })
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.to_string())
}
