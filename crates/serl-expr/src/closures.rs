//! The step evaluator: the bytecode compiled once more, into a tree of
//! closures. Each node calls its children directly, so a step costs a few
//! predictable indirect calls instead of one unpredictable dispatch per
//! instruction.

use std::sync::Arc;

use super::compile::{repair, Op, BIG};

/// What a step's closures read and write.
pub(crate) struct Frame<'a> {
    pub vars: &'a [f64],
    pub locals: &'a mut [f64],
    pub windows: &'a [f64],
    pub repaired: &'a mut u64,
}

pub(crate) type Node = Box<dyn Fn(&mut Frame) -> f64 + Send + Sync>;

/// The compiled tree; compares equal to any other (programs compare by
/// source).
#[derive(Clone)]
pub(crate) struct Tree(pub Arc<Node>);

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<closures>")
    }
}

impl PartialEq for Tree {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

fn b2f(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// Builds the tree by running the bytecode symbolically.
pub(crate) fn build(code: &[Op]) -> Tree {
    let mut stack: Vec<Node> = Vec::new();
    // What each stack entry is, so that arithmetic with a constant operand
    // becomes one closure instead of two calls.
    let mut leaf: Vec<Option<f64>> = Vec::new();
    let mut lets: Vec<(u16, Node)> = Vec::new();
    macro_rules! un {
        ($f:expr) => {{
            let a = stack.pop().expect("checked program");
            stack.push(Box::new(move |fr: &mut Frame| {
                let x = a(fr);
                #[allow(clippy::redundant_closure_call)]
                $f(x, fr)
            }));
        }};
    }
    macro_rules! bin {
        ($f:expr) => {{
            let b = stack.pop().expect("checked program");
            let a = stack.pop().expect("checked program");
            stack.push(Box::new(move |fr: &mut Frame| {
                let x = a(fr);
                let y = b(fr);
                #[allow(clippy::redundant_closure_call)]
                $f(x, y, fr)
            }));
        }};
    }
    for op in code {
        // Arithmetic with one constant side: capture the constant.
        if let (Op::Add | Op::Sub | Op::Mul, Some(&Some(c))) = (*op, leaf.last()) {
            if stack.len() >= 2 {
                stack.pop();
                leaf.pop();
                let a = stack.pop().expect("checked program");
                leaf.pop();
                let f: Node = match *op {
                    Op::Add => Box::new(move |fr| a(fr) + c),
                    Op::Sub => Box::new(move |fr| a(fr) - c),
                    _ => Box::new(move |fr| a(fr) * c),
                };
                stack.push(f);
                leaf.push(None);
                continue;
            }
        }
        if let (Op::Add | Op::Mul, true) = (*op, leaf.len() >= 2) {
            if let Some(c) = leaf[leaf.len() - 2] {
                let b = stack.pop().expect("checked program");
                stack.pop();
                leaf.pop();
                leaf.pop();
                let f: Node = match *op {
                    Op::Add => Box::new(move |fr| c + b(fr)),
                    _ => Box::new(move |fr| c * b(fr)),
                };
                stack.push(f);
                leaf.push(None);
                continue;
            }
        }
        let is_const = if let Op::Const(v) = *op {
            Some(v)
        } else {
            None
        };
        match *op {
            Op::Const(v) => stack.push(Box::new(move |_| v)),
            Op::Var(i) => {
                let i = i as usize;
                stack.push(Box::new(move |fr| fr.vars[i]))
            }
            Op::Local(i) => {
                let i = i as usize;
                stack.push(Box::new(move |fr| fr.locals[i]))
            }
            Op::Window(i) => {
                let i = i as usize;
                stack.push(Box::new(move |fr| fr.windows[i]))
            }
            Op::SetLocal(i) => {
                let v = stack.pop().expect("checked program");
                lets.push((i, v));
            }
            Op::EndLet(_) => {
                let body = stack.pop().expect("checked program");
                let (i, v) = lets.pop().expect("checked program");
                let i = i as usize;
                stack.push(Box::new(move |fr| {
                    fr.locals[i] = v(fr);
                    body(fr)
                }));
            }
            Op::Add => bin!(|a: f64, b: f64, _: &mut Frame| a + b),
            Op::Sub => bin!(|a: f64, b: f64, _: &mut Frame| a - b),
            Op::Mul => bin!(|a: f64, b: f64, _: &mut Frame| a * b),
            Op::Div => bin!(|a: f64, b: f64, fr: &mut Frame| if b == 0.0 {
                *fr.repaired += 1;
                0.0
            } else {
                repair(a / b, fr.repaired)
            }),
            Op::Pow => bin!(|a: f64, b: f64, fr: &mut Frame| repair(a.powf(b), fr.repaired)),
            Op::Lt => bin!(|a: f64, b: f64, _: &mut Frame| b2f(a < b)),
            Op::Le => bin!(|a: f64, b: f64, _: &mut Frame| b2f(a <= b)),
            Op::Gt => bin!(|a: f64, b: f64, _: &mut Frame| b2f(a > b)),
            Op::Ge => bin!(|a: f64, b: f64, _: &mut Frame| b2f(a >= b)),
            Op::Eq => bin!(|a: f64, b: f64, _: &mut Frame| b2f(a == b)),
            Op::Ne => bin!(|a: f64, b: f64, _: &mut Frame| b2f(a != b)),
            Op::And => bin!(|a: f64, b: f64, _: &mut Frame| a * b),
            Op::Or => bin!(|a: f64, b: f64, _: &mut Frame| a.max(b)),
            Op::Min => bin!(|a: f64, b: f64, _: &mut Frame| a.min(b)),
            Op::Max => bin!(|a: f64, b: f64, _: &mut Frame| a.max(b)),
            Op::Neg => un!(|a: f64, _: &mut Frame| -a),
            Op::Not => un!(|a: f64, _: &mut Frame| 1.0 - a),
            Op::Abs => un!(|a: f64, _: &mut Frame| a.abs()),
            Op::Sqrt => un!(|a: f64, fr: &mut Frame| repair(a.sqrt(), fr.repaired)),
            Op::Log => un!(|a: f64, fr: &mut Frame| repair(a.ln(), fr.repaired)),
            Op::Exp => un!(|a: f64, fr: &mut Frame| repair(a.exp(), fr.repaired)),
            Op::Tanh => un!(|a: f64, _: &mut Frame| a.tanh()),
            Op::Sign => un!(|a: f64, _: &mut Frame| if a > 0.0 {
                1.0
            } else if a < 0.0 {
                -1.0
            } else {
                0.0
            }),
            Op::Powi(n) => un!(move |a: f64, fr: &mut Frame| repair(a.powi(n), fr.repaired)),
            Op::Clip => {
                let hi = stack.pop().expect("checked program");
                let lo = stack.pop().expect("checked program");
                let x = stack.pop().expect("checked program");
                stack.push(Box::new(move |fr| {
                    let (x, lo, hi) = (x(fr), lo(fr), hi(fr));
                    if lo <= hi {
                        x.clamp(lo, hi)
                    } else {
                        x.clamp(hi, lo)
                    }
                }));
            }
            Op::Select => {
                let e = stack.pop().expect("checked program");
                let t = stack.pop().expect("checked program");
                let c = stack.pop().expect("checked program");
                // Both branches run, as in the column evaluator, so that
                // the repair counts agree.
                stack.push(Box::new(move |fr| {
                    let (c, t, e) = (c(fr), t(fr), e(fr));
                    if c != 0.0 {
                        t
                    } else {
                        e
                    }
                }));
            }
        }
        // Keep `leaf` the height of `stack`: entries below the top are
        // untouched by an op; the top is a constant only if the op was one.
        let h = stack.len();
        leaf.truncate(h.saturating_sub(1));
        while leaf.len() + 1 < h {
            leaf.push(None);
        }
        if h > 0 {
            leaf.push(is_const);
        }
    }
    let root = stack.pop().unwrap_or_else(|| Box::new(|_| 0.0));
    let _ = BIG;
    Tree(Arc::new(root))
}
