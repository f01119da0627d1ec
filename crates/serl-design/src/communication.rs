//! The communication module: what each execution agent broadcasts and
//! how it hears the others.

use serde::{Deserialize, Serialize};

use crate::features::{check_features, FeatureDef, FeatureSet};
use crate::kind::{err, ModuleError, ModuleKind};

/// Most values one agent may broadcast.
pub const MAX_BROADCAST: usize = 8;

/// How the messages of the other agents are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    /// The mean of the others' messages.
    Mean,
    /// Their sum.
    Sum,
    /// Softmax-weighted by the dot product of each message with the
    /// receiving agent's own message.
    Attention,
}

/// What each execution agent broadcasts and how it hears the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Communication {
    /// Feature programs over the agent's own observation, one value each.
    pub broadcast: Vec<FeatureDef>,
    /// How a receiver combines the others' messages.
    pub aggregate: Aggregate,
}

impl Communication {
    /// Checks the broadcast programs as a designed module and compiles
    /// them over the environment's observation.
    pub fn validate(&self) -> Result<FeatureSet, ModuleError> {
        let kind = ModuleKind::Communication;
        if self.broadcast.is_empty() || self.broadcast.len() > MAX_BROADCAST {
            return Err(err(
                kind,
                format!(
                    "broadcast 1 to {MAX_BROADCAST} values, not {}",
                    self.broadcast.len()
                ),
            ));
        }
        check_features(&self.broadcast)
            .map_err(|e| err(kind, format!("{}: {}", e.field("broadcast"), e.message)))
    }

    /// The combined message agent `me` receives from the others.
    pub fn aggregate(&self, messages: &[Vec<f64>], me: usize) -> Vec<f64> {
        let dim = self.broadcast.len();
        let others: Vec<&Vec<f64>> = messages
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != me)
            .map(|(_, m)| m)
            .collect();
        let mut out = vec![0.0; dim];
        if others.is_empty() {
            return out;
        }
        let weights: Vec<f64> = match self.aggregate {
            Aggregate::Sum => vec![1.0; others.len()],
            Aggregate::Mean => vec![1.0 / others.len() as f64; others.len()],
            Aggregate::Attention => {
                let own = &messages[me];
                let scores: Vec<f64> = others
                    .iter()
                    .map(|m| {
                        m.iter().zip(own).map(|(a, b)| a * b).sum::<f64>()
                            / (dim.max(1) as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let z: f64 = e.iter().sum();
                e.iter().map(|v| v / z).collect()
            }
        };
        for (m, w) in others.iter().zip(weights) {
            for (o, v) in out.iter_mut().zip(m.iter()) {
                *o += w * v;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attention_weighs_similar_messages_more() {
        let c = Communication {
            broadcast: vec![FeatureDef {
                name: "a".into(),
                program: "time_left".into(),
            }],
            aggregate: Aggregate::Attention,
        };
        let msgs = vec![vec![2.0], vec![2.0], vec![-2.0]];
        let got = c.aggregate(&msgs, 0);
        assert!(got[0] > 1.9, "{got:?}");
        let mean = Communication {
            aggregate: Aggregate::Mean,
            ..c
        };
        assert_eq!(mean.aggregate(&msgs, 0), vec![0.0]);
    }
}
