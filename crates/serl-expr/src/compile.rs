//! Type checking, code generation and evaluation.
//!
//! The step evaluator is here ([`Program::eval`], which runs the closure
//! tree of [`crate::closures`]); the column evaluator is in `columns`.

mod columns;

use super::binop::BinOp;
use super::syntax::{lex, Expr, Node, Parser};
use super::{suggest, CompileError, Limits, Pos, VarSet};
use crate::ops::{repair, Op, BIG};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Num,
    Bool,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::Num => "a number",
            Ty::Bool => "a condition",
        }
    }
}

/// Window functions over a variable's recent values (the current step
/// included). Until k values have been seen, a window covers those there
/// are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// `mean(x, k)`: mean of the last k values.
    Mean,
    /// `std(x, k)`: population standard deviation of the last k values.
    Std,
    /// `ema(x, k)`: exponential moving average with weight 2/(k+1) on the
    /// newest value, over the whole episode, starting at the first value.
    Ema,
    /// `lag(x, k)`: the value k steps before the current one (0 until
    /// there is one).
    Lag,
    /// `min_over(x, k)`: smallest of the last k values.
    Min,
    /// `max_over(x, k)`: largest of the last k values.
    Max,
}

const WINDOW_FNS: [(&str, WindowKind); 6] = [
    ("mean", WindowKind::Mean),
    ("std", WindowKind::Std),
    ("ema", WindowKind::Ema),
    ("lag", WindowKind::Lag),
    ("min_over", WindowKind::Min),
    ("max_over", WindowKind::Max),
];

pub(crate) const UNARY_FNS: [&str; 6] = ["abs", "sqrt", "log", "exp", "tanh", "sign"];

/// Every function name, for suggestions and the grammar.
pub(crate) fn function_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = UNARY_FNS.to_vec();
    v.extend(["min", "max", "clip"]);
    v.extend(WINDOW_FNS.iter().map(|w| w.0));
    v
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct WindowSlot {
    var: u16,
    kind: WindowKind,
    k: usize,
}

/// A compiled program.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    source: String,
    tree: crate::closures::Tree,
    pub(crate) var_set: VarSet,
    /// Byte span and value of every numeric literal, in source order.
    literals: Vec<(usize, usize, f64)>,
    code: Vec<Op>,
    windows: Vec<WindowSlot>,
    locals: usize,
    stack: usize,
    vars: usize,
    nodes: usize,
}

/// A program's per-episode state: window histories, scratch space, and
/// the count of values it had to repair.
#[derive(Debug, Clone)]
pub struct State {
    history: Vec<Ring>,
    ema: Vec<Option<f64>>,
    locals: Vec<f64>,
    /// NaN, ±∞ and division-by-zero results replaced so far.
    pub repaired: u64,
}

#[derive(Debug, Clone)]
struct Ring {
    buf: Vec<f64>,
    next: usize,
    len: usize,
}

impl Ring {
    fn new(cap: usize) -> Self {
        Ring {
            buf: vec![0.0; cap.max(1)],
            next: 0,
            len: 0,
        }
    }
    fn push(&mut self, v: f64) {
        self.buf[self.next] = v;
        self.next = (self.next + 1) % self.buf.len();
        self.len = (self.len + 1).min(self.buf.len());
    }
    /// The value `back` steps before the newest (0 = newest).
    fn back(&self, back: usize) -> Option<f64> {
        (back < self.len)
            .then(|| self.buf[(self.next + self.buf.len() - 1 - back) % self.buf.len()])
    }
    fn values(&self) -> impl Iterator<Item = f64> + '_ {
        (0..self.len).filter_map(|b| self.back(b))
    }
}

/// Most window-function calls one program may make.
const MAX_WINDOWS: usize = 32;

/// Deepest evaluation stack a program may need; programs that would need
/// more are refused at compile time.
const STACK: usize = 64;

struct Checker<'a> {
    vars: &'a VarSet,
    code: Vec<Op>,
    windows: Vec<WindowSlot>,
    scopes: Vec<(String, u16, Ty)>,
    locals: usize,
    depth: usize,
    max_depth: usize,
    limits: Limits,
}

