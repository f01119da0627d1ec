//! A program's syntax tree as a public value, and random programs of the
//! typed grammar ([`typed_rules`](crate::typed_rules)) drawn as trees.
//!
//! Tools outside the crate (the random grammar designer) draw programs,
//! change one subtree, recombine two programs and write them back as
//! source; the parser's own tree stays private, so [`Tree`] is its public
//! copy with a printer ([`std::fmt::Display`]) whose output parses back to
//! the same tree. A drawn tree keeps the grammar's parentheses
//! ([`Tree::Paren`]), so that it prints as the very sentence of the
//! grammar it was drawn from.

use std::fmt;

use crate::binop::BinOp;
use crate::compile::UNARY_FNS;
use crate::syntax::{lex, Expr, Node, Parser};
use crate::{CompileError, Limits, VarSet, LARK_DEPTH};

/// The window functions the typed grammar offers, as
/// [`typed_rules`](crate::typed_rules) writes them.
pub const WINDOW_FUNCTIONS: [&str; 6] = ["mean", "std", "ema", "lag", "min_over", "max_over"];

/// A program's syntax tree.
#[derive(Debug, Clone, PartialEq)]
pub enum Tree {
    /// A number (the parser's are never negative).
    Num(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A variable or a `let` name.
    Name(String),
    /// `-x`
    Neg(Box<Tree>),
    /// `!c`
    Not(Box<Tree>),
    /// `a op b`
    Bin(BinOp, Box<Tree>, Box<Tree>),
    /// `f(args)`
    Call(String, Vec<Tree>),
    /// `if c then a else b`
    If(Box<Tree>, Box<Tree>, Box<Tree>),
    /// `let name = value in body`
    Let(String, Box<Tree>, Box<Tree>),
    /// Parentheses as a drawn program has them; the parser drops them and
    /// the printer adds those the precedence needs.
    Paren(Box<Tree>),
}

impl Tree {
    /// The tree of `src`: it lexes and parses within the default
    /// [`Limits`]; names and types are not checked.
    pub fn parse(src: &str) -> Result<Tree, CompileError> {
        let limits = Limits::default();
        let (toks, _) = lex(src)?;
        let e = Parser::new(toks, &limits).program()?;
        Ok(Tree::from(e))
    }

    /// Whether it gives a condition rather than a number (a name is taken
    /// for a number).
    pub fn is_condition(&self) -> bool {
        match self {
            Tree::Bool(_) | Tree::Not(_) => true,
            Tree::Bin(op, _, _) => op.is_condition(),
            Tree::If(_, a, _) => a.is_condition(),
            Tree::Let(_, _, body) | Tree::Paren(body) => body.is_condition(),
            _ => false,
        }
    }

    /// Its direct subtrees, in source order.
    pub fn children(&self) -> Vec<&Tree> {
        match self {
            Tree::Num(_) | Tree::Bool(_) | Tree::Name(_) => Vec::new(),
            Tree::Neg(x) | Tree::Not(x) | Tree::Paren(x) => vec![x],
            Tree::Bin(_, a, b) | Tree::Let(_, a, b) => vec![a, b],
            Tree::Call(_, args) => args.iter().collect(),
            Tree::If(c, a, b) => vec![c, a, b],
        }
    }

    fn children_mut(&mut self) -> Vec<&mut Tree> {
        match self {
            Tree::Num(_) | Tree::Bool(_) | Tree::Name(_) => Vec::new(),
            Tree::Neg(x) | Tree::Not(x) | Tree::Paren(x) => vec![x],
            Tree::Bin(_, a, b) | Tree::Let(_, a, b) => vec![a, b],
            Tree::Call(_, args) => args.iter_mut().collect(),
            Tree::If(c, a, b) => vec![c, a, b],
        }
    }

    /// How many subtrees it has, itself included: the indices of
    /// [`Tree::get`] run from 0 to `size() - 1`, in preorder.
    pub fn size(&self) -> usize {
        1 + self.children().iter().map(|c| c.size()).sum::<usize>()
    }

    /// Subtree `i` in preorder (0 is the tree itself).
    pub fn get(&self, i: usize) -> Option<&Tree> {
        if i == 0 {
            return Some(self);
        }
        let mut i = i - 1;
        for c in self.children() {
            let n = c.size();
            if i < n {
                return c.get(i);
            }
            i -= n;
        }
        None
    }

    /// Subtree `i` in preorder, to change or replace.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Tree> {
        if i == 0 {
            return Some(self);
        }
        let mut i = i - 1;
        for c in self.children_mut() {
            let n = c.size();
            if i < n {
                return c.get_mut(i);
            }
            i -= n;
        }
        None
    }

