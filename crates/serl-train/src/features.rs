//! Designed state features: named programs in serl's expression language
//! over the base observation, appended to it. The state-space module
//! writes them; the trainer widens the network's input to match.

use serde::{Deserialize, Serialize};
use serl_expr::{Program, State, VarSet};

use crate::task::{Source, TrainEnv};
use crate::TrainError;

/// One feature: its name and its program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureDef {
    pub name: String,
    pub program: String,
}

/// Compiled features over a base observation with the given names.
#[derive(Debug, Clone)]
pub struct FeatureSet {
    pub defs: Vec<FeatureDef>,
    programs: Vec<Program>,
    base: usize,
}

/// Most features a state-space design may add.
pub const MAX_FEATURES: usize = 32;

impl FeatureSet {
    pub fn compile(defs: &[FeatureDef], base_names: &[String]) -> Result<Self, TrainError> {
        if defs.len() > MAX_FEATURES {
            return Err(TrainError::Config {
                field: "features".into(),
                message: format!("{} features; at most {MAX_FEATURES}", defs.len()),
            });
        }
        let vars = VarSet::from_names(base_names.to_vec());
        let programs = defs
            .iter()
            .map(|d| {
                Program::compile(&d.program, &vars).map_err(|e| TrainError::Config {
                    field: format!("features.{}", d.name),
                    message: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FeatureSet {
            defs: defs.to_vec(),
            programs,
            base: base_names.len(),
        })
    }

    pub fn len(&self) -> usize {
        self.programs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }

    pub fn states(&self) -> Vec<State> {
        self.programs.iter().map(Program::new_state).collect()
    }

    /// Writes the inner observation and the features into `out` (length
    /// inner + features), advancing each program's window state one step.
    /// The programs read the first columns, the ones they were compiled
    /// over; columns after them (heard messages) pass through.
    pub fn extend(&self, states: &mut [State], inner: &[f32], out: &mut [f32]) {
        let vals: Vec<f64> = inner[..self.base].iter().map(|&v| v as f64).collect();
        out[..inner.len()].copy_from_slice(inner);
        for (k, (p, st)) in self.programs.iter().zip(states.iter_mut()).enumerate() {
            out[inner.len() + k] = p.eval(st, &vals) as f32;
        }
    }

    /// Values repaired (NaN, ±∞, division by zero) so far, per feature.
    pub fn repaired(states: &[State]) -> u64 {
        states.iter().map(|s| s.repaired).sum()
    }
}

/// An environment whose observation carries designed features.
pub struct WithFeatures<E> {
    inner: E,
    features: FeatureSet,
    states: Vec<State>,
    base: Vec<f32>,
    current: Vec<f32>,
}

impl<E: TrainEnv> WithFeatures<E> {
    pub fn new(inner: E, features: FeatureSet) -> Self {
        let base = vec![0.0; inner.obs_dim()];
        let states = features.states();
        let current = vec![0.0; inner.obs_dim() + features.len()];
        WithFeatures {
            inner,
            features,
            states,
            base,
            current,
        }
    }

    fn refresh(&mut self) {
        self.inner.observe(&mut self.base);
        self.features
            .extend(&mut self.states, &self.base, &mut self.current);
    }
}

impl<E: TrainEnv> TrainEnv for WithFeatures<E> {
    fn obs_dim(&self) -> usize {
        self.current.len()
    }
    fn source(&self) -> Source {
        self.inner.source()
    }
    fn reset(&mut self, rng: &mut rand::rngs::SmallRng) {
        self.inner.reset(rng);
        self.states = self.features.states();
        self.refresh();
    }
    fn observe(&self, out: &mut [f32]) {
        out[..self.current.len()].copy_from_slice(&self.current);
    }
    fn step(&mut self, action: f64) -> (f64, bool) {
        let r = self.inner.step(action);
        if !r.1 {
            self.refresh();
        }
        r
    }
    fn episode_pa(&self) -> f64 {
        self.inner.episode_pa()
    }
}
