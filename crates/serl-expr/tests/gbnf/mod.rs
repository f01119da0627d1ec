//! A small GBNF toolkit for the grammar that `serl_expr::gbnf`
//! exports: a reader for its rule lines, a recognizer (is a string
//! derivable?) and a seeded, depth-limited random generator.
//!
//! The reader and the recognizer are general for the GBNF subset the
//! grammar uses (`name ::= alternatives` lines, continuation lines that
//! start with whitespace, `"literals"`, `[classes]`, `( groups )`, rule
//! references and the `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}` operators);
//! anything else panics, so a change to the grammar's notation is noticed.
//! [`Grammar::sample`] draws from any such grammar. The generator walks the
//! same rules, but steers its choices by the language's types and `let`
//! scopes (see [`Generator`]): the grammar is untyped and context-free, the
//! checker is neither.
//!
//! Shared with `crates/serl-design/tests/hostile.rs` through `#[path]`.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// What one element of a sequence matches.
#[derive(Debug, Clone, PartialEq)]
pub enum Atom {
    /// A `"literal"`.
    Lit(String),
    /// A `[class]` of characters, as inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// A reference to a rule.
    Ref(String),
    /// A `( group )` of alternatives.
    Group(Vec<Seq>),
}

/// An element with its repetition: `min..=max` times (`max` `None`: any).
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub atom: Atom,
    pub min: usize,
    pub max: Option<usize>,
}

/// A sequence of elements: one alternative.
pub type Seq = Vec<Item>;

/// A grammar: every rule's alternatives.
#[derive(Debug, Clone)]
pub struct Grammar {
    pub rules: BTreeMap<String, Vec<Seq>>,
}

impl Grammar {
    /// Reads GBNF text: `name ::= body` lines; a line that starts with
    /// whitespace continues the rule above it.
    pub fn parse(text: &str) -> Grammar {
        let mut bodies: Vec<(String, String)> = Vec::new();
        for line in text.lines() {
            if line.trim().is_empty() {
                continue;
            }
            assert!(
                !line.trim_start().starts_with('#'),
                "comments are not handled: {line}"
            );
            if line.starts_with([' ', '\t']) {
                let last = bodies
                    .last_mut()
                    .unwrap_or_else(|| panic!("a continuation line before any rule: {line}"));
                last.1.push(' ');
                last.1.push_str(line.trim());
                continue;
            }
            let (name, body) = line
                .split_once("::=")
                .unwrap_or_else(|| panic!("not a rule line: {line}"));
            bodies.push((name.trim().to_string(), body.trim().to_string()));
        }
        let mut rules = BTreeMap::new();
        for (name, body) in bodies {
            let mut p = BodyParser {
                s: body.chars().collect(),
                i: 0,
            };
            let alts = p.alternatives();
            assert!(
                p.i == p.s.len(),
                "rule {name}: unexpected `{}`",
                p.s[p.i..].iter().collect::<String>()
            );
            assert!(
                rules.insert(name.clone(), alts).is_none(),
                "rule {name} defined twice"
            );
        }
        let g = Grammar { rules };
        for (name, alts) in &g.rules {
            let mut refs = Vec::new();
            for seq in alts {
                collect_refs(seq, &mut refs);
            }
            for r in refs {
                assert!(
                    g.rules.contains_key(&r),
                    "rule {name} refers to {r}, which is not defined"
                );
            }
        }
        assert!(g.rules.contains_key("root"), "no root rule");
        g
    }

    /// Every literal the grammar contains.
    pub fn literals(&self) -> BTreeSet<String> {
        fn walk(seq: &Seq, out: &mut BTreeSet<String>) {
            for item in seq {
                match &item.atom {
                    Atom::Lit(s) => {
                        out.insert(s.clone());
                    }
                    Atom::Group(alts) => alts.iter().for_each(|a| walk(a, out)),
                    _ => {}
                }
            }
        }
        let mut out = BTreeSet::new();
        for alts in self.rules.values() {
            alts.iter().for_each(|a| walk(a, &mut out));
        }
        out
    }

