//! # serl-expr: the expression language
//!
//! serl's own small language: the form in which a designer (a person or a
//! language model) writes rewards, state features and messages.
//!
//! The grammar is the sandbox: there are no loops, no recursion, no
//! strings and no I/O, and a program's size, node count and depth are
//! bounded ([`Limits`]). Division by zero, NaN and overflow are defined:
//! the value is replaced (a division by zero and NaN by 0, ±∞ by ±10¹²)
//! and counted, and the count is reported back to the designer as
//! feedback.
//!
//! ## How the pieces connect
//!
//! 1. **Source.** A program is one expression over numbers, `true`/`false`,
//!    the variables the caller allows, `let ... in`, `if ... then ... else`,
//!    arithmetic, comparisons, logic, the functions `abs sqrt log exp tanh
//!    sign min max clip`, and window functions over a variable's recent
//!    values, `mean std ema lag min_over max_over` ([`WindowKind`]).
//! 2. **Parse.** [`Program::compile`] (or [`Program::compile_with`] and
//!    explicit [`Limits`]) lexes and parses the source, refusing programs
//!    that are too long, too large or nested too deep.
//! 3. **Compile.** The syntax tree is type-checked (numbers vs conditions)
//!    against a whitelist of variables, [`VarSet`], and compiled to a flat
//!    bytecode and, for single steps, a tree of closures. Every mistake is a
//!    [`CompileError`] with a [`Pos`] and, for a misspelt name, a
//!    suggestion.
//! 4. **Program / State.** A [`Program`] is immutable and shareable; the
//!    history its window functions read lives in a [`State`]
//!    ([`Program::new_state`], one per episode), which also counts repaired
//!    values.
//! 5. **Eval.** [`Program::eval`] runs one step on the variables' values
//!    in [`VarSet`] order; [`Program::eval_columns`] runs whole columns at
//!    once. [`Program::constants`] and [`Program::with_constants`] let a
//!    tuner change the numeric literals without touching the rest.
//!
//! For constrained decoding, [`gbnf`] writes the language as a GBNF grammar
//! over a given [`VarSet`] (llama.cpp and compatible servers), and
//! [`json_schema`] wraps it in a JSON schema for structured-output APIs.
//! Every string the grammar derives parses; the checker adds types and
//! bounds. [`Tree`] is a program's syntax tree as a public value (parse,
//! change a subtree, print back), and [`ProgramDraw`] draws random trees
//! of the typed grammar ([`typed_rules`]) at a temperature.
//!
//! ```
//! use serl_expr::{Program, VarSet};
//! let vars = VarSet::new(&["step_pa", "remaining_inv", "time_left"]);
//!
//! // Source -> parse -> compile against the variables.
//! let p = Program::compile("step_pa - 2 * max(remaining_inv - time_left, 0)^2", &vars).unwrap();
//! // A state per episode; one step's values in VarSet order.
//! let mut state = p.new_state();
//! assert_eq!(p.eval(&mut state, &[1.0, 0.5, 0.25]), 1.0 - 2.0 * 0.0625);
//!
//! // Windows read the history kept in the state; repairs are counted.
//! let m = Program::compile("mean(step_pa, 2) / time_left", &vars).unwrap();
//! let mut state = m.new_state();
//! assert_eq!(m.eval(&mut state, &[1.0, 0.0, 1.0]), 1.0);
//! assert_eq!(m.eval(&mut state, &[3.0, 0.0, 0.5]), 4.0);
//! assert_eq!(m.eval(&mut state, &[3.0, 0.0, 0.0]), 0.0); // 3 / 0
//! assert_eq!(state.repaired, 1);
//!
//! // Whole columns at once.
//! let (pa, inv, left) = ([1.0, 2.0], [0.0, 1.0], [1.0, 0.5]);
//! let mut out = [0.0; 2];
//! assert_eq!(p.eval_columns(&[&pa, &inv, &left], &mut out), 0);
//! assert_eq!(out, [1.0, 2.0 - 2.0 * 0.25]);
//!
//! // Mistakes name the place and suggest a fix.
//! let e = Program::compile("step_pa - remaining_inventory", &vars).unwrap_err();
//! assert_eq!(e.to_string(), "line 1, column 11: unknown name `remaining_inventory`; did you mean `remaining_inv`?");
//!
//! // The grammar a constrained decoder can enforce.
//! let g = serl_expr::gbnf(&vars);
//! assert!(g.starts_with("root") && g.contains("\"remaining_inv\""));
//! ```

#![deny(missing_docs)]

mod binop;
mod closures;
mod compile;
mod grammar;
mod ops;
mod syntax;
mod terms;
mod tree;

pub use binop::BinOp;
pub use compile::{Program, State, WindowKind};
pub use grammar::{
    gbnf, gbnf_with, json_schema, lark, lark_rules, typed_rules, Dialect, LARK_DEPTH,
};
pub use tree::{ProgramDraw, Tree, Uniform, NODE_BUDGET, WINDOW_FUNCTIONS};

/// Whether `src` is a sentence of the language: it lexes and parses
/// within the default [`Limits`]; names, types and windows are not
/// checked ([`Program::compile`] does that). Grammar tests use it to tell
/// a grammar that writes malformed programs from one that writes
/// ill-typed ones.
pub fn check_syntax(src: &str) -> Result<(), CompileError> {
    let limits = Limits::default();
    let (toks, _) = syntax::lex(src)?;
    syntax::Parser::new(toks, &limits).program().map(|_| ())
}

/// A place in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in bytes from the line's start.
    pub col: u32,
}

/// Why a program does not compile.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {}, column {}: {message}{}", pos.line, pos.col, suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
pub struct CompileError {
    /// Where the mistake is.
    pub pos: Pos,
    /// What is wrong, in words for the designer.
    pub message: String,
    /// The known name closest to a misspelt one, if any is close enough.
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
    /// Longest source, in bytes (default 4096).
    pub max_source: usize,
    /// Most syntax-tree nodes (default 256).
    pub max_nodes: usize,
    /// Deepest nesting of expressions and prefix operators (default 24).
    pub max_depth: usize,
    /// Longest window a window function may look back, in steps
    /// (default 64).
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
    /// The variables named, in this order.
    pub fn new(names: &[&str]) -> Self {
        VarSet {
            names: names.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Like [`VarSet::new`], taking owned names.
    pub fn from_names(names: Vec<String>) -> Self {
        VarSet { names }
    }

    /// The names, in value order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Where `name`'s value goes in the slice passed to
    /// [`Program::eval`], if it is a variable.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// How many variables there are.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are no variables.
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
