//! The arithmetic of every elementwise operator, written once for both
//! evaluators: the step evaluator (a tree of closures, `closures.rs`) and
//! the column evaluator (vectorisable loops over chunks of rows,
//! `compile/columns.rs`). Each passes its own builder to [`elementwise!`],
//! so each keeps its fast path and both compute the same function.

/// The compiled program's instructions: a stack machine's, which both
/// evaluators run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Op {
    Const(f64),
    Var(u16),
    Local(u16),
    SetLocal(u16),
    Window(u16),
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Neg,
    Not,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
    Abs,
    Sqrt,
    Log,
    Exp,
    Tanh,
    Sign,
    Min,
    Max,
    Clip,
    /// Pops else, then, condition.
    Select,
    /// `x ^ n` for a small whole constant n (folded at compile time).
    Powi(i32),
    /// Ends the body of the `let` that set this local (a no-op for the
    /// interpreter; the closure compiler scopes the binding with it).
    EndLet(u16),
}

/// The largest magnitude a repaired value takes: an overflow becomes ±BIG.
pub(crate) const BIG: f64 = 1e12;

/// `x`, with NaN repaired to 0 and ±∞ to ±[`BIG`], each counted in
/// `repaired`.
#[inline]
pub(crate) fn repair(x: f64, repaired: &mut u64) -> f64 {
    if x.is_finite() {
        x
    } else {
        *repaired += 1;
        if x.is_nan() {
            0.0
        } else {
            x.clamp(-BIG, BIG)
        }
    }
}

/// `a / b`, with a division by zero giving 0 and an overflow ±[`BIG`],
/// each counted in `repaired`.
#[inline(always)]
pub(crate) fn divide(a: f64, b: f64, repaired: &mut u64) -> f64 {
    let q = a / b;
    if q.is_finite() {
        q
    } else {
        *repaired += 1;
        if b == 0.0 || q.is_nan() {
            0.0
        } else {
            q.clamp(-BIG, BIG)
        }
    }
}

/// `sign(a)`: -1, 0 or 1 (0 for NaN); never repairs.
#[inline(always)]
pub(crate) fn sign(a: f64, _: &mut u64) -> f64 {
    if a > 0.0 {
        1.0
    } else if a < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// A comparison's truth as a number: 1 or 0.
#[inline(always)]
pub(crate) fn b2f(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// Matches `$op` against every elementwise operator, building it with
/// `$m.un(f)` or `$m.bin(f)`, where `f(a, [b,] repaired)` is the operator's
/// arithmetic; the arms in braces handle every other op.
macro_rules! elementwise {
    ($m:ident, $op:expr, { $($rest:tt)* }) => {{
        use $crate::ops::{repair, Op};
        use $crate::ops::{b2f, divide, sign};
        match $op {
            Op::Add => $m.bin(|a, b, _| a + b),
            Op::Sub => $m.bin(|a, b, _| a - b),
            Op::Mul => $m.bin(|a, b, _| a * b),
            Op::Div => $m.bin(divide),
            Op::Pow => $m.bin(|a, b, r| repair(a.powf(b), r)),
            Op::Lt => $m.bin(|a, b, _| b2f(a < b)),
            Op::Le => $m.bin(|a, b, _| b2f(a <= b)),
            Op::Gt => $m.bin(|a, b, _| b2f(a > b)),
            Op::Ge => $m.bin(|a, b, _| b2f(a >= b)),
            Op::Eq => $m.bin(|a, b, _| b2f(a == b)),
            Op::Ne => $m.bin(|a, b, _| b2f(a != b)),
            Op::And => $m.bin(|a, b, _| a * b),
            Op::Or => $m.bin(|a, b, _| a.max(b)),
            Op::Min => $m.bin(|a, b, _| a.min(b)),
            Op::Max => $m.bin(|a, b, _| a.max(b)),
            Op::Neg => $m.un(|a, _| -a),
            Op::Not => $m.un(|a, _| 1.0 - a),
            Op::Abs => $m.un(|a, _| a.abs()),
            Op::Sqrt => $m.un(|a, r| repair(a.sqrt(), r)),
            Op::Log => $m.un(|a, r| repair(a.ln(), r)),
            Op::Exp => $m.un(|a, r| repair(a.exp(), r)),
            Op::Tanh => $m.un(|a, _| a.tanh()),
            Op::Sign => $m.un(sign),
            Op::Powi(n) => $m.un(move |a, r| repair(a.powi(n), r)),
            $($rest)*
        }
    }};
}
pub(crate) use elementwise;
