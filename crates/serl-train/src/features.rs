//! Designed state features in an environment: [`WithFeatures`] appends a
//! compiled [`FeatureSet`] (the state module, `serl_design`) to every
//! observation; the trainer widens the network's input to match.

use serl_design::FeatureSet;
use serl_expr::State;

use crate::task::TrainEnv;
use serl_env::Source;

/// An environment whose observation carries designed features.
pub struct WithFeatures<E> {
    inner: E,
    features: FeatureSet,
    /// Whether a feature reads the planted signal: only then is it asked
    /// of the environment, each step.
    reads_signal: bool,
    states: Vec<State>,
    base: Vec<f32>,
    current: Vec<f32>,
}

impl<E: TrainEnv> WithFeatures<E> {
    /// Wraps `inner`: its observation followed by one column per feature.
    pub fn new(inner: E, features: FeatureSet) -> Self {
        let base = vec![0.0; inner.obs_dim()];
        let states = features.states();
        let current = vec![0.0; inner.obs_dim() + features.len()];
        WithFeatures {
            inner,
            reads_signal: features.signal_reader().is_some(),
            features,
            states,
            base,
            current,
        }
    }

    fn refresh(&mut self) {
        self.inner.observe(&mut self.base);
        let signal = if self.reads_signal {
            self.inner.signal()
        } else {
            0.0
        };
        self.features
            .extend(&mut self.states, &self.base, signal, &mut self.current);
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
    fn reset_to(&mut self, order: usize, rng: &mut rand::rngs::SmallRng) {
        self.inner.reset_to(order, rng);
        self.states = self.features.states();
        self.refresh();
    }
    fn last_step(&self) -> Option<&serl_env::StepInfo> {
        self.inner.last_step()
    }
    fn finished(&self) -> Option<&serl_env::ExecutionOutcome> {
        self.inner.finished()
    }
    fn order(&self) -> Option<usize> {
        self.inner.order()
    }
    fn observe(&self, out: &mut [f32]) {
        out[..self.current.len()].copy_from_slice(&self.current);
    }
    fn step(&mut self, action: f64) -> (f64, bool) {
        self.step_placed(action, 0)
    }
    fn step_placed(&mut self, action: f64, placement: u8) -> (f64, bool) {
        let r = self.inner.step_placed(action, placement);
        // After the last step too: the final observation is the episode's
        // end (a reset starts the features' states anew).
        self.refresh();
        r
    }
    fn episode_pa(&self) -> f64 {
        self.inner.episode_pa()
    }
    fn signal(&self) -> f32 {
        self.inner.signal()
    }
    fn progress(&self) -> Option<(f64, usize, usize)> {
        self.inner.progress()
    }
}