    /// The preorder indices of the subtrees that any expression of their
    /// type may replace: all but the arguments of a window function,
    /// which must stay a variable and a whole number of steps.
    pub fn places(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.collect_places(0, &mut out);
        out
    }

    fn collect_places(&self, at: usize, out: &mut Vec<usize>) {
        out.push(at);
        if matches!(self, Tree::Call(f, _) if WINDOW_FUNCTIONS.contains(&f.as_str())) {
            return;
        }
        let mut next = at + 1;
        for c in self.children() {
            c.collect_places(next, out);
            next += c.size();
        }
    }

    /// The tree with one random place changed, as an evolutionary
    /// mutation does: half the time (when it has one) a constant moved by
    /// a random factor `exp(N(0, 0.35))` (a zero becomes a draw from
    /// [0, 1)) and rounded to four decimals; else a subtree drawn again by
    /// `draw`, of the same type, at a nesting level below [`LARK_DEPTH`].
    pub fn mutated(&self, draw: &ProgramDraw<'_>, uniform: Uniform<'_>) -> Tree {
        let mut t = self.clone();
        let places = t.places();
        let constants: Vec<usize> = places
            .iter()
            .copied()
            .filter(|&i| matches!(t.get(i), Some(Tree::Num(_))))
            .collect();
        if !constants.is_empty() && uniform() < 0.5 {
            if let Some(Tree::Num(v)) = t.get_mut(constants[below(uniform, constants.len())]) {
                // A standard normal from two uniforms (Box-Muller).
                let z = (-2.0 * (1.0 - uniform()).ln()).sqrt()
                    * (std::f64::consts::TAU * uniform()).cos();
                let x = if *v > 0.0 {
                    *v * (0.35 * z).exp()
                } else {
                    uniform()
                };
                *v = (x * 1e4).round() / 1e4;
            }
            return t;
        }
        let i = places[below(uniform, places.len())];
        let level = below(uniform, LARK_DEPTH);
        let new = match t.get(i).is_some_and(Tree::is_condition) {
            true => draw.condition(level, uniform),
            false => draw.number(level, uniform),
        };
        if let Some(x) = t.get_mut(i) {
            *x = new;
        }
        t
    }

    /// The tree with a random subtree replaced by a random subtree of
    /// `donor` of the same type (number or condition), as an evolutionary
    /// crossover does; `None` when `donor` has none of that type.
    pub fn crossed(&self, donor: &Tree, uniform: Uniform<'_>) -> Option<Tree> {
        let mut t = self.clone();
        let places = t.places();
        let i = places[below(uniform, places.len())];
        let condition = t.get(i)?.is_condition();
        let fits: Vec<usize> = donor
            .places()
            .into_iter()
            .filter(|&j| donor.get(j).is_some_and(|d| d.is_condition() == condition))
            .collect();
        if fits.is_empty() {
            return None;
        }
        *t.get_mut(i)? = donor.get(fits[below(uniform, fits.len())])?.clone();
        Some(t)
    }

    /// How tightly the printed tree binds (as [`BinOp::precedence`]; `let`
    /// and `if` 0, prefix operators 6, atoms 8).
    fn precedence(&self) -> u8 {
        match self {
            Tree::Let(..) | Tree::If(..) => 0,
            Tree::Bin(op, _, _) => op.precedence(),
            Tree::Neg(_) | Tree::Not(_) => 6,
            Tree::Num(v) if *v < 0.0 => 6,
            _ => 8,
        }
    }

