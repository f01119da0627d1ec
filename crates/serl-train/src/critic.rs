//! A reward critic inside training: every `every` updates a critic reads
//! each reward term's statistics since its last review and the learning
//! curve, and returns new weights for the terms, within bounds. The
//! reward is then `Σ wₖ·termₖ` ([`TermRecorder`] with weights set, the design's reward
//! program split at its top-level sum), so nothing is compiled again.
//!
//! This brings the LLM reward critics of the published systems inside the
//! run: SE-RL re-designs a reward between outer iterations; here the
//! weights move while the policy learns. The critic is a trait,
//! [`RewardCritic`]: the [`BuiltinCritic`] is a deterministic rule, and a
//! language model can be one (the evolve loop passes its designer's).
//! Every review is logged in the update's record (`reward_weights`), so a
//! run's weights are plotted in its report and can be replayed exactly
//! (`replay = "RUN/metrics.jsonl"`), and a resumed run picks them up.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serl_design::{TermRecorder, TermStats};

use crate::record::UpdateRecord;
use crate::TrainError;

/// `[train.reward_critic]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CriticConfig {
    /// Updates between reviews; 0 switches the critic off.
    pub every: usize,
    /// The smallest weight a term may get.
    pub min_weight: f64,
    /// The largest.
    pub max_weight: f64,
    /// The most one review multiplies or divides a weight by.
    pub max_step: f64,
    /// Who reviews: the builtin rule, or a language model the caller
    /// supplies (`serl train` builds it from its `[llm]` table).
    pub critic: CriticKind,
    /// A run's `metrics.jsonl` whose logged weights to apply, update by
    /// update, instead of asking a critic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<PathBuf>,
}

impl Default for CriticConfig {
    fn default() -> Self {
        CriticConfig {
            every: 0,
            min_weight: 0.25,
            max_weight: 4.0,
            max_step: 1.5,
            critic: CriticKind::Builtin,
            replay: None,
        }
    }
}

impl CriticConfig {
    /// Whether the critic is off (and left out of saved configs).
    pub fn is_off(&self) -> bool {
        self.every == 0
    }

    pub(crate) fn check(&self) -> Result<(), TrainError> {
        let bad = |field: &str, message: String| {
            Err(TrainError::Config {
                field: format!("reward_critic.{field}"),
                message,
            })
        };
        if self.is_off() {
            return Ok(());
        }
        if !(self.min_weight > 0.0 && self.min_weight <= 1.0) {
            return bad(
                "min_weight",
                format!("{} is not in (0, 1]", self.min_weight),
            );
        }
        if !(self.max_weight >= 1.0 && self.max_weight <= 100.0) {
            return bad(
                "max_weight",
                format!("{} is not in [1, 100]", self.max_weight),
            );
        }
        if !(self.max_step > 1.0 && self.max_step <= 10.0) {
            return bad("max_step", format!("{} is not in (1, 10]", self.max_step));
        }
        Ok(())
    }
}

/// Who reviews the weights.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CriticKind {
    /// [`BuiltinCritic`].
    #[default]
    Builtin,
    /// A language model (`serl_evolve::LlmCritic`), supplied with the
    /// training session.
    Llm,
}

/// What a critic reads at a review.
#[derive(Debug, Clone, Serialize)]
pub struct CriticReview<'a> {
    /// The update just finished.
    pub update: usize,
    /// Each term's statistics over the steps since the last review.
    pub terms: &'a [TermStats],
    /// The weights in force since the last review.
    pub weights: &'a [f64],
    /// Each review window so far, the one just finished last: the weights
    /// it trained with and its training episodes' mean PA, bps (the
    /// learning curve by window; `f64::MIN` for a window in which no
    /// episode finished).
    pub windows: &'a [(Vec<f64>, f64)],
    /// The bounds every weight must stay within.
    pub bounds: (f64, f64),
}

