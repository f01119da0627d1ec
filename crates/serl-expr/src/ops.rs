//! The arithmetic of every elementwise operator, written once for both
//! evaluators: the step evaluator (a tree of closures, `closures.rs`) and
//! the column evaluator (vectorisable loops over chunks of rows,
//! `compile/columns.rs`). Each passes its own builder to [`elementwise!`],
//! so each keeps its fast path and both compute the same function.

use crate::compile::BIG;

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
        use $crate::compile::{repair, Op};
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
