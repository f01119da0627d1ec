//! The binary operators of the expression language, in one table: how
//! each is written and how tightly it binds. The parser (`syntax.rs`),
//! the compiler (`compile.rs`) and the syntax tree (`tree.rs`) read them
//! here; the compiled stack machine's instructions (`ops.rs`) are another
//! thing, the evaluators' own.

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `^`
    Pow,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `&&`
    And,
    /// `||`
    Or,
}

impl BinOp {
    /// The comparisons, in the order the parser tries them (a
    /// two-character symbol before its one-character prefix) and the
    /// program trees draw them.
    pub(crate) const COMPARISONS: [BinOp; 6] = [
        BinOp::Le,
        BinOp::Ge,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::Lt,
        BinOp::Gt,
    ];

    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Pow => "^",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    /// How tightly it binds (higher binds tighter), as the parser reads
    /// it: `||` 1, `&&` 2, comparisons 3, `+ -` 4, `* /` 5, `^` 7.
    pub(crate) fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => 3,
            BinOp::Add | BinOp::Sub => 4,
            BinOp::Mul | BinOp::Div => 5,
            BinOp::Pow => 7,
        }
    }

    /// Whether it gives a condition.
    pub(crate) fn is_condition(self) -> bool {
        self.precedence() <= 3
    }
}