/// Something that re-weights a reward's terms during training.
pub trait RewardCritic: Send {
    /// Its name in logs and reports.
    fn name(&self) -> String;
    /// The new weights (one per term; clamped to the bounds by the
    /// caller), or why there are none (the weights then stay).
    fn review(&mut self, r: &CriticReview) -> Result<Vec<f64>, String>;
}

/// The builtin critic: a coordinate search on the learning curve. When
/// the window just finished fell below the best window's training PA, it
/// returns to that window's weights; it then moves one term (in turn) by
/// `max_step`, up when the term's share of the reward's weighted
/// magnitude is below an equal share, down when above. Deterministic, so
/// a run with it is reproducible from its seed.
#[derive(Debug, Clone)]
pub struct BuiltinCritic {
    /// The factor one review moves a weight by.
    pub step: f64,
}

impl RewardCritic for BuiltinCritic {
    fn name(&self) -> String {
        "builtin".into()
    }

    fn review(&mut self, r: &CriticReview) -> Result<Vec<f64>, String> {
        let k = r.weights.len();
        if k < 2 {
            return Ok(r.weights.to_vec());
        }
        let best = r
            .windows
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(w, pa)| (w.clone(), *pa));
        let mut w = match (&best, r.windows.last()) {
            (Some((best_w, best_pa)), Some((_, last_pa))) if last_pa < best_pa => best_w.clone(),
            _ => r.weights.to_vec(),
        };
        let magnitude: Vec<f64> = r
            .terms
            .iter()
            .zip(&w)
            .map(|(t, w)| w * (t.mean * t.mean + t.std * t.std).sqrt())
            .collect();
        let total: f64 = magnitude.iter().sum();
        let term = r.windows.len() % k;
        let share = if total > 0.0 {
            magnitude[term] / total
        } else {
            1.0 / k as f64
        };
        let factor = if share < 1.0 / k as f64 {
            self.step
        } else {
            1.0 / self.step
        };
        w[term] = (w[term] * factor).clamp(r.bounds.0, r.bounds.1);
        Ok(w)
    }
}

/// The weights an earlier run logged, update by update.
struct Replay {
    records: Vec<UpdateRecord>,
}

impl RewardCritic for Replay {
    fn name(&self) -> String {
        "replay".into()
    }

    fn review(&mut self, r: &CriticReview) -> Result<Vec<f64>, String> {
        self.records
            .iter()
            .find(|rec| rec.update == r.update)
            .and_then(|rec| rec.reward_weights.clone())
            .ok_or_else(|| format!("the replayed run logged no weights for update {}", r.update))
    }
}

/// The critic in a training loop: the weighted reward it steers, who
/// decides, and the learning curve by review window.
pub struct CriticHook {
    reward: Arc<TermRecorder>,
    critic: Box<dyn RewardCritic>,
    cfg: CriticConfig,
    weights: Vec<f64>,
    windows: Vec<(Vec<f64>, f64)>,
    window_pa: (f64, usize),
}

impl CriticHook {
    /// The hook for `cfg` steering `reward`: a replay of `cfg.replay`, or
    /// `critic` (the builtin one when none is given).
    pub fn new(
        reward: Arc<TermRecorder>,
        cfg: &CriticConfig,
        critic: Option<Box<dyn RewardCritic>>,
    ) -> Result<Self, TrainError> {
        let critic: Box<dyn RewardCritic> = match (&cfg.replay, critic) {
            (Some(path), _) => Box::new(Replay {
                records: crate::record::read_metrics(path)?,
            }),
            (None, Some(c)) => c,
            (None, None) if cfg.critic == CriticKind::Llm => {
                return Err(TrainError::Config {
                    field: "reward_critic.critic".into(),
                    message: "\"llm\" needs a language model: `serl train` builds one from its [llm] table (backend openai, ollama, local or replay)".into(),
                })
            }
            (None, None) => Box::new(BuiltinCritic { step: cfg.max_step }),
        };
        let weights = vec![1.0; reward.len()];
        reward.set_weights(weights.clone());
        Ok(CriticHook {
            reward,
            critic,
            cfg: cfg.clone(),
            weights,
            windows: Vec::new(),
            window_pa: (0.0, 0),
        })
    }

