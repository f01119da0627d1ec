//! Evenly spaced quantiles of a sorted sample: how a real day's order
//! sizes and depths are kept as data ([`crate::OrderStats`],
//! [`crate::OrderFlow`]).

/// `sorted`'s values at `n` evenly spaced quantiles (the midpoints of `n`
/// equal shares), each a value of the sample; empty for an empty sample.
/// Drawing one of them uniformly reproduces the sample's distribution,
/// its atoms (a round lot, the touch) included.
pub(crate) fn evenly_spaced_quantiles<T: Copy>(sorted: &[T], n: usize) -> Vec<T> {
    if sorted.is_empty() {
        return Vec::new();
    }
    let len = sorted.len();
    (0..n)
        .map(|i| sorted[(((i as f64 + 0.5) / n as f64) * len as f64) as usize % len])
        .collect()
}