    /// Whether `root` derives exactly `s`.
    pub fn derives(&self, s: &str) -> bool {
        // Deeply nested inputs recurse deeply: give the recognizer room.
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .stack_size(256 << 20)
                .spawn_scoped(scope, || {
                    let chars: Vec<char> = s.chars().collect();
                    let mut r = Recognizer {
                        g: self,
                        s: &chars,
                        memo: HashMap::new(),
                        active: HashSet::new(),
                    };
                    r.rule("root", 0).contains(&chars.len())
                })
                .expect("the recognizer's thread starts")
                .join()
                .expect("the recognizer does not panic")
        })
    }
}

impl Grammar {
    /// A string drawn at random from `root`: alternatives, repetition
    /// counts (up to 3 past their minimum when unbounded) and class
    /// characters uniform; past `depth` nested rules, or once the string
    /// is `length` characters long, only the choices that end soonest, so
    /// every draw ends and stays short. Negated classes give a letter or a
    /// digit they do not exclude.
    pub fn sample(&self, rng: &mut Rng, depth: usize, length: usize) -> String {
        let heights = self.heights();
        let mut out = String::new();
        Sampler {
            g: self,
            rng,
            heights: &heights,
            depth,
            length,
        }
        .rule("root", 0, &mut out);
        out
    }

    /// The fewest nested rules each rule needs to derive a string.
    fn heights(&self) -> HashMap<String, usize> {
        let mut h: HashMap<String, usize> = HashMap::new();
        loop {
            let mut changed = false;
            for (name, alts) in &self.rules {
                let best = alts.iter().filter_map(|a| seq_height(a, &h)).min();
                if let Some(b) = best {
                    if h.get(name).is_none_or(|&old| b < old) {
                        h.insert(name.clone(), b);
                        changed = true;
                    }
                }
            }
            if !changed {
                return h;
            }
        }
    }
}

fn seq_height(seq: &Seq, h: &HashMap<String, usize>) -> Option<usize> {
    let mut most = 0;
    for item in seq.iter().filter(|i| i.min > 0) {
        most = most.max(atom_height(&item.atom, h)?);
    }
    Some(most)
}

fn atom_height(atom: &Atom, h: &HashMap<String, usize>) -> Option<usize> {
    match atom {
        Atom::Lit(_) | Atom::Class { .. } => Some(0),
        Atom::Ref(r) => h.get(r).map(|x| x + 1),
        Atom::Group(alts) => alts.iter().filter_map(|a| seq_height(a, h)).min(),
    }
}

struct Sampler<'a> {
    g: &'a Grammar,
    rng: &'a mut Rng,
    heights: &'a HashMap<String, usize>,
    depth: usize,
    length: usize,
}

impl Sampler<'_> {
    fn rule(&mut self, name: &str, d: usize, out: &mut String) {
        let alts = &self.g.rules[name];
        let i = self.choose(alts, d, out.len());
        self.seq(&alts[i], d + 1, out);
    }

    fn free(&self, d: usize, written: usize) -> bool {
        d < self.depth && written < self.length
    }

    /// An alternative: any while shallow, one that ends soonest when deep.
    fn choose(&mut self, alts: &[Seq], d: usize, written: usize) -> usize {
        let hs: Vec<Option<usize>> = alts.iter().map(|a| seq_height(a, self.heights)).collect();
        let allowed: Vec<usize> = if self.free(d, written) {
            (0..alts.len()).filter(|&i| hs[i].is_some()).collect()
        } else {
            let best = hs.iter().flatten().min().copied();
            (0..alts.len()).filter(|&i| hs[i] == best).collect()
        };
        allowed[self.rng.below(allowed.len())]
    }

    fn seq(&mut self, seq: &Seq, d: usize, out: &mut String) {
        for item in seq {
            let mut n = item.min;
            let cap = item.max.unwrap_or(item.min + 3);
            if self.free(d, out.len()) && cap > item.min {
                n += self.rng.below(cap - item.min + 1);
            }
            for _ in 0..n {
                self.atom(&item.atom, d, out);
            }
        }
    }

    fn atom(&mut self, atom: &Atom, d: usize, out: &mut String) {
        match atom {
            Atom::Lit(l) => out.push_str(l),
            Atom::Class {
                negated: false,
                ranges,
            } => {
                let (lo, hi) = ranges[self.rng.below(ranges.len())];
                let c = lo as u32 + self.rng.below(hi as usize - lo as usize + 1) as u32;
                out.push(char::from_u32(c).expect("a class character"));
            }
            Atom::Class {
                negated: true,
                ranges,
            } => {
                let free: Vec<char> = ('a'..='z')
                    .chain('0'..='9')
                    .filter(|c| !ranges.iter().any(|&(lo, hi)| lo <= *c && *c <= hi))
                    .collect();
                out.push(free[self.rng.below(free.len())]);
            }
            Atom::Ref(r) => self.rule(r, d, out),
            Atom::Group(alts) => {
                let i = self.choose(alts, d, out.len());
                self.seq(&alts[i], d, out);
            }
        }
    }
}

