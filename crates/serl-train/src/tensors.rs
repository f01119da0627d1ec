//! Moving numbers between burn's tensors and plain vectors: what the
//! learners, the fused passes and the policies all do.

use burn::tensor::{Device, Int, Tensor, TensorData};

/// `rows` (row-major) as an `n`-row matrix.
pub(crate) fn matrix(rows: &[f32], n: usize, device: &Device) -> Tensor<2> {
    Tensor::from_data(
        TensorData::new(rows.to_vec(), [n, rows.len() / n.max(1)]),
        device,
    )
}

/// A matrix's values, row-major.
pub(crate) fn floats(t: Tensor<2>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap_or_default()
}

/// A vector's values.
pub(crate) fn floats1(t: Tensor<1>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap_or_default()
}

/// A tensor of action indices.
pub(crate) fn indices(v: &[f32], device: &Device) -> Tensor<2, Int> {
    let ints: Vec<i64> = v.iter().map(|&a| a as i64).collect();
    Tensor::<1, Int>::from_data(TensorData::new(ints, [v.len()]), device).reshape([v.len(), 1])
}
