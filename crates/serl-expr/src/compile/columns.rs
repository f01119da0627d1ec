//! The column evaluator: the bytecode run over chunks of rows, each op a
//! tight loop over the chunk that the compiler can vectorise.

use super::Program;
use crate::ops::{repair, Op};

/// Rows run through the bytecode at a time.
const CHUNK: usize = 128;

impl Program {
    /// Evaluates every row of `columns` (one column per variable, in
    /// [`VarSet`](crate::VarSet) order) into `out`; returns how many values
    /// were repaired. Programs with windows are evaluated in row (time)
    /// order.
    pub fn eval_columns(&self, columns: &[&[f64]], out: &mut [f64]) -> u64 {
        if self.has_windows() {
            return self.eval_rows(columns, out);
        }
        let n = out.len();
        let mut m = Machine {
            stack: vec![[0f64; CHUNK]; self.stack + 1],
            locals: vec![[0f64; CHUNK]; self.locals],
            sp: 0,
            len: 0,
            repaired: 0,
        };
        let mut start = 0;
        while start < n {
            let len = CHUNK.min(n - start);
            m.sp = 0;
            m.len = len;
            for &op in &self.code {
                m.op(op, columns, start);
            }
            for (o, v) in out[start..start + len].iter_mut().zip(&m.stack[0][..len]) {
                *o = repair(*v, &mut m.repaired);
            }
            start += len;
        }
        m.repaired
    }

    /// The step evaluator row by row, for programs whose windows need the
    /// rows in time order.
    fn eval_rows(&self, columns: &[&[f64]], out: &mut [f64]) -> u64 {
        let mut st = self.new_state();
        let mut row = vec![0.0; self.vars];
        for (r, o) in out.iter_mut().enumerate() {
            for (v, c) in row.iter_mut().zip(columns) {
                *v = c[r];
            }
            *o = self.eval(&mut st, &row);
        }
        st.repaired
    }
}

/// The stack machine over one chunk: each stack entry holds a value per
/// row of the chunk.
struct Machine {
    stack: Vec<[f64; CHUNK]>,
    locals: Vec<[f64; CHUNK]>,
    sp: usize,
    /// Rows in the current chunk.
    len: usize,
    repaired: u64,
}

impl Machine {
    /// Runs one op over the chunk. One flat match, so that each op costs
    /// one dispatch.
    #[inline(always)]
    fn op(&mut self, op: Op, columns: &[&[f64]], start: usize) {
        let len = self.len;
        crate::ops::elementwise!(self, op, {
            Op::Const(v) => self.push().fill(v),
            Op::Var(i) => self
                .push()
                .copy_from_slice(&columns[i as usize][start..start + len]),
            Op::Local(i) => {
                self.stack[self.sp] = self.locals[i as usize];
                self.sp += 1;
            }
            Op::SetLocal(i) => {
                self.sp -= 1;
                self.locals[i as usize] = self.stack[self.sp];
            }
            Op::Window(_) => unreachable!("programs with windows take the row path"),
            Op::EndLet(_) => {}
            Op::Clip => self.clip(),
            Op::Select => self.select(),
        })
    }

    /// A new top entry, as the chunk's rows.
    #[inline(always)]
    fn push(&mut self) -> &mut [f64] {
        self.sp += 1;
        &mut self.stack[self.sp - 1][..self.len]
    }

    /// Replaces the top entry with `f` of it, row by row. `f` counts its
    /// repairs in the counter it is given, kept in a local so that the loop
    /// does not write memory it might alias.
    #[inline(always)]
    fn un(&mut self, mut f: impl FnMut(f64, &mut u64) -> f64) {
        let mut repaired = self.repaired;
        let a = &mut self.stack[self.sp - 1];
        for x in a[..self.len].iter_mut() {
            *x = f(*x, &mut repaired);
        }
        self.repaired = repaired;
    }

    /// Pops the top entry and combines it into the one below with `f`.
    #[inline(always)]
    fn bin(&mut self, mut f: impl FnMut(f64, f64, &mut u64) -> f64) {
        let mut repaired = self.repaired;
        self.sp -= 1;
        let (sp, len) = (self.sp, self.len);
        let (lo, hi) = self.stack.split_at_mut(sp);
        // Sliced to the chunk's rows once, so that the loop has no bounds
        // checks and vectorises.
        let (a, b) = (&mut lo[sp - 1][..len], &hi[0][..len]);
        for (x, &y) in a.iter_mut().zip(b) {
            *x = f(*x, y, &mut repaired);
        }
        self.repaired = repaired;
    }

    /// The entry three from the top, to be replaced, and the two above it,
    /// each sliced to the chunk's rows; pops the two.
    #[inline(always)]
    fn three(&mut self) -> (&mut [f64], &[f64], &[f64]) {
        self.sp -= 2;
        let (sp, len) = (self.sp, self.len);
        let (lo, hi) = self.stack.split_at_mut(sp);
        (&mut lo[sp - 1][..len], &hi[0][..len], &hi[1][..len])
    }

    /// Pops hi and lo and clamps the value below them into [lo, hi] (or
    /// [hi, lo] when they are the wrong way round).
    #[inline(always)]
    fn clip(&mut self) {
        let (xs, los, his) = self.three();
        for ((x, &lo), &hi) in xs.iter_mut().zip(los).zip(his) {
            *x = if lo <= hi {
                x.clamp(lo, hi)
            } else {
                x.clamp(hi, lo)
            };
        }
    }

    /// Pops else and then and replaces the condition below them with the
    /// branch it picks.
    #[inline(always)]
    fn select(&mut self) {
        let (cs, ts, es) = self.three();
        for ((c, &t), &e) in cs.iter_mut().zip(ts).zip(es) {
            *c = if *c != 0.0 { t } else { e };
        }
    }
}
