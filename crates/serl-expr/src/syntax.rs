//! Tokens, the syntax tree and the parser of the expression language.
//!
//! ```text
//! expr    := "let" NAME "=" expr "in" expr
//!          | "if" expr "then" expr "else" expr
//!          | or
//! or      := and ("||" and)*
//! and     := cmp ("&&" cmp)*
//! cmp     := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
//! sum     := product (("+" | "-") product)*
//! product := unary (("*" | "/") unary)*
//! unary   := ("-" | "!") unary | power
//! power   := atom ("^" unary)?
//! atom    := NUMBER | "true" | "false" | NAME | NAME "(" expr ("," expr)* ")" | "(" expr ")"
//! ```

use super::binop::BinOp;
use super::{CompileError, Limits, Pos};

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Num(f64),
    Name(String),
    Sym(&'static str),
    End,
}

const SYMBOLS: [&str; 19] = [
    "<=", ">=", "==", "!=", "&&", "||", "+", "-", "*", "/", "^", "<", ">", "!", "(", ")", ",", "=",
    ";",
];

/// The tokens of `src`, and the byte span and value of every number in it.
#[allow(clippy::type_complexity)]
pub fn lex(src: &str) -> Result<(Vec<(Tok, Pos)>, Vec<(usize, usize, f64)>), CompileError> {
    let mut out = Vec::new();
    let mut literals = Vec::new();
    let (mut line, mut col) = (1u32, 1u32);
    let b = src.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let pos = Pos { line, col };
        if c == b'\n' {
            line += 1;
            col = 1;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let start = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                let save = i;
                i += 1;
                if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
                    i += 1;
                }
                if i < b.len() && b[i].is_ascii_digit() {
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                } else {
                    i = save;
                }
            }
            let text = &src[start..i];
            let v: f64 = text
                .parse()
                .map_err(|_| CompileError::at(pos, format!("`{text}` is not a number")))?;
            col += (i - start) as u32;
            literals.push((start, i, v));
            out.push((Tok::Num(v), pos));
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            col += (i - start) as u32;
            out.push((Tok::Name(src[start..i].to_string()), pos));
            continue;
        }
        if let Some(s) = SYMBOLS.iter().find(|s| src[i..].starts_with(**s)) {
            i += s.len();
            col += s.len() as u32;
            out.push((Tok::Sym(s), pos));
            continue;
        }
        let ch = src[i..].chars().next().unwrap_or('?');
        let hint = match ch {
            '"' | '\'' => " (the language has no strings)",
            '[' | ']' | '{' | '}' => " (the language has no lists, blocks or loops)",
            ':' => {
                " (the language has no loops or blocks; for a choice write `if c then a else b`)"
            }
            '?' => " (write `if c then a else b`)",
            _ => "",
        };
        return Err(CompileError::at(
            pos,
            format!("unexpected character `{ch}`{hint}"),
        ));
    }
    out.push((Tok::End, Pos { line, col }));
    Ok((out, literals))
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Num(f64),
    Bool(bool),
    Name(String),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    Let(String, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    pub node: Node,
    pub pos: Pos,
}

pub struct Parser<'a> {
    toks: Vec<(Tok, Pos)>,
    i: usize,
    depth: usize,
    pub nodes: usize,
    limits: &'a Limits,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Num(v) => format!("number {v}"),
        Tok::Name(n) => format!("`{n}`"),
        Tok::Sym(s) => format!("`{s}`"),
        Tok::End => "the end of the program".into(),
    }
}

const KEYWORDS: [&str; 7] = ["let", "in", "if", "then", "else", "true", "false"];