fn collect_refs(seq: &Seq, out: &mut Vec<String>) {
    for item in seq {
        match &item.atom {
            Atom::Ref(r) => out.push(r.clone()),
            Atom::Group(alts) => alts.iter().for_each(|a| collect_refs(a, out)),
            _ => {}
        }
    }
}

struct BodyParser {
    s: Vec<char>,
    i: usize,
}

impl BodyParser {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.i += 1;
        }
    }

    fn alternatives(&mut self) -> Vec<Seq> {
        let mut alts = vec![self.seq()];
        while self.peek() == Some('|') {
            self.i += 1;
            alts.push(self.seq());
        }
        alts
    }

    fn seq(&mut self) -> Seq {
        let mut seq = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None | Some('|') | Some(')') => break,
                _ => {}
            }
            let atom = self.atom();
            let (min, max) = match self.peek() {
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('?') => (0, Some(1)),
                Some('{') => self.counts(),
                _ => (1, Some(1)),
            };
            if self.peek().is_some_and(|c| "*+?".contains(c)) {
                self.i += 1;
            }
            seq.push(Item { atom, min, max });
        }
        assert!(!seq.is_empty(), "an empty alternative");
        seq
    }

    /// `{m}`, `{m,}` or `{m,n}`, read past.
    fn counts(&mut self) -> (usize, Option<usize>) {
        let close = self.s[self.i..]
            .iter()
            .position(|&c| c == '}')
            .expect("an unclosed repetition");
        let text: String = self.s[self.i + 1..self.i + close].iter().collect();
        self.i += close + 1;
        let number = |t: &str| t.trim().parse::<usize>().expect("a repetition count");
        match text.split_once(',') {
            None => (number(&text), Some(number(&text))),
            Some((m, n)) if n.trim().is_empty() => (number(m), None),
            Some((m, n)) => (number(m), Some(number(n))),
        }
    }

    /// One character of a literal or class, escapes decoded.
    fn char(&mut self) -> char {
        let c = self.peek().expect("unterminated literal or class");
        self.i += 1;
        if c != '\\' {
            return c;
        }
        let e = self.peek().expect("a dangling escape");
        self.i += 1;
        match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '\\' | '"' | '[' | ']' | '-' | '/' => e,
            'x' => {
                let hex: String = self.s[self.i..self.i + 2].iter().collect();
                self.i += 2;
                char::from_u32(u32::from_str_radix(&hex, 16).expect("two hex digits"))
                    .expect("a character")
            }
            _ => panic!("escape \\{e} is not handled"),
        }
    }

    fn atom(&mut self) -> Atom {
        match self.peek().expect("an element") {
            '"' => {
                self.i += 1;
                let mut s = String::new();
                while self.peek() != Some('"') {
                    s.push(self.char());
                }
                self.i += 1;
                assert!(!s.is_empty(), "an empty literal");
                Atom::Lit(s)
            }
            '[' => {
                self.i += 1;
                let negated = self.peek() == Some('^');
                if negated {
                    self.i += 1;
                }
                let mut ranges = Vec::new();
                while self.peek() != Some(']') {
                    let lo = self.char();
                    let hi = if self.peek() == Some('-') && self.s.get(self.i + 1) != Some(&']') {
                        self.i += 1;
                        self.char()
                    } else {
                        lo
                    };
                    assert!(lo <= hi, "an empty range {lo}-{hi}");
                    ranges.push((lo, hi));
                }
                self.i += 1;
                assert!(!ranges.is_empty(), "an empty class");
                Atom::Class { negated, ranges }
            }
            '(' => {
                self.i += 1;
                let alts = self.alternatives();
                assert_eq!(self.peek(), Some(')'), "an unclosed group");
                self.i += 1;
                Atom::Group(alts)
            }
            c if c.is_ascii_alphanumeric() || c == '_' || c == '-' => {
                let start = self.i;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    self.i += 1;
                }
                Atom::Ref(self.s[start..self.i].iter().collect())
            }
            c => panic!("unexpected `{c}` in a rule body"),
        }
    }
}

