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
    /// The largest of the others' values, per broadcast value.
    Max,
}

/// What each execution agent broadcasts and how it hears the others,
/// compiled: built only by [`Communication::new`] or by deserializing
/// `{"broadcast": [...], "aggregate": ...}`, both of which check and
/// compile the broadcast programs once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "CommunicationText", into = "CommunicationText")]
pub struct Communication {
    broadcast: FeatureSet,
    aggregate: Aggregate,
}

/// A communication module as it is written and stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommunicationText {
    pub(crate) broadcast: Vec<FeatureDef>,
    pub(crate) aggregate: Aggregate,
}

impl TryFrom<CommunicationText> for Communication {
    type Error = ModuleError;
    fn try_from(t: CommunicationText) -> Result<Self, ModuleError> {
        Communication::new(&t.broadcast, t.aggregate)
    }
}

impl From<Communication> for CommunicationText {
    fn from(c: Communication) -> Self {
        CommunicationText {
            broadcast: c.broadcast.into(),
            aggregate: c.aggregate,
        }
    }
}

impl Communication {
    /// Checks the broadcast programs as a designed module (1 to
    /// [`MAX_BROADCAST`] of them) and compiles them over the environment's
    /// observation (the market's columns: no resting order's queue).
    pub fn new(broadcast: &[FeatureDef], aggregate: Aggregate) -> Result<Self, ModuleError> {
        let kind = ModuleKind::Communication;
        if broadcast.is_empty() || broadcast.len() > MAX_BROADCAST {
            return Err(err(
                kind,
                format!(
                    "broadcast 1 to {MAX_BROADCAST} values, not {}",
                    broadcast.len()
                ),
            ));
        }
        let broadcast = check_features(broadcast)
            .map_err(|e| err(kind, format!("{}: {}", e.field("broadcast"), e.message)))?;
        if let Some((d, column)) = broadcast.queue_reader() {
            return Err(err(
                kind,
                format!(
                    "broadcast.{}: reads `{column}`, the agent's own resting order; a message is computed from the market's columns, which every agent sees",
                    d.name
                ),
            ));
        }
        Ok(Communication {
            broadcast,
            aggregate,
        })
    }

    /// The compiled broadcast programs, one value each.
    pub fn broadcast(&self) -> &FeatureSet {
        &self.broadcast
    }

    /// How a receiver combines the others' messages.
    pub fn aggregation(&self) -> Aggregate {
        self.aggregate
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
        if self.aggregate == Aggregate::Max {
            for (k, o) in out.iter_mut().enumerate() {
                *o = others
                    .iter()
                    .map(|m| m[k])
                    .fold(f64::NEG_INFINITY, f64::max);
            }
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
            Aggregate::Max => unreachable!("combined above"),
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
        let a = FeatureDef {
            name: "a".into(),
            program: "time_left".into(),
        };
        let c = Communication::new(std::slice::from_ref(&a), Aggregate::Attention).unwrap();
        let msgs = vec![vec![2.0], vec![2.0], vec![-2.0]];
        let got = c.aggregate(&msgs, 0);
        assert!(got[0] > 1.9, "{got:?}");
        let mean = Communication::new(std::slice::from_ref(&a), Aggregate::Mean).unwrap();
        assert_eq!(mean.aggregate(&msgs, 0), vec![0.0]);
        let max = Communication::new(&[a], Aggregate::Max).unwrap();
        assert_eq!(max.aggregate(&msgs, 0), vec![2.0]);
        assert_eq!(max.aggregate(&msgs, 1), vec![2.0]);
        assert_eq!(
            max.aggregate(&[vec![-1.0], vec![-3.0]], 0),
            vec![-3.0],
            "the others' only"
        );
        assert_eq!(max.aggregate(&[vec![5.0]], 0), vec![0.0], "alone: silence");
    }
}