impl<'a> Parser<'a> {
    pub fn new(toks: Vec<(Tok, Pos)>, limits: &'a Limits) -> Self {
        Parser {
            toks,
            i: 0,
            depth: 0,
            nodes: 0,
            limits,
        }
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.i].0
    }

    fn pos(&self) -> Pos {
        self.toks[self.i].1
    }

    fn bump(&mut self) -> (Tok, Pos) {
        let t = self.toks[self.i].clone();
        if self.i + 1 < self.toks.len() {
            self.i += 1;
        }
        t
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn is_kw(&self, k: &str) -> bool {
        matches!(self.peek(), Tok::Name(x) if x == k)
    }

    fn expect_sym(&mut self, s: &str, context: &str) -> Result<(), CompileError> {
        if self.is_sym(s) {
            self.bump();
            Ok(())
        } else {
            Err(CompileError::at(
                self.pos(),
                format!("expected `{s}` {context}, found {}", describe(self.peek())),
            ))
        }
    }

    fn expect_kw(&mut self, k: &str, context: &str) -> Result<(), CompileError> {
        if self.is_kw(k) {
            self.bump();
            Ok(())
        } else {
            Err(CompileError::at(
                self.pos(),
                format!("expected `{k}` {context}, found {}", describe(self.peek())),
            ))
        }
    }

    fn node(&mut self, node: Node, pos: Pos) -> Result<Expr, CompileError> {
        self.nodes += 1;
        if self.nodes > self.limits.max_nodes {
            return Err(CompileError::at(
                pos,
                format!("the program has more than {} nodes", self.limits.max_nodes),
            ));
        }
        Ok(Expr { node, pos })
    }

    pub fn program(&mut self) -> Result<Expr, CompileError> {
        let e = self.expr()?;
        if !matches!(self.peek(), Tok::End) {
            return Err(CompileError::at(
                self.pos(),
                format!(
                    "expected the end of the program, found {} (a program is one expression)",
                    describe(self.peek())
                ),
            ));
        }
        Ok(e)
    }

    fn expr(&mut self) -> Result<Expr, CompileError> {
        self.depth += 1;
        if self.depth > self.limits.max_depth {
            return Err(CompileError::at(
                self.pos(),
                format!(
                    "the program nests deeper than {} levels",
                    self.limits.max_depth
                ),
            ));
        }
        let pos = self.pos();
        let r = if self.is_kw("let") {
            self.bump();
            let name = match self.bump() {
                (Tok::Name(n), _) if !KEYWORDS.contains(&n.as_str()) => n,
                (t, p) => {
                    return Err(CompileError::at(
                        p,
                        format!("expected a name after `let`, found {}", describe(&t)),
                    ))
                }
            };
            self.expect_sym("=", "after the name in `let`")?;
            let value = self.expr()?;
            if self.is_sym(";") {
                self.bump();
            } else {
                self.expect_kw(
                    "in",
                    "after the value of `let` (write `let x = value in body`)",
                )?;
            }
            let body = self.expr()?;
            self.node(Node::Let(name, Box::new(value), Box::new(body)), pos)
        } else if self.is_kw("if") {
            self.bump();
            let c = self.expr()?;
            self.expect_kw("then", "after the condition of `if`")?;
            let a = self.expr()?;
            self.expect_kw("else", "(every `if` needs an `else`)")?;
            let b = self.expr()?;
            self.node(Node::If(Box::new(c), Box::new(a), Box::new(b)), pos)
        } else {
            self.or()
        };
        self.depth -= 1;
        r
    }

    fn binary(
        &mut self,
        ops: &[BinOp],
        next: fn(&mut Self) -> Result<Expr, CompileError>,
        repeat: bool,
    ) -> Result<Expr, CompileError> {
        let mut lhs = next(self)?;
        loop {
            let Some(&op) = ops.iter().find(|op| self.is_sym(op.symbol())) else {
                return Ok(lhs);
            };
            let pos = self.pos();
            self.bump();
            let rhs = next(self)?;
            lhs = self.node(Node::Bin(op, Box::new(lhs), Box::new(rhs)), pos)?;
            if !repeat {
                return Ok(lhs);
            }
        }
    }

    fn or(&mut self) -> Result<Expr, CompileError> {
        self.binary(&[BinOp::Or], Self::and, true)
    }

    fn and(&mut self) -> Result<Expr, CompileError> {
        self.binary(&[BinOp::And], Self::cmp, true)
    }

    fn cmp(&mut self) -> Result<Expr, CompileError> {
        self.binary(&BinOp::COMPARISONS, Self::sum, false)
    }

    fn sum(&mut self) -> Result<Expr, CompileError> {
        self.binary(&[BinOp::Add, BinOp::Sub], Self::product, true)
    }

    fn product(&mut self) -> Result<Expr, CompileError> {
        self.binary(&[BinOp::Mul, BinOp::Div], Self::unary, true)
    }

    fn unary(&mut self) -> Result<Expr, CompileError> {
        let pos = self.pos();
        if self.is_sym("-") || self.is_sym("!") {
            let neg = self.is_sym("-");
            self.bump();
            self.depth += 1;
            if self.depth > self.limits.max_depth {
                return Err(CompileError::at(
                    pos,
                    format!(
                        "the program nests deeper than {} levels",
                        self.limits.max_depth
                    ),
                ));
            }
            let e = self.unary()?;
            self.depth -= 1;
            let node = if neg {
                Node::Neg(Box::new(e))
            } else {
                Node::Not(Box::new(e))
            };
            return self.node(node, pos);
        }
        self.power()
    }

    fn power(&mut self) -> Result<Expr, CompileError> {
        let base = self.atom()?;
        if self.is_sym("^") {
            let pos = self.pos();
            self.bump();
            let exp = self.unary()?;
            return self.node(Node::Bin(BinOp::Pow, Box::new(base), Box::new(exp)), pos);
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<Expr, CompileError> {
        let (t, pos) = self.bump();
        match t {
            Tok::Num(v) => self.node(Node::Num(v), pos),
            Tok::Name(n) if n == "true" || n == "false" => self.node(Node::Bool(n == "true"), pos),
            Tok::Name(n) if KEYWORDS.contains(&n.as_str()) => Err(CompileError::at(
                pos,
                format!("`{n}` cannot start an expression here"),
            )),
            Tok::Name(n) => {
                if self.is_sym("(") {
                    self.bump();
                    let mut args = Vec::new();
                    if !self.is_sym(")") {
                        loop {
                            args.push(self.expr()?);
                            if self.is_sym(",") {
                                self.bump();
                                continue;
                            }
                            break;
                        }
                    }
                    self.expect_sym(")", &format!("to close the call of `{n}`"))?;
                    self.node(Node::Call(n, args), pos)
                } else {
                    self.node(Node::Name(n), pos)
                }
            }
            Tok::Sym("(") => {
                let e = self.expr()?;
                self.expect_sym(")", "to close `(`")?;
                Ok(e)
            }
            t => Err(CompileError::at(
                pos,
                format!("expected a number, a name or `(`, found {}", describe(&t)),
            )),
        }
    }
}