    /// Writes the tree, in parentheses when it binds looser than `min`.
    fn write(&self, f: &mut fmt::Formatter<'_>, min: u8) -> fmt::Result {
        if self.precedence() < min {
            write!(f, "(")?;
            self.write(f, 0)?;
            return write!(f, ")");
        }
        match self {
            Tree::Num(v) if !v.is_finite() => write!(f, "1e308"),
            Tree::Num(v) if *v < 0.0 => write!(f, "-{}", -v),
            Tree::Num(v) => write!(f, "{v}"),
            Tree::Bool(b) => write!(f, "{b}"),
            Tree::Name(n) => write!(f, "{n}"),
            // A prefix operator's operand is a power or an atom, as the
            // typed grammar writes it: `-(-x)`, never `--x`.
            Tree::Neg(x) => {
                write!(f, "-")?;
                x.write(f, 7)
            }
            Tree::Not(x) => {
                write!(f, "!")?;
                x.write(f, 7)
            }
            Tree::Bin(op, a, b) => {
                let p = op.precedence();
                // Left-associative chains; a comparison takes two sums; a
                // power's operands are atoms, as the typed grammar has it.
                let (l, r) = match op {
                    BinOp::Pow => (8, 8),
                    _ if op.is_condition() && p == 3 => (4, 4),
                    _ => (p, p + 1),
                };
                a.write(f, l)?;
                write!(f, " {} ", op.symbol())?;
                b.write(f, r)
            }
            Tree::Call(name, args) => {
                write!(f, "{name}(")?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    a.write(f, 0)?;
                }
                write!(f, ")")
            }
            Tree::If(c, a, b) => {
                write!(f, "if ")?;
                c.write(f, 0)?;
                write!(f, " then ")?;
                a.write(f, 0)?;
                write!(f, " else ")?;
                b.write(f, 0)
            }
            Tree::Let(name, v, body) => {
                write!(f, "let {name} = ")?;
                v.write(f, 0)?;
                write!(f, " in ")?;
                body.write(f, 0)
            }
            Tree::Paren(x) => {
                write!(f, "(")?;
                x.write(f, 0)?;
                write!(f, ")")
            }
        }
    }
}

impl fmt::Display for Tree {
    /// The tree as source, with single spaces around binary operators and
    /// the parentheses the precedence needs (and those of [`Tree::Paren`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, 0)
    }
}

impl From<Expr> for Tree {
    fn from(e: Expr) -> Tree {
        let b = |e: Box<Expr>| Box::new(Tree::from(*e));
        match e.node {
            Node::Num(v) => Tree::Num(v),
            Node::Bool(v) => Tree::Bool(v),
            Node::Name(n) => Tree::Name(n),
            Node::Neg(x) => Tree::Neg(b(x)),
            Node::Not(x) => Tree::Not(b(x)),
            Node::Bin(op, x, y) => Tree::Bin(op, b(x), b(y)),
            Node::Call(n, args) => Tree::Call(n, args.into_iter().map(Tree::from).collect()),
            Node::If(c, x, y) => Tree::If(b(c), b(x), b(y)),
            Node::Let(n, x, y) => Tree::Let(n, b(x), b(y)),
        }
    }
}

/// Random programs of the typed grammar over some variables: every
/// program drawn, printed, is a sentence of
/// [`typed_rules`](crate::typed_rules) over the same variables and
/// windows.
///
/// **Temperature.** At every choice point of the grammar (a number or an
/// `if`; how many more terms a sum, product, `&&` or `||` chain gets; a
/// minus or none; a power or none; which atom or condition literal), each
/// alternative has an energy, the number of further sub-expressions it
/// opens beyond the simplest alternative (a variable or number 0, a
/// parenthesis, unary or window call 1, `min`/`max` 2, `clip` 3, an `if`
/// 2, a chain of `k` more terms `k`), and is drawn with probability
/// proportional to `exp(-energy / temperature)`. A low temperature gives
/// short, flat programs (near 0: a lone variable or number); 1 gives a few
/// terms and calls; a high one approaches the grammar's uniform choice,
/// deep and long programs (infinity: uniform). The grammar's nesting
/// bound ([`LARK_DEPTH`]) ends every draw; once a draw holds
/// [`NODE_BUDGET`] nodes every later choice takes its simplest
/// alternative, which keeps it inside [`Limits::max_nodes`] in practice.
#[derive(Debug, Clone)]
pub struct ProgramDraw<'a> {
    vars: &'a [String],
    windows: bool,
    temperature: f64,
}

/// The nodes after which a draw only closes what it opened (half of
/// [`Limits::max_nodes`]).
pub const NODE_BUDGET: usize = 128;

/// The lowest temperature used: below it every choice is already the
/// simplest one.
const MIN_TEMPERATURE: f64 = 0.01;

/// A uniform number in `[0, 1)`, from the caller's generator.
pub type Uniform<'r> = &'r mut dyn FnMut() -> f64;

/// An index below `n` (at least 1), uniformly.
fn below(uniform: Uniform<'_>, n: usize) -> usize {
    ((uniform().clamp(0.0, 1.0) * n as f64) as usize).min(n.saturating_sub(1))
}

/// One draw in progress: the generator and the nodes so far.
struct Drawing<'d, 'a, 'r> {
    spec: &'d ProgramDraw<'a>,
    uniform: Uniform<'r>,
    nodes: usize,
}

/// An atom's alternatives.
#[derive(Clone, Copy)]
enum Atom {
    Number,
    Var,
    Paren,
    Unary,
    MinMax,
    Clip,
    Window,
}

