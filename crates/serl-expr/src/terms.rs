//! A program's top-level sum, split into its terms, so that a reward's
//! parts can be measured one by one (the smoke test's per-term statistics
//! in the designer's feedback).

use crate::compile::Program;
use crate::syntax::{lex, Tok};
use crate::Pos;

impl Program {
    /// The terms of the program's top-level sum, each compiled over the
    /// same variables and carrying its sign: `a - 2 * b + c` gives `a`,
    /// `-(2 * b)` and `c`, whose values add up to the program's. A program
    /// that is not a plain sum at the top (a `let`, an `if`, a comparison)
    /// or is one term gives itself alone.
    pub fn terms(&self) -> Vec<Program> {
        let alone = || vec![self.clone()];
        let Some(cuts) = top_level_cuts(self.source()) else {
            return alone();
        };
        if cuts.is_empty() {
            return alone();
        }
        let src = self.source();
        let mut parts = Vec::with_capacity(cuts.len() + 1);
        let mut start = (0, false);
        for &cut in cuts.iter().chain(std::iter::once(&(src.len(), false))) {
            let text = without_comments(&src[start.0..cut.0]);
            let text = text.trim();
            let text = match start.1 {
                true => format!("-({})", text.strip_prefix('-').unwrap_or(text).trim()),
                false => text.strip_prefix('+').unwrap_or(text).trim().to_string(),
            };
            match Program::compile(&text, &self.var_set) {
                Ok(p) => parts.push(p),
                Err(_) => return alone(),
            }
            start = cut;
        }
        parts
    }
}

/// Where the top-level sum of `src` splits: the byte offset of each binary
/// `+` or `-` outside parentheses and calls, and whether it is a `-`.
/// `None` when the top level is not a plain sum.
fn top_level_cuts(src: &str) -> Option<Vec<(usize, bool)>> {
    let (toks, _) = lex(src).ok()?;
    let mut cuts = Vec::new();
    let mut depth = 0usize;
    let mut after_operand = false;
    for (tok, pos) in &toks {
        match tok {
            Tok::Sym("(") => depth += 1,
            Tok::Sym(")") => depth = depth.saturating_sub(1),
            Tok::Sym(s @ ("+" | "-")) if depth == 0 && after_operand => {
                cuts.push((offset(src, *pos), *s == "-"));
            }
            Tok::Sym("<" | ">" | "<=" | ">=" | "==" | "!=" | "&&" | "||" | ";" | "=")
                if depth == 0 =>
            {
                return None
            }
            Tok::Name(n)
                if depth == 0 && ["let", "in", "if", "then", "else"].contains(&n.as_str()) =>
            {
                return None
            }
            _ => {}
        }
        after_operand = matches!(tok, Tok::Num(_) | Tok::Name(_) | Tok::Sym(")"));
    }
    Some(cuts)
}

/// `text` without its `#` comments, lines joined with spaces.
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The byte offset of `pos` (1-based line and byte column) in `src`.
fn offset(src: &str, pos: Pos) -> usize {
    let line_start: usize = src
        .split_inclusive('\n')
        .take(pos.line as usize - 1)
        .map(str::len)
        .sum();
    line_start + pos.col as usize - 1
}

#[cfg(test)]
mod tests {
    use crate::{Program, VarSet};

    fn sources(src: &str) -> Vec<String> {
        let vars = VarSet::new(&["a", "b", "c"]);
        let p = Program::compile(src, &vars).unwrap();
        p.terms().iter().map(|t| t.source().to_string()).collect()
    }

    #[test]
    fn a_sum_splits_into_signed_terms_that_add_up_to_it() {
        assert_eq!(
            sources("a - 2 * b^2 / c + min(a, -b) - (a + b)"),
            ["a", "-(2 * b^2 / c)", "min(a, -b)", "-((a + b))"]
        );
        assert_eq!(sources("-a + b"), ["-a", "b"]);
        assert_eq!(sources("a * -b - c"), ["a * -b", "-(c)"]);
        assert_eq!(sources("a - -b"), ["a", "-(-b)"]);
        assert_eq!(sources("a -\n  b # the rest\n + c"), ["a", "-(b)", "c"]);
        let vars = VarSet::new(&["a", "b", "c"]);
        let src = "a - 2 * b^2 / (c + 1) + 3 * c - log(a)";
        let p = Program::compile(src, &vars).unwrap();
        let x = [0.7, 1.3, 2.0];
        let whole = p.eval(&mut p.new_state(), &x);
        let parts: f64 = p
            .terms()
            .iter()
            .map(|t| t.eval(&mut t.new_state(), &x))
            .sum();
        assert!((whole - parts).abs() < 1e-12, "{whole} vs {parts}");
    }

    #[test]
    fn what_is_not_a_plain_sum_is_one_term() {
        for src in [
            "a",
            "(a + b)",
            "a * (b - c)",
            "min(a + b, c)",
            "let x = a in x + b",
            "if a > b then a + c else b",
            "-(a - b)",
        ] {
            assert_eq!(sources(src), [src], "{src}");
        }
    }
}
