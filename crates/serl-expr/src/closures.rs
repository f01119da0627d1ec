//! The step evaluator: the bytecode compiled once more, into a tree of
//! closures. Each node calls its children directly, so a step costs a few
//! predictable indirect calls instead of one unpredictable dispatch per
//! instruction.

use std::sync::Arc;

use crate::ops::Op;

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

/// Builds the tree by running the bytecode symbolically.
pub(crate) fn build(code: &[Op]) -> Tree {
    let mut b = Builder::default();
    for &op in code {
        b.op(op);
    }
    let root = b.stack.pop().unwrap_or_else(|| Box::new(|_| 0.0));
    Tree(Arc::new(root))
}

/// The symbolic stack machine: the nodes the bytecode has pushed so far.
#[derive(Default)]
struct Builder {
    stack: Vec<Node>,
    /// What each stack entry is (`Some` for a constant), so that
    /// arithmetic with a constant operand becomes one closure instead of
    /// two calls.
    leaf: Vec<Option<f64>>,
    /// Values of the `let`s whose bodies are being built, innermost last.
    lets: Vec<(u16, Node)>,
}

impl Builder {
    fn pop(&mut self) -> Node {
        self.stack.pop().expect("checked program")
    }

    fn op(&mut self, op: Op) {
        if self.fold_constant(op) {
            return;
        }
        crate::ops::elementwise!(self, op, {
            Op::Const(_) | Op::Var(_) | Op::Local(_) | Op::Window(_) => self.load(op),
            Op::SetLocal(_) | Op::EndLet(_) => self.bind(op),
            Op::Clip | Op::Select => self.ternary(op),
        });
        self.track_leaf(op);
    }

    /// Keeps `leaf` the height of `stack`: entries below the top are
    /// untouched by an op; the top is a constant only if the op was one.
    fn track_leaf(&mut self, op: Op) {
        let is_const = if let Op::Const(v) = op { Some(v) } else { None };
        let h = self.stack.len();
        self.leaf.truncate(h.saturating_sub(1));
        while self.leaf.len() + 1 < h {
            self.leaf.push(None);
        }
        if h > 0 {
            self.leaf.push(is_const);
        }
    }

    /// Arithmetic with one constant side: one closure that captures the
    /// constant. Returns false, changing nothing, for any other op.
    fn fold_constant(&mut self, op: Op) -> bool {
        if let (Op::Add | Op::Sub | Op::Mul, Some(&Some(c))) = (op, self.leaf.last()) {
            if self.stack.len() >= 2 {
                self.stack.pop();
                self.leaf.pop();
                let a = self.pop();
                self.leaf.pop();
                let f: Node = match op {
                    Op::Add => Box::new(move |fr| a(fr) + c),
                    Op::Sub => Box::new(move |fr| a(fr) - c),
                    _ => Box::new(move |fr| a(fr) * c),
                };
                self.stack.push(f);
                self.leaf.push(None);
                return true;
            }
        }
        if let (Op::Add | Op::Mul, true) = (op, self.leaf.len() >= 2) {
            if let Some(c) = self.leaf[self.leaf.len() - 2] {
                let b = self.pop();
                self.stack.pop();
                self.leaf.pop();
                self.leaf.pop();
                let f: Node = match op {
                    Op::Add => Box::new(move |fr| c + b(fr)),
                    _ => Box::new(move |fr| c * b(fr)),
                };
                self.stack.push(f);
                self.leaf.push(None);
                return true;
            }
        }
        false
    }

    /// A constant, or a read of a variable, local or window value.
    fn load(&mut self, op: Op) {
        let node: Node = match op {
            Op::Const(v) => Box::new(move |_| v),
            Op::Var(i) => {
                let i = i as usize;
                Box::new(move |fr| fr.vars[i])
            }
            Op::Local(i) => {
                let i = i as usize;
                Box::new(move |fr| fr.locals[i])
            }
            Op::Window(i) => {
                let i = i as usize;
                Box::new(move |fr| fr.windows[i])
            }
            _ => unreachable!("not a load: {op:?}"),
        };
        self.stack.push(node);
    }

    /// `SetLocal` holds the value until its `EndLet`, which makes one node
    /// that stores it and then runs the body.
    fn bind(&mut self, op: Op) {
        match op {
            Op::SetLocal(i) => {
                let v = self.pop();
                self.lets.push((i, v));
            }
            Op::EndLet(_) => {
                let body = self.pop();
                let (i, v) = self.lets.pop().expect("checked program");
                let i = i as usize;
                self.stack.push(Box::new(move |fr| {
                    fr.locals[i] = v(fr);
                    body(fr)
                }));
            }
            _ => unreachable!("not a binding: {op:?}"),
        }
    }

    /// A node applying `f` to its child's value.
    fn un(&mut self, f: impl Fn(f64, &mut u64) -> f64 + Send + Sync + 'static) {
        let a = self.pop();
        self.stack.push(Box::new(move |fr: &mut Frame| {
            let x = a(fr);
            f(x, fr.repaired)
        }));
    }

    /// A node applying `f` to its two children's values, left first.
    fn bin(&mut self, f: impl Fn(f64, f64, &mut u64) -> f64 + Send + Sync + 'static) {
        let b = self.pop();
        let a = self.pop();
        self.stack.push(Box::new(move |fr: &mut Frame| {
            let x = a(fr);
            let y = b(fr);
            f(x, y, fr.repaired)
        }));
    }

    fn ternary(&mut self, op: Op) {
        match op {
            Op::Clip => {
                let hi = self.pop();
                let lo = self.pop();
                let x = self.pop();
                self.stack.push(Box::new(move |fr| {
                    let (x, lo, hi) = (x(fr), lo(fr), hi(fr));
                    if lo <= hi {
                        x.clamp(lo, hi)
                    } else {
                        x.clamp(hi, lo)
                    }
                }));
            }
            Op::Select => {
                let e = self.pop();
                let t = self.pop();
                let c = self.pop();
                // Both branches run, as in the column evaluator, so that
                // the repair counts agree.
                self.stack.push(Box::new(move |fr| {
                    let (c, t, e) = (c(fr), t(fr), e(fr));
                    if c != 0.0 {
                        t
                    } else {
                        e
                    }
                }));
            }
            _ => unreachable!("not ternary: {op:?}"),
        }
    }
}