impl Checker<'_> {
    fn push(&mut self, op: Op, delta: isize) {
        self.code.push(op);
        self.depth = (self.depth as isize + delta) as usize;
        self.max_depth = self.max_depth.max(self.depth);
    }

    fn unknown(&self, name: &str, pos: Pos) -> CompileError {
        let locals = self.scopes.iter().map(|s| s.0.as_str());
        let vars = self.vars.names().iter().map(String::as_str);
        let funcs = function_names().into_iter();
        let mut e = CompileError::at(pos, format!("unknown name `{name}`"));
        e.suggestion = suggest(name, locals.chain(vars).chain(funcs));
        if e.suggestion.is_none() {
            e.message.push_str(&format!(
                " (the variables are: {})",
                self.vars.names().join(", ")
            ));
        }
        e
    }

    fn expect(&self, e: &Expr, got: Ty, want: Ty, what: &str) -> Result<(), CompileError> {
        if got == want {
            Ok(())
        } else {
            Err(CompileError::at(
                e.pos,
                format!("{what} must be {}, not {}", want.name(), got.name()),
            ))
        }
    }

    /// `a op b`: both operands of the type `op` takes, and the type it
    /// gives.
    fn binary(&mut self, op: BinOp, a: &Expr, b: &Expr) -> Result<Ty, CompileError> {
        let ta = self.expr(a)?;
        let tb = self.expr(b)?;
        let (want, out, code) = match op {
            BinOp::Add => (Ty::Num, Ty::Num, Op::Add),
            BinOp::Sub => (Ty::Num, Ty::Num, Op::Sub),
            BinOp::Mul => (Ty::Num, Ty::Num, Op::Mul),
            BinOp::Div => (Ty::Num, Ty::Num, Op::Div),
            BinOp::Pow => (Ty::Num, Ty::Num, Op::Pow),
            BinOp::Lt => (Ty::Num, Ty::Bool, Op::Lt),
            BinOp::Le => (Ty::Num, Ty::Bool, Op::Le),
            BinOp::Gt => (Ty::Num, Ty::Bool, Op::Gt),
            BinOp::Ge => (Ty::Num, Ty::Bool, Op::Ge),
            BinOp::Eq => (Ty::Num, Ty::Bool, Op::Eq),
            BinOp::Ne => (Ty::Num, Ty::Bool, Op::Ne),
            BinOp::And => (Ty::Bool, Ty::Bool, Op::And),
            BinOp::Or => (Ty::Bool, Ty::Bool, Op::Or),
        };
        let what = format!("each side of `{}`", op.symbol());
        self.expect(a, ta, want, &what)?;
        self.expect(b, tb, want, &what)?;
        match (code, self.code.last()) {
            // x ^ 2 and the like: powi, far cheaper than powf.
            (Op::Pow, Some(&Op::Const(c))) if c.fract() == 0.0 && c.abs() <= 16.0 => {
                self.code.pop();
                self.depth -= 1;
                self.push(Op::Powi(c as i32), 0);
            }
            _ => self.push(code, -1),
        }
        Ok(out)
    }

    fn expr(&mut self, e: &Expr) -> Result<Ty, CompileError> {
        match &e.node {
            Node::Num(v) => {
                self.push(Op::Const(*v), 1);
                Ok(Ty::Num)
            }
            Node::Bool(b) => {
                self.push(Op::Const(f64::from(u8::from(*b))), 1);
                Ok(Ty::Bool)
            }
            Node::Name(n) => {
                if let Some(&(_, slot, ty)) = self.scopes.iter().rev().find(|s| &s.0 == n) {
                    self.push(Op::Local(slot), 1);
                    return Ok(ty);
                }
                match self.vars.index(n) {
                    Some(i) => {
                        self.push(Op::Var(i as u16), 1);
                        Ok(Ty::Num)
                    }
                    None if function_names().contains(&n.as_str()) => Err(CompileError::at(
                        e.pos,
                        format!("`{n}` is a function: call it as `{n}(...)`"),
                    )),
                    None => Err(self.unknown(n, e.pos)),
                }
            }
            Node::Neg(x) => {
                let t = self.expr(x)?;
                self.expect(x, t, Ty::Num, "the operand of `-`")?;
                self.push(Op::Neg, 0);
                Ok(Ty::Num)
            }
            Node::Not(x) => {
                let t = self.expr(x)?;
                self.expect(x, t, Ty::Bool, "the operand of `!`")?;
                self.push(Op::Not, 0);
                Ok(Ty::Bool)
            }
            Node::Bin(op, a, b) => self.binary(*op, a, b),
            Node::If(c, a, b) => {
                let tc = self.expr(c)?;
                self.expect(c, tc, Ty::Bool, "the condition of `if`")?;
                let ta = self.expr(a)?;
                let tb = self.expr(b)?;
                if ta != tb {
                    return Err(CompileError::at(
                        b.pos,
                        format!(
                            "the branches of `if` differ: `then` gives {}, `else` gives {}",
                            ta.name(),
                            tb.name()
                        ),
                    ));
                }
                self.push(Op::Select, -2);
                Ok(ta)
            }
            Node::Let(name, value, body) => {
                if self.vars.index(name).is_some() || function_names().contains(&name.as_str()) {
                    return Err(CompileError::at(e.pos, format!("`let {name}` would hide the variable or function `{name}`; choose another name")));
                }
                let t = self.expr(value)?;
                let slot = self.locals as u16;
                self.locals += 1;
                self.push(Op::SetLocal(slot), -1);
                self.scopes.push((name.clone(), slot, t));
                let tb = self.expr(body)?;
                self.scopes.pop();
                self.push(Op::EndLet(slot), 0);
                Ok(tb)
            }
            Node::Call(f, args) => self.call(f, args, e.pos),
        }
    }

    fn call(&mut self, f: &str, args: &[Expr], pos: Pos) -> Result<Ty, CompileError> {
        let arity = |n: usize| -> Result<(), CompileError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(CompileError::at(
                    pos,
                    format!(
                        "`{f}` takes {n} argument{}, not {}",
                        if n == 1 { "" } else { "s" },
                        args.len()
                    ),
                ))
            }
        };
        if let Some(&(_, kind)) = WINDOW_FNS.iter().find(|w| w.0 == f) {
            arity(2)?;
            let var = match &args[0].node {
                Node::Name(n) => self.vars.index(n).ok_or_else(|| {
                    if self.scopes.iter().any(|s| &s.0 == n) {
                        CompileError::at(args[0].pos, format!("`{f}` looks back over a variable's history; `{n}` is a `let` name, not a variable"))
                    } else {
                        self.unknown(n, args[0].pos)
                    }
                })?,
                _ => {
                    return Err(CompileError::at(
                        args[0].pos,
                        format!("the first argument of `{f}` must be a variable name (its history is what the window reads)"),
                    ))
                }
            };
            let k = match args[1].node {
                Node::Num(v)
                    if v.fract() == 0.0 && v >= 1.0 && v <= self.limits.max_window as f64 =>
                {
                    v as usize
                }
                _ => {
                    return Err(CompileError::at(
                        args[1].pos,
                        format!(
                            "the window of `{f}` must be a whole number from 1 to {}",
                            self.limits.max_window
                        ),
                    ))
                }
            };
            let slot = self.windows.len() as u16;
            self.windows.push(WindowSlot {
                var: var as u16,
                kind,
                k,
            });
            self.push(Op::Window(slot), 1);
            return Ok(Ty::Num);
        }
        let (n, op) = match f {
            "abs" => (1, Op::Abs),
            "sqrt" => (1, Op::Sqrt),
            "log" => (1, Op::Log),
            "exp" => (1, Op::Exp),
            "tanh" => (1, Op::Tanh),
            "sign" => (1, Op::Sign),
            "min" => (2, Op::Min),
            "max" => (2, Op::Max),
            "clip" => (3, Op::Clip),
            _ => {
                let mut e = CompileError::at(pos, format!("unknown function `{f}`"));
                e.suggestion = suggest(f, function_names().into_iter());
                if e.suggestion.is_none() {
                    e.message.push_str(&format!(
                        " (the functions are: {})",
                        function_names().join(", ")
                    ));
                }
                return Err(e);
            }
        };
        arity(n)?;
        for a in args {
            let t = self.expr(a)?;
            self.expect(a, t, Ty::Num, &format!("an argument of `{f}`"))?;
        }
        self.push(op, 1 - n as isize);
        Ok(Ty::Num)
    }
}