impl<'a> ProgramDraw<'a> {
    /// Draws over `vars`, with the window functions when `windows`, at
    /// `temperature` (NaN is taken as 1, anything under 0.01 as 0.01).
    pub fn new(vars: &'a VarSet, windows: bool, temperature: f64) -> Self {
        let temperature = if temperature.is_nan() {
            1.0
        } else {
            temperature.max(MIN_TEMPERATURE)
        };
        ProgramDraw {
            vars: vars.names(),
            windows,
            temperature,
        }
    }

    /// How many more of something, from 0 to `most`, `k` more drawn with
    /// energy `k` (as a chain's further terms are; JSON lists use it for
    /// their items beyond the fewest).
    pub fn count(&self, most: usize, uniform: Uniform<'_>) -> usize {
        Drawing::new(self, uniform).count(most)
    }

    /// A whole program: a number at the grammar's top level.
    pub fn program(&self, uniform: Uniform<'_>) -> Tree {
        self.number(LARK_DEPTH, uniform)
    }

    /// A number of nesting level `level` (the grammar's `num{level}`; the
    /// top is [`LARK_DEPTH`], 0 has no calls, parentheses or `if`).
    pub fn number(&self, level: usize, uniform: Uniform<'_>) -> Tree {
        Drawing::new(self, uniform).number(level.min(LARK_DEPTH))
    }

    /// A condition of nesting level `level` (the grammar's `cond{level}`).
    pub fn condition(&self, level: usize, uniform: Uniform<'_>) -> Tree {
        Drawing::new(self, uniform).condition(level.min(LARK_DEPTH))
    }
}

impl<'d, 'a, 'r> Drawing<'d, 'a, 'r> {
    fn new(spec: &'d ProgramDraw<'a>, uniform: Uniform<'r>) -> Self {
        Drawing {
            spec,
            uniform,
            nodes: 0,
        }
    }

    fn u(&mut self) -> f64 {
        (self.uniform)().clamp(0.0, 1.0 - f64::EPSILON)
    }

    fn below(&mut self, n: usize) -> usize {
        below(self.uniform, n)
    }

    /// One of `energies`, with probability ∝ exp(-energy / temperature);
    /// past the node budget, one of the lowest.
    fn pick(&mut self, energies: &[f64]) -> usize {
        let lowest = energies.iter().copied().fold(f64::INFINITY, f64::min);
        let t = if self.nodes >= NODE_BUDGET {
            MIN_TEMPERATURE
        } else {
            self.spec.temperature
        };
        let weights: Vec<f64> = energies.iter().map(|e| (-(e - lowest) / t).exp()).collect();
        let mut x = self.u() * weights.iter().sum::<f64>();
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        energies.len() - 1
    }

    fn count(&mut self, most: usize) -> usize {
        let energies: Vec<f64> = (0..=most).map(|k| k as f64).collect();
        self.pick(&energies)
    }

    /// A node made (the parser's count, which parentheses do not add to).
    fn node(&mut self, t: Tree) -> Tree {
        if !matches!(t, Tree::Paren(_)) {
            self.nodes += 1;
        }
        t
    }

    /// `k` more of `item`, `k` drawn with energy `k` up to `most`, joined
    /// left to right by one of `ops`.
    fn chain(
        &mut self,
        most: usize,
        ops: &[BinOp],
        mut item: impl FnMut(&mut Self) -> Tree,
    ) -> Tree {
        let more = self.count(most);
        let mut t = item(self);
        for _ in 0..more {
            let op = ops[self.below(ops.len())];
            let rhs = item(self);
            t = self.node(Tree::Bin(op, Box::new(t), Box::new(rhs)));
        }
        t
    }

    fn number(&mut self, level: usize) -> Tree {
        if level > 0 && self.pick(&[0.0, 2.0]) == 1 {
            let c = self.condition(level - 1);
            let a = self.number(level - 1);
            let b = self.number(level - 1);
            return self.node(Tree::If(Box::new(c), Box::new(a), Box::new(b)));
        }
        self.sum(level)
    }

    fn sum(&mut self, level: usize) -> Tree {
        self.chain(5, &[BinOp::Add, BinOp::Sub], |d| d.product(level))
    }

    fn product(&mut self, level: usize) -> Tree {
        self.chain(5, &[BinOp::Mul, BinOp::Div], |d| d.unary(level))
    }