/// Every end position of every derivation from a start position, memoized
/// per (rule, position): a complete recognizer for grammars without left
/// recursion (which it detects and refuses).
struct Recognizer<'g, 's> {
    g: &'g Grammar,
    s: &'s [char],
    memo: HashMap<(&'g str, usize), BTreeSet<usize>>,
    active: HashSet<(&'g str, usize)>,
}

impl<'g> Recognizer<'g, '_> {
    fn rule(&mut self, name: &'g str, pos: usize) -> BTreeSet<usize> {
        if let Some(ends) = self.memo.get(&(name, pos)) {
            return ends.clone();
        }
        assert!(
            self.active.insert((name, pos)),
            "rule {name} is left-recursive"
        );
        let (name, alts) = self.g.rules.get_key_value(name).expect("a defined rule");
        let mut ends = BTreeSet::new();
        for seq in alts {
            ends.extend(self.seq(seq, pos));
        }
        self.active.remove(&(name.as_str(), pos));
        self.memo.insert((name.as_str(), pos), ends.clone());
        ends
    }

    fn seq(&mut self, seq: &'g [Item], pos: usize) -> BTreeSet<usize> {
        let mut front = BTreeSet::from([pos]);
        for item in seq {
            let mut next = BTreeSet::new();
            for &p in &front {
                next.extend(self.item(item, p));
            }
            front = next;
            if front.is_empty() {
                break;
            }
        }
        front
    }

    fn item(&mut self, item: &'g Item, pos: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::new();
        if item.min == 0 {
            out.insert(pos);
        }
        let mut front = BTreeSet::from([pos]);
        let mut seen = BTreeSet::from([pos]);
        let mut k = 0;
        while !front.is_empty() && item.max.is_none_or(|m| k < m) {
            let mut next = BTreeSet::new();
            for &p in &front {
                next.extend(self.atom(&item.atom, p));
            }
            k += 1;
            if k >= item.min {
                out.extend(next.iter().copied());
                // Past the minimum, a position already reached cannot lead
                // anywhere new (and an element that matches nothing would
                // loop forever).
                next.retain(|p| seen.insert(*p));
            }
            front = next;
        }
        out
    }

    fn atom(&mut self, atom: &'g Atom, pos: usize) -> BTreeSet<usize> {
        match atom {
            Atom::Lit(lit) => {
                let n = lit.chars().count();
                let here = self.s.get(pos..pos + n);
                if here.is_some_and(|h| h.iter().copied().eq(lit.chars())) {
                    BTreeSet::from([pos + n])
                } else {
                    BTreeSet::new()
                }
            }
            Atom::Class { negated, ranges } => match self.s.get(pos) {
                Some(&c) if ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated => {
                    BTreeSet::from([pos + 1])
                }
                _ => BTreeSet::new(),
            },
            Atom::Ref(name) => self.rule(name, pos),
            Atom::Group(alts) => {
                let mut ends = BTreeSet::new();
                for seq in alts {
                    ends.extend(self.seq(seq, pos));
                }
                ends
            }
        }
    }
}

/// The language's two types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Num,
    Bool,
}

