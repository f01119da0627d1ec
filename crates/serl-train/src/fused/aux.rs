//! The fused learner's transition head ([`crate::transition`]): a linear
//! map from the actor trunk's last features and the action to the next
//! observation's market features, trained with Adam beside the actor.

use serde::{Deserialize, Serialize};

use super::adam::AdamState;
use crate::transition::{NextMarket, MARKET};

/// The head's weights (`(hidden + 1) × M`, the action's row last, then
/// `M` biases) and their optimiser. It starts at zero, so it changes
/// nothing until it has learned something.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuxHead {
    /// Columns of the trunk's features it reads.
    pub hidden: usize,
    /// `[W, b]`.
    pub params: Vec<Vec<f32>>,
    /// Adam's moments for them.
    pub adam: AdamState,
}

/// One minibatch's share of the targets, by row of the minibatch.
pub(super) struct AuxBatch {
    pub next: Vec<f32>,
    pub current: Vec<f32>,
    pub mask: Vec<bool>,
}

impl AuxBatch {
    /// The targets of rollout rows `rows`.
    pub(super) fn gather(t: &NextMarket, rows: &[usize]) -> Self {
        let m = MARKET.len();
        let pick = |v: &[f32]| {
            rows.iter()
                .flat_map(|&i| v[i * m..(i + 1) * m].iter().copied())
                .collect()
        };
        AuxBatch {
            next: pick(&t.next),
            current: pick(&t.current),
            mask: rows.iter().map(|&i| t.mask[i]).collect(),
        }
    }
}

/// What one minibatch gave: the gradients of the head's tensors and of
/// the trunk's features, and the summed squared errors of the head and of
/// "no change", over `rows` masked-in rows.
pub(super) struct AuxPass {
    pub grads: Vec<Vec<f32>>,
    pub d_hidden: Vec<f32>,
    pub error: f64,
    pub baseline: f64,
    pub rows: usize,
}

impl AuxHead {
    /// A zero head over `hidden` features.
    pub(super) fn new(hidden: usize) -> Self {
        let m = MARKET.len();
        let params = vec![vec![0.0; (hidden + 1) * m], vec![0.0; m]];
        let adam = AdamState::new(&params);
        AuxHead {
            hidden,
            params,
            adam,
        }
    }

    /// Whether a saved head has `other`'s shapes throughout (its tensors
    /// and its moments), so that it can replace it.
    pub(super) fn fits_like(&self, other: &AuxHead) -> bool {
        let same = |a: &[Vec<f32>], b: &[Vec<f32>]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.len() == y.len())
        };
        same(&self.params, &other.params) && self.adam.fits(&other.params)
    }

    /// The loss `weight × mean squared error` over the batch's masked-in
    /// rows, and its gradients, for trunk features `h` (`n × hidden`) and
    /// actions `a`.
    pub(super) fn pass(
        &self,
        h: &[f32],
        a: &[f32],
        n: usize,
        b: &AuxBatch,
        weight: f32,
    ) -> AuxPass {
        let (m, k) = (MARKET.len(), self.hidden);
        let rows = b.mask.iter().filter(|&&x| x).count();
        let mut p = AuxPass {
            grads: vec![vec![0.0; (k + 1) * m], vec![0.0; m]],
            d_hidden: vec![0.0; n * k],
            error: 0.0,
            baseline: 0.0,
            rows,
        };
        let scale = 2.0 * weight / (rows.max(1) * m) as f32;
        let (w, bias) = (&self.params[0], &self.params[1]);
        let mut d = vec![0f32; m];
        for i in (0..n).filter(|&i| b.mask[i]) {
            let x = &h[i * k..(i + 1) * k];
            for (j, dj) in d.iter_mut().enumerate() {
                let mut pred = bias[j] + a[i] * w[k * m + j];
                for (c, xc) in x.iter().enumerate() {
                    pred += xc * w[c * m + j];
                }
                let err = pred - b.next[i * m + j];
                let still = b.current[i * m + j] - b.next[i * m + j];
                p.error += (err * err) as f64;
                p.baseline += (still * still) as f64;
                *dj = scale * err;
            }
            for (j, dj) in d.iter().enumerate() {
                p.grads[1][j] += dj;
                p.grads[0][k * m + j] += a[i] * dj;
                for (c, xc) in x.iter().enumerate() {
                    p.grads[0][c * m + j] += xc * dj;
                    p.d_hidden[i * k + c] += w[c * m + j] * dj;
                }
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gradient_matches_finite_differences() {
        let (n, k, m) = (3, 4, MARKET.len());
        let mut head = AuxHead::new(k);
        for (t, v) in head.params.iter_mut().enumerate() {
            for (i, x) in v.iter_mut().enumerate() {
                *x = ((i * 7 + t * 3) % 11) as f32 / 11.0 - 0.5;
            }
        }
        let h: Vec<f32> = (0..n * k).map(|i| (i % 5) as f32 / 5.0 - 0.3).collect();
        let a = [0.2, -0.4, 0.9];
        let b = AuxBatch {
            next: (0..n * m).map(|i| (i % 3) as f32 - 1.0).collect(),
            current: vec![0.0; n * m],
            mask: vec![true, false, true],
        };
        let loss =
            |head: &AuxHead, h: &[f32]| head.pass(h, &a, n, &b, 0.5).error * 0.5 / (2 * m) as f64;
        let p = head.pass(&h, &a, n, &b, 0.5);
        let eps = 1e-3;
        let mut bumped = head.clone();
        bumped.params[0][5] += eps;
        let numeric = (loss(&bumped, &h) - loss(&head, &h)) / eps as f64;
        assert!(
            (numeric - p.grads[0][5] as f64).abs() < 1e-2,
            "{numeric} vs {}",
            p.grads[0][5]
        );
        let mut h2 = h.clone();
        h2[2 * k + 1] += eps;
        let numeric = (loss(&head, &h2) - loss(&head, &h)) / eps as f64;
        assert!(
            (numeric - p.d_hidden[2 * k + 1] as f64).abs() < 1e-2,
            "{numeric}"
        );
        assert!(
            p.d_hidden[k..2 * k].iter().all(|&v| v == 0.0),
            "a masked row has no gradient"
        );
        assert_eq!(p.rows, 2);
    }
}