    fn unary(&mut self, level: usize) -> Tree {
        let p = self.power(level);
        match self.pick(&[0.0, 1.0]) {
            1 => self.node(Tree::Neg(Box::new(p))),
            _ => p,
        }
    }

    fn power(&mut self, level: usize) -> Tree {
        let a = self.atom(level);
        match self.pick(&[0.0, 1.0]) {
            1 => {
                let b = self.atom(level);
                self.node(Tree::Bin(BinOp::Pow, Box::new(a), Box::new(b)))
            }
            _ => a,
        }
    }

    fn atom(&mut self, level: usize) -> Tree {
        let has_vars = !self.spec.vars.is_empty();
        let mut alts: Vec<(Atom, f64)> = vec![(Atom::Number, 0.0)];
        if has_vars {
            alts.push((Atom::Var, 0.0));
        }
        if level > 0 {
            alts.extend([
                (Atom::Paren, 1.0),
                (Atom::Unary, 1.0),
                (Atom::MinMax, 2.0),
                (Atom::Clip, 3.0),
            ]);
            if self.spec.windows && has_vars {
                alts.push((Atom::Window, 1.0));
            }
        }
        let energies: Vec<f64> = alts.iter().map(|a| a.1).collect();
        let inner = level.saturating_sub(1);
        let t = match alts[self.pick(&energies)].0 {
            Atom::Number => Tree::Num(self.constant()),
            Atom::Var => Tree::Name(self.var()),
            Atom::Paren => Tree::Paren(Box::new(self.number(inner))),
            Atom::Unary => {
                let f = UNARY_FNS[self.below(UNARY_FNS.len())];
                Tree::Call(f.into(), vec![self.number(inner)])
            }
            Atom::MinMax => {
                let f = ["min", "max"][self.below(2)];
                Tree::Call(f.into(), vec![self.number(inner), self.number(inner)])
            }
            Atom::Clip => {
                let args = (0..3).map(|_| self.number(inner)).collect();
                Tree::Call("clip".into(), args)
            }
            Atom::Window => {
                let f = WINDOW_FUNCTIONS[self.below(WINDOW_FUNCTIONS.len())];
                let steps = self.window();
                Tree::Call(f.into(), vec![Tree::Name(self.var()), Tree::Num(steps)])
            }
        };
        self.node(t)
    }

    fn var(&mut self) -> String {
        self.spec.vars[self.below(self.spec.vars.len())].clone()
    }

    /// A constant the grammar's `NUMBER` writes (at most four decimals):
    /// a whole number from 1 to 10 one time in three, else a magnitude
    /// log-uniform over 0.01 to 100 with two significant digits.
    fn constant(&mut self) -> f64 {
        if self.u() < 1.0 / 3.0 {
            return 1.0 + self.below(10) as f64;
        }
        let x = 10f64.powf(4.0 * self.u() - 2.0);
        let decimals = (1.0 - x.log10().floor()).clamp(0.0, 4.0);
        let scale = 10f64.powf(decimals);
        (x * scale).round() / scale
    }

    /// A window of 1 to [`Limits::max_window`] steps, log-uniform.
    fn window(&mut self) -> f64 {
        let most = Limits::default().max_window as f64;
        (most.ln() * self.u()).exp().round().clamp(1.0, most)
    }

    fn condition(&mut self, level: usize) -> Tree {
        self.chain(2, &[BinOp::Or], |d| d.conjunction(level))
    }

    fn conjunction(&mut self, level: usize) -> Tree {
        self.chain(2, &[BinOp::And], |d| d.literal(level))
    }

    /// A constant (`true`, `false`, `!true`, `!false`), a comparison of
    /// two sums, and above level 0 a condition in parentheses or negated.
    fn literal(&mut self, level: usize) -> Tree {
        let energies: &[f64] = if level > 0 {
            &[0.0, 0.0, 1.0, 1.0]
        } else {
            &[0.0, 0.0]
        };
        let t = match self.pick(energies) {
            0 => {
                let b = Tree::Bool(self.below(2) == 0);
                if self.below(2) == 0 {
                    b
                } else {
                    self.nodes += 1;
                    Tree::Not(Box::new(b))
                }
            }
            1 => {
                const CMP: [BinOp; 6] = BinOp::COMPARISONS;
                let a = self.sum(level);
                let op = CMP[self.below(CMP.len())];
                let b = self.sum(level);
                Tree::Bin(op, Box::new(a), Box::new(b))
            }
            2 => Tree::Paren(Box::new(self.condition(level - 1))),
            _ => Tree::Not(Box::new(Tree::Paren(Box::new(self.condition(level - 1))))),
        };
        self.node(t)
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