/// SplitMix64: a seeded, dependency-free random source.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Random programs derived from the grammar's rules.
///
/// Every string comes from a derivation of `root`: alternatives, groups,
/// repetitions, literals and class characters are all taken from the
/// parsed rules. Where the grammar allows strings that the checker
/// refuses for reasons a context-free grammar of this shape does not say,
/// the generator steers its choices, and only there:
///
/// - types: the grammar does not tell numbers from conditions (`true + 1`,
///   `if 1 then ...`, a program that is a comparison); the generator asks
///   each typed rule for a number or a condition and picks alternatives,
///   operators (`-` or `!`) and repetition counts that give it. (A
///   grammar could split the two for everything but `let` names, whose
///   type is the type of their value.)
/// - scopes: `local ::= "v_" [a-z0-9_]*` is any such name, but a name must
///   be bound by an enclosing `let` (context-sensitive); the generator
///   reads only bound names, with their bound type.
/// - bounds: `window ::= [1-9] [0-9]?` allows 1 to 99, the checker at most
///   `Limits::max_window` (64 by default, configurable at compile time,
///   while the grammar is fixed); windows above it are drawn again. The
///   node, depth, stack and size bounds are kept by generating small
///   programs (the generator counts the parser's nodes and depth).
pub struct Generator<'g> {
    g: &'g Grammar,
    pub rng: Rng,
    max_window: usize,
    /// The parser's syntax-tree nodes in the program so far.
    pub nodes: usize,
    /// The parser's nesting depth (expressions and prefix operators).
    depth: usize,
    /// `let` names in scope, innermost last.
    locals: Vec<(String, Ty)>,
    /// (rule, alternative) pairs taken, for coverage.
    pub taken: BTreeSet<(String, usize)>,
    /// Literals emitted, for coverage.
    pub emitted: BTreeSet<String>,
}

/// Past this nesting depth or node count, every choice is the shortest.
const MAX_DEPTH: usize = 7;
const NODE_BUDGET: usize = 60;

/// Kinds of the alternatives of `atom`, recognised by their first element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtomAlt {
    Number,
    True,
    False,
    Var,
    Local,
    Call,
    Paren,
}

fn atom_alt(seq: &Seq) -> AtomAlt {
    match &seq[0].atom {
        Atom::Ref(r) if r == "number" => AtomAlt::Number,
        Atom::Lit(l) if l == "true" => AtomAlt::True,
        Atom::Lit(l) if l == "false" => AtomAlt::False,
        Atom::Ref(r) if r == "var" => AtomAlt::Var,
        Atom::Ref(r) if r == "local" => AtomAlt::Local,
        Atom::Ref(r) if r == "call" => AtomAlt::Call,
        Atom::Lit(l) if l == "(" => AtomAlt::Paren,
        other => panic!("the generator does not know atom alternative {other:?}"),
    }
}

fn first_lit(seq: &Seq) -> Option<&str> {
    match &seq[0].atom {
        Atom::Lit(l) => Some(l),
        _ => None,
    }
}

/// Whether an item is an operator group (`( ws "op" ws operand )*` or `?`).
fn is_operator_group(item: &Item) -> bool {
    item.max != Some(1) || item.min != 1
}

impl<'g> Generator<'g> {
    pub fn new(g: &'g Grammar, seed: u64, max_window: usize) -> Self {
        Generator {
            g,
            rng: Rng::new(seed),
            max_window,
            nodes: 0,
            depth: 0,
            locals: Vec::new(),
            taken: BTreeSet::new(),
            emitted: BTreeSet::new(),
        }
    }

    /// One program, derived from `root`.
    pub fn program(&mut self) -> String {
        self.nodes = 0;
        self.depth = 0;
        self.locals.clear();
        let mut out = String::new();
        self.rule("root", None, &mut out);
        out
    }

    fn minimal(&self) -> bool {
        self.depth >= MAX_DEPTH || self.nodes >= NODE_BUDGET
    }

