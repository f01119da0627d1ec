//! The fused passes' kernels: the matrix product (the `gemm` crate, split
//! across threads only where that pays) and a vectorising tanh, shared by
//! the dense, attention and recurrent blocks.

/// Products of at least this many multiply-adds (`m·k·n`) are split
/// across rayon's threads: a 256-row minibatch through a 960-wide layer
/// (236 M) is; one through the reference 64-wide network (1 M) is not,
/// since handing it out would cost more than it saves. The split is over
/// the output's columns, each element summed in the same order, so the
/// result is the same to the bit on any number of cores.
const THREADED_PRODUCT: usize = 1 << 23;

/// A matrix operand of [`gemm`]: its values, row-major, and whether they
/// are stored transposed.
pub(super) type Operand<'a> = (&'a [f32], bool);

/// `c = a·b` for row-major matrices of dimensions `[m, k, n]`: `a` is
/// `m × k` (stored `k × m` when transposed) and `b` is `k × n` (stored
/// `n × k` when transposed).
pub(super) fn gemm(dims: [usize; 3], a: Operand, b: Operand, c: &mut [f32]) {
    let [m, k, n] = dims;
    let threads = if m.saturating_mul(k).saturating_mul(n) >= THREADED_PRODUCT {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    gemm_on(threads, dims, a, b, c)
}

/// [`gemm`] with the threads given.
pub(super) fn gemm_on(
    threads: gemm::Parallelism,
    [m, k, n]: [usize; 3],
    (a, ta): Operand,
    (b, tb): Operand,
    c: &mut [f32],
) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    // (row stride, column stride) of each operand.
    let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
    let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
    // SAFETY: the assertion above keeps every index the strides reach
    // inside the three slices, and `c` does not alias `a` or `b`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            csa,
            rsa,
            b.as_ptr(),
            csb,
            rsb,
            0.0,
            1.0,
            false,
            false,
            false,
            threads,
        );
    }
}

/// tanh as a rational function (Eigen's float approximation, within a few
/// ulp of `f32::tanh`). libm's `tanhf` is a call per element and was a
/// third of the fused learner's time; this one vectorises with the loop.
#[inline(always)]
#[allow(clippy::excessive_precision)] // the published coefficients
pub(super) fn tanh(x: f32) -> f32 {
    // Beyond ±7.905 the result rounds to ±1.
    let x = x.clamp(-7.905_311, 7.905_311);
    let x2 = x * x;
    let mut p = -2.760_768_5e-16_f32;
    p = p * x2 + 2.000_187_9e-13;
    p = p * x2 - 8.604_671_5e-11;
    p = p * x2 + 5.122_297e-8;
    p = p * x2 + 1.485_722_4e-5;
    p = p * x2 + 6.372_619_3e-4;
    p = p * x2 + 4.893_524_6e-3;
    let mut q = 1.198_258_4e-6_f32;
    q = q * x2 + 1.185_347e-4;
    q = q * x2 + 2.268_434_6e-3;
    q = q * x2 + 4.893_525e-3;
    x * p / q
}