impl Program {
    /// Compiles with the default [`Limits`].
    pub fn compile(source: &str, vars: &VarSet) -> Result<Program, CompileError> {
        Self::compile_with(source, vars, Limits::default())
    }

    /// Parses `source`, checks it against `vars` and compiles it, refusing
    /// programs beyond `limits`.
    pub fn compile_with(
        source: &str,
        vars: &VarSet,
        limits: Limits,
    ) -> Result<Program, CompileError> {
        if source.len() > limits.max_source {
            return Err(CompileError::at(
                Pos { line: 1, col: 1 },
                format!(
                    "the program is {} bytes long; at most {}",
                    source.len(),
                    limits.max_source
                ),
            ));
        }
        if source.trim().is_empty() {
            return Err(CompileError::at(
                Pos { line: 1, col: 1 },
                "the program is empty",
            ));
        }
        let (toks, literals) = lex(source)?;
        let mut parser = Parser::new(toks, &limits);
        let ast = parser.program()?;
        let mut c = Checker {
            vars,
            code: Vec::new(),
            windows: Vec::new(),
            scopes: Vec::new(),
            locals: 0,
            depth: 0,
            max_depth: 0,
            limits,
        };
        let t = c.expr(&ast)?;
        if c.max_depth > STACK {
            return Err(CompileError::at(ast.pos, format!("the program needs an evaluation stack deeper than {STACK}; split it with `let`")));
        }
        if t != Ty::Num {
            return Err(CompileError::at(ast.pos, "the program must give a number, not a condition (wrap it in `if ... then 1 else 0`)"));
        }
        Ok(Program {
            tree: crate::closures::build(&c.code),
            source: source.to_string(),
            var_set: vars.clone(),
            literals,
            code: c.code,
            windows: c.windows,
            locals: c.locals,
            stack: c.max_depth.max(1),
            vars: vars.len(),
            nodes: parser.nodes,
        })
    }