    fn alternatives(&self, name: &str) -> &'g [Seq] {
        &self.g.rules[name]
    }

    /// Expands rule `name`, which must give a value of type `want` (`None`
    /// for the lexical rules).
    fn rule(&mut self, name: &str, want: Option<Ty>, out: &mut String) {
        let alts = self.alternatives(name);
        let minimal = self.minimal();
        let allowed: Vec<usize> = (0..alts.len())
            .filter(|&i| self.alt_ok(name, &alts[i], want, minimal))
            .collect();
        assert!(
            !allowed.is_empty(),
            "no alternative of {name} gives {want:?}"
        );
        let i = allowed[self.rng.below(allowed.len())];
        self.taken.insert((name.to_string(), i));
        let seq = &alts[i];
        match name {
            "expr" => {
                self.depth += 1;
                self.expr(seq, want.expect("expr is typed"), out);
                self.depth -= 1;
            }
            "unary" if seq.len() > 1 => {
                // ("-" | "!") ws unary: a prefix node, one level deeper.
                self.nodes += 1;
                self.depth += 1;
                self.seq(name, seq, want, out);
                self.depth -= 1;
            }
            "window" => loop {
                // Drawn again above the checker's bound (see the type's
                // documentation).
                let mut w = String::new();
                self.seq(name, seq, want, &mut w);
                if w.parse::<usize>().expect("a window is digits") <= self.max_window {
                    out.push_str(&w);
                    break;
                }
            },
            _ => self.seq(name, seq, want, out),
        }
        match name {
            "atom" => match atom_alt(seq) {
                AtomAlt::Paren => {}
                // A call's node; its arguments count for themselves.
                _ => self.nodes += 1,
            },
            // A window function's arguments are expressions of their own
            // to the parser: a name and a number.
            "call" if matches!(&seq[0].atom, Atom::Ref(r) if r == "windowfn") => self.nodes += 2,
            _ => {}
        }
    }

    fn alt_ok(&self, name: &str, seq: &Seq, want: Option<Ty>, minimal: bool) -> bool {
        match name {
            "expr" => match first_lit(seq) {
                Some("let") | Some("if") => !minimal,
                None => true,
                Some(other) => panic!("the generator does not know expr alternative {other}"),
            },
            "unary" => seq.len() == 1 || !minimal,
            "atom" => {
                let want = want.expect("atom is typed");
                match atom_alt(seq) {
                    AtomAlt::Number | AtomAlt::Var => want == Ty::Num,
                    AtomAlt::Call => want == Ty::Num && !minimal,
                    AtomAlt::True | AtomAlt::False => want == Ty::Bool,
                    AtomAlt::Local => !self.visible(want).is_empty(),
                    AtomAlt::Paren => !minimal,
                }
            }
            _ => true,
        }
    }

    /// The `let` names in scope that give `want`: an inner `let` of a
    /// name hides the outer ones.
    fn visible(&self, want: Ty) -> Vec<String> {
        let ls = &self.locals;
        ls.iter()
            .enumerate()
            .filter(|&(i, l)| l.1 == want && !ls[i + 1..].iter().any(|m| m.0 == l.0))
            .map(|(_, l)| l.0.clone())
            .collect()
    }

    /// Repetitions of `item` in rule `name` for a value of type `want`.
    fn reps(&mut self, name: &str, item: &Item, want: Option<Ty>) -> usize {
        let (min, max) = (item.min, item.max);
        if min == 1 && max == Some(1) {
            return 1;
        }
        if self.minimal() {
            return min;
        }
        // Operator groups: taken only where the operator gives `want`.
        let allowed = !matches!(
            (name, want),
            ("or" | "and" | "cmp", Some(Ty::Num)) | ("sum" | "product" | "power", Some(Ty::Bool))
        );
        if !allowed {
            return min;
        }
        let cap = max.unwrap_or(match name {
            "ws" | "ws1" => 2,
            _ => 3,
        });
        let mut n = min;
        while n < cap && self.rng.chance(45) {
            n += 1;
        }
        n
    }

    /// The type each rule reference in `name`'s alternative must give,
    /// when the alternative's operator group was (`op`) or was not taken.
    fn child_want(name: &str, child: &str, want: Option<Ty>, op: bool) -> Option<Ty> {
        match (name, child) {
            ("root", "expr") => Some(Ty::Num),
            ("expr", "or") => want,
            ("or", "and") | ("and", "cmp") => Some(if op { Ty::Bool } else { want? }),
            ("cmp", "sum") | ("sum", "product") | ("product", "unary") | ("power", "atom") => {
                Some(if op { Ty::Num } else { want? })
            }
            ("power", "unary") => Some(Ty::Num),
            ("unary", "unary" | "power") => want,
            ("atom", "expr") => want,
            ("atom", "call") | ("call", "expr") => Some(Ty::Num),
            // `let` and `if` are typed in `expr`; the rest is lexical.
            _ => None,
        }
    }

    fn seq(&mut self, name: &str, seq: &Seq, want: Option<Ty>, out: &mut String) {
        let reps: Vec<usize> = seq.iter().map(|it| self.reps(name, it, want)).collect();
        let op = seq
            .iter()
            .zip(&reps)
            .any(|(it, &n)| is_operator_group(it) && matches!(it.atom, Atom::Group(_)) && n > 0);
        for (item, &n) in seq.iter().zip(&reps) {
            for _ in 0..n {
                if is_operator_group(item) && matches!(item.atom, Atom::Group(_)) && want.is_some()
                {
                    // A binary operator's node.
                    self.nodes += 1;
                }
                self.atom(name, &item.atom, want, op, out);
            }
        }
    }

    fn atom(&mut self, name: &str, atom: &Atom, want: Option<Ty>, op: bool, out: &mut String) {
        match atom {
            Atom::Lit(l) => {
                self.emitted.insert(l.clone());
                out.push_str(l);
            }
            Atom::Class { negated, ranges } => {
                assert!(!negated, "negated classes are not generated");
                let (lo, hi) = ranges[self.rng.below(ranges.len())];
                let c = char::from_u32(
                    lo as u32 + self.rng.below(hi as usize - lo as usize + 1) as u32,
                )
                .expect("a class character");
                out.push(c);
            }
            Atom::Ref(child) if name == "atom" && child == "local" => {
                // Only a bound name, of the wanted type.
                let bound = self.visible(want.expect("atom is typed"));
                out.push_str(&bound[self.rng.below(bound.len())]);
            }
            Atom::Ref(child) => {
                let w = Self::child_want(name, child, want, op);
                self.rule(child, w, out);
            }
            Atom::Group(alts) => {
                let allowed: Vec<usize> = (0..alts.len())
                    .filter(|&i| match (name, first_lit(&alts[i]), want) {
                        // ("-" | "!"): the prefix that gives `want`.
                        ("unary", Some("-"), Some(t)) => t == Ty::Num,
                        ("unary", Some("!"), Some(t)) => t == Ty::Bool,
                        _ => true,
                    })
                    .collect();
                let i = allowed[self.rng.below(allowed.len())];
                let seq = &alts[i];
                for item in seq {
                    let n = self.reps(name, item, want);
                    for _ in 0..n {
                        self.atom(name, &item.atom, want, op, out);
                    }
                }
            }
        }
    }

    /// `expr`'s alternatives: `let` binds a name of its value's type for
    /// its body; `if` needs a condition and two branches of one type.
    fn expr(&mut self, seq: &Seq, want: Ty, out: &mut String) {
        let kind = first_lit(seq);
        if kind.is_none() {
            self.seq("expr", seq, Some(want), out);
            return;
        }
        self.nodes += 1;
        let mut exprs = 0;
        let mut name = None;
        let mut bound = None;
        let pushed = self.locals.len();
        for item in seq {
            assert!(
                !is_operator_group(item),
                "expr's keyword forms repeat nothing"
            );
            match (&item.atom, kind) {
                (Atom::Ref(r), Some("let")) if r == "local" => {
                    let mut n = String::new();
                    self.rule("local", None, &mut n);
                    out.push_str(&n);
                    name = Some(n);
                }
                (Atom::Ref(r), Some(k)) if r == "expr" => {
                    let w = match (k, exprs) {
                        ("let", 0) => {
                            let t = if self.rng.chance(25) {
                                Ty::Bool
                            } else {
                                Ty::Num
                            };
                            bound = Some(t);
                            t
                        }
                        ("if", 0) => Ty::Bool,
                        _ => want,
                    };
                    if k == "let" && exprs == 1 {
                        let n = name.clone().expect("let names its value first");
                        self.locals.push((n, bound.expect("the value came first")));
                    }
                    self.rule("expr", Some(w), out);
                    exprs += 1;
                }
                (atom, _) => self.atom("expr", atom, None, false, out),
            }
        }
        self.locals.truncate(pushed);
    }
}