    /// Picks up a resumed run: the weights and windows its records logged.
    pub(crate) fn resume(&mut self, records: &[UpdateRecord]) {
        for r in records {
            self.after_update(r, false);
            if let Some(w) = &r.reward_weights {
                self.set_weights(w.clone());
            }
        }
    }

    /// Counts update `rec`'s episodes into the window, and at a review
    /// asks the critic (when `ask`; a resumed run reads the weights its
    /// records logged instead). Returns the weights now in force.
    pub(crate) fn after_update(&mut self, rec: &UpdateRecord, ask: bool) -> Vec<f64> {
        if let Some(pa) = rec.episode_pa {
            self.window_pa.0 += pa * rec.episodes as f64;
            self.window_pa.1 += rec.episodes;
        }
        if !(rec.update + 1).is_multiple_of(self.cfg.every) {
            return self.weights.clone();
        }
        let (sum, n) = std::mem::take(&mut self.window_pa);
        let pa = if n > 0 { sum / n as f64 } else { f64::MIN };
        self.windows.push((self.weights.clone(), pa));
        let terms = self.reward.take_stats();
        let next = if ask {
            let review = CriticReview {
                update: rec.update,
                terms: &terms,
                weights: &self.weights,
                windows: &self.windows,
                bounds: (self.cfg.min_weight, self.cfg.max_weight),
            };
            match self.critic.review(&review) {
                Ok(w) if w.len() == self.weights.len() && w.iter().all(|v| v.is_finite()) => w,
                Ok(w) => {
                    tracing::warn!(
                        "reward critic {}: {} weights for {} terms; kept",
                        self.critic.name(),
                        w.len(),
                        self.weights.len()
                    );
                    self.weights.clone()
                }
                Err(e) => {
                    tracing::warn!("reward critic {}: {e}; weights kept", self.critic.name());
                    self.weights.clone()
                }
            }
        } else {
            self.weights.clone()
        };
        self.weights = next
            .into_iter()
            .map(|v| v.clamp(self.cfg.min_weight, self.cfg.max_weight))
            .collect();
        self.reward.set_weights(self.weights.clone());
        self.weights.clone()
    }

    /// Sets the weights a resumed run had reached.
    pub(crate) fn set_weights(&mut self, w: Vec<f64>) {
        if w.len() == self.weights.len() {
            self.reward.set_weights(w.clone());
            self.weights = w;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(magnitudes: &[f64]) -> Vec<TermStats> {
        magnitudes
            .iter()
            .map(|&m| TermStats {
                term: String::new(),
                mean: m,
                std: 0.0,
                repaired_share: 0.0,
            })
            .collect()
    }

    #[test]
    fn the_builtin_critic_leans_toward_equal_shares_and_returns_after_a_fall() {
        let mut c = BuiltinCritic { step: 2.0 };
        let terms = stats(&[9.0, 1.0]);
        let first = c
            .review(&CriticReview {
                update: 9,
                terms: &terms,
                weights: &[1.0, 1.0],
                windows: &[],
                bounds: (0.25, 4.0),
            })
            .unwrap();
        assert_eq!(first, [0.5, 1.0], "term 0 carries 90%: halved");
        let windows = vec![
            (vec![1.0, 1.0], 3.0),
            (vec![0.5, 1.0], 1.0),
            (vec![0.5, 1.0], 0.5),
        ];
        let second = c
            .review(&CriticReview {
                update: 19,
                terms: &terms,
                weights: &[0.5, 1.0],
                windows: &windows,
                bounds: (0.25, 4.0),
            })
            .unwrap();
        assert_eq!(
            second,
            [1.0, 2.0],
            "back to the best window's, then term 1 up"
        );
    }
}