    /// The source text as compiled.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Size of the syntax tree, in nodes (what [`Limits::max_nodes`]
    /// bounds).
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Whether the program reads any history (and so must be evaluated in
    /// time order).
    pub fn has_windows(&self) -> bool {
        !self.windows.is_empty()
    }

    /// The variables the program reads (directly or through a window), as
    /// indices into its [`VarSet`], ascending and each once.
    pub fn variables(&self) -> Vec<usize> {
        let direct = self.code.iter().filter_map(|op| match op {
            Op::Var(i) => Some(*i as usize),
            _ => None,
        });
        let windowed = self.windows.iter().map(|w| w.var as usize);
        let mut v: Vec<usize> = direct.chain(windowed).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Every numeric literal, in source order: what low-level tuning adjusts.
    pub fn constants(&self) -> Vec<f64> {
        self.literals.iter().map(|l| l.2).collect()
    }

    /// A fresh state (empty histories, nothing repaired) for a new
    /// episode.
    pub fn new_state(&self) -> State {
        State {
            history: self
                .windows
                .iter()
                .map(|w| {
                    Ring::new(if w.kind == WindowKind::Lag {
                        w.k + 1
                    } else {
                        w.k
                    })
                })
                .collect(),
            ema: vec![None; self.windows.len()],
            locals: vec![0.0; self.locals],
            repaired: 0,
        }
    }

    /// Evaluates one step. `vars` holds the variables' values in
    /// [`VarSet`] order; windows see this step's values as the newest.
    pub fn eval(&self, st: &mut State, vars: &[f64]) -> f64 {
        debug_assert!(vars.len() >= self.vars);
        for (i, w) in self.windows.iter().enumerate() {
            let v = vars[w.var as usize];
            st.history[i].push(v);
            if w.kind == WindowKind::Ema {
                let a = 2.0 / (w.k as f64 + 1.0);
                st.ema[i] = Some(match st.ema[i] {
                    Some(e) => e + a * (v - e),
                    None => v,
                });
            }
        }
        let mut windows = [0f64; MAX_WINDOWS];
        if !self.windows.is_empty() {
            for (i, w) in self.windows.iter().enumerate() {
                windows[i] = window_value(*w, &st.history[i], st.ema[i], &mut st.repaired);
            }
        }
        let mut frame = crate::closures::Frame {
            vars,
            locals: &mut st.locals,
            windows: &windows[..self.windows.len()],
            repaired: &mut st.repaired,
        };
        let v = (self.tree.0)(&mut frame);
        repair(v, &mut st.repaired)
    }

    /// The same program with its numeric literals replaced, in the order
    /// [`Program::constants`] lists them; the rest of the source is kept as
    /// written.
    pub fn with_constants(&self, values: &[f64]) -> Result<Program, CompileError> {
        if values.len() != self.literals.len() {
            return Err(CompileError::at(
                Pos { line: 1, col: 1 },
                format!(
                    "{} constants given for {} literals",
                    values.len(),
                    self.literals.len()
                ),
            ));
        }
        let mut out = String::with_capacity(self.source.len() + 8 * values.len());
        let mut at = 0;
        for (&(start, end, _), v) in self.literals.iter().zip(values) {
            out.push_str(&self.source[at..start]);
            if *v < 0.0 {
                out.push_str(&format!("({v})"));
            } else {
                out.push_str(&format!("{v}"));
            }
            at = end;
        }
        out.push_str(&self.source[at..]);
        Program::compile(&out, &self.var_set)
    }
}

fn window_value(w: WindowSlot, h: &Ring, ema: Option<f64>, repaired: &mut u64) -> f64 {
    let n = h.len.max(1) as f64;
    match w.kind {
        WindowKind::Lag => h.back(w.k).unwrap_or(0.0),
        WindowKind::Ema => ema.unwrap_or(0.0),
        WindowKind::Mean => h.values().sum::<f64>() / n,
        WindowKind::Std => {
            let m = h.values().sum::<f64>() / n;
            repair(
                (h.values().map(|v| (v - m) * (v - m)).sum::<f64>() / n).sqrt(),
                repaired,
            )
        }
        WindowKind::Min => h.values().fold(f64::INFINITY, f64::min).min(BIG),
        WindowKind::Max => h.values().fold(f64::NEG_INFINITY, f64::max).max(-BIG),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> VarSet {
        VarSet::new(&["x", "y", "remaining_inv"])
    }

    fn run(src: &str, rows: &[[f64; 3]]) -> Vec<f64> {
        let p = Program::compile(src, &vars()).unwrap_or_else(|e| panic!("{src}: {e}"));
        let mut st = p.new_state();
        rows.iter().map(|r| p.eval(&mut st, r)).collect()
    }

    #[test]
    fn arithmetic_follows_the_usual_precedence() {
        assert_eq!(
            run("1 + 2 * 3 ^ 2 - -4 / 2", &[[0.0; 3]]),
            vec![1.0 + 18.0 + 2.0]
        );
        assert_eq!(run("2 ^ 3 ^ 2", &[[0.0; 3]]), vec![512.0]);
        assert_eq!(run("-x ^ 2", &[[3.0, 0.0, 0.0]]), vec![-9.0]);
    }

    #[test]
    fn arithmetic_with_constants_keeps_signs_and_order() {
        assert_eq!(
            run("x * -2 + 3 - y / 4", &[[5.0, 8.0, 0.0]]),
            vec![-10.0 + 3.0 - 2.0]
        );
        assert_eq!(run("2 - x", &[[5.0, 0.0, 0.0]]), vec![-3.0]);
        assert_eq!(run("-(3) * x + 1 * 2", &[[2.0, 0.0, 0.0]]), vec![-4.0]);
        assert_eq!(run("let a = 2 in a * x - 1", &[[4.0, 0.0, 0.0]]), vec![7.0]);
    }

    #[test]
    fn conditions_lets_and_functions() {
        let src =
            "let d = x - y in if d > 0 && !(y == 1) then clip(d, 0, 1) else sign(d) * sqrt(abs(d))";
        assert_eq!(
            run(src, &[[5.0, 2.0, 0.0], [0.0, 4.0, 0.0]]),
            vec![1.0, -2.0]
        );
        assert_eq!(
            run("max(min(x, y), tanh(0)) + log(exp(2))", &[[3.0, -1.0, 0.0]]),
            vec![2.0]
        );
    }

    #[test]
    fn window_functions_read_the_history_including_now() {
        let rows: Vec<[f64; 3]> = (1..=4).map(|i| [i as f64, 0.0, 0.0]).collect();
        assert_eq!(run("mean(x, 2)", &rows), vec![1.0, 1.5, 2.5, 3.5]);
        assert_eq!(run("lag(x, 1)", &rows), vec![0.0, 1.0, 2.0, 3.0]);
        assert_eq!(
            run("max_over(x, 3) - min_over(x, 3)", &rows),
            vec![0.0, 1.0, 2.0, 2.0]
        );
        assert_eq!(run("std(x, 2)", &rows), vec![0.0, 0.5, 0.5, 0.5]);
        let ema = run("ema(x, 3)", &rows);
        assert_eq!(ema[0], 1.0);
        assert!((ema[1] - 1.5).abs() < 1e-12);
    }

    #[test]
    fn division_by_zero_and_nan_are_repaired_and_counted() {
        let p = Program::compile("x / y + sqrt(y - 1) + log(y)", &vars()).unwrap();
        let mut st = p.new_state();
        assert_eq!(p.eval(&mut st, &[1.0, 0.0, 0.0]), 0.0 + 0.0 - BIG);
        assert_eq!(st.repaired, 3);
    }

    #[test]
    fn errors_name_the_place_and_suggest_a_fix() {
        let e = Program::compile("x +\n  remaining_inventory", &vars()).unwrap_err();
        assert_eq!(e.pos, Pos { line: 2, col: 3 });
        assert_eq!(e.suggestion.as_deref(), Some("remaining_inv"));
        let e = Program::compile("meen(x, 3)", &vars()).unwrap_err();
        assert_eq!(e.suggestion.as_deref(), Some("mean"));
        for (src, needle) in [
            (
                "if x then 1 else 0",
                "condition of `if` must be a condition",
            ),
            ("x > 1", "must give a number"),
            ("if x > 1 then 1", "needs an `else`"),
            ("mean(x + 1, 3)", "must be a variable name"),
            ("mean(x, 1000)", "whole number from 1 to 64"),
            ("clip(x, 1)", "takes 3 arguments"),
            ("import os", "expected the end of the program"),
            ("x; y", "expected the end"),
            ("\"x\"", "no strings"),
            ("for i in x: y", "no loops"),
            ("x ? 1 : 0", "if c then a else b"),
            ("def f(x): return x", "no loops"),
            ("open('/etc/passwd')", "no strings"),
            ("__import__(x)", "unknown function"),
            ("", "empty"),
            ("let x = 1 in x", "would hide"),
        ] {
            let e = Program::compile(src, &vars()).unwrap_err().to_string();
            assert!(e.contains(needle), "{src}: {e}");
        }
    }

    #[test]
    fn size_node_and_depth_bounds_hold() {
        let deep = format!("{}x{}", "(".repeat(100), ")".repeat(100));
        assert!(Program::compile(&deep, &vars())
            .unwrap_err()
            .message
            .contains("deeper"));
        let long = vec!["x"; 300].join(" + ");
        assert!(Program::compile(&long, &vars())
            .unwrap_err()
            .message
            .contains("nodes"));
        let huge = "1".repeat(5000);
        assert!(Program::compile(&huge, &vars())
            .unwrap_err()
            .message
            .contains("bytes"));
        let negs = format!("{}x", "-".repeat(100));
        assert!(Program::compile(&negs, &vars()).is_err());
    }

    #[test]
    fn column_evaluation_matches_step_evaluation() {
        let src =
            "let d = x - y in if d > 0 then d / remaining_inv else clip(d * 2, -1, 1) + x ^ 0.5";
        let p = Program::compile(src, &vars()).unwrap();
        let n = 1000;
        let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin() * 3.0).collect();
        let y: Vec<f64> = (0..n).map(|i| (i as f64 * 0.11).cos()).collect();
        let r: Vec<f64> = (0..n).map(|i| (i % 7) as f64).collect();
        let mut out = vec![0.0; n];
        p.eval_columns(&[&x, &y, &r], &mut out);
        let mut st = p.new_state();
        for i in 0..n {
            let v = p.eval(&mut st, &[x[i], y[i], r[i]]);
            assert_eq!(v, out[i], "row {i}");
        }
    }

    #[test]
    fn constants_can_be_tuned_without_recompiling() {
        let p = Program::compile("2 * x + 0.5", &vars()).unwrap();
        assert_eq!(p.constants(), vec![2.0, 0.5]);
        let q = p.with_constants(&[3.0, -1.0]).unwrap();
        assert_eq!(q.source(), "3 * x + (-1)");
        assert_eq!(q.eval(&mut q.new_state(), &[1.0, 0.0, 0.0]), 2.0);
        let r = Program::compile("x ^ 2 + 0.5", &vars()).unwrap();
        assert_eq!(r.constants(), vec![2.0, 0.5]);
        assert_eq!(r.eval(&mut r.new_state(), &[3.0, 0.0, 0.0]), 9.5);
    }
}
