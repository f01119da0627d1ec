//! Designed state features: named programs in serl's expression language
//! over the base observation, appended to it. The state module writes
//! them, communication broadcasts them, and the trainer widens the
//! network's input to match.

use serde::{Deserialize, Serialize};
use serl_env::obs::{DESIGN_DIM, OBS_DIM};

/// Where the planted `signal` sits among the design columns: the last.
const SIGNAL_COLUMN: usize = DESIGN_DIM - 1;
use serl_expr::{Program, State, VarSet};

/// One feature: its name and its program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureDef {
    /// A name of letters, digits and underscores.
    pub name: String,
    /// The program over the observation's named columns.
    pub program: String,
}

/// Most features a state-space design may add.
pub const MAX_FEATURES: usize = 32;

/// Longest feature name.
pub const MAX_FEATURE_NAME: usize = 40;

/// Why a feature list does not compile.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {message}", self.field(""))]
pub struct FeatureError {
    /// The feature at fault, or `None` for the list as a whole.
    pub feature: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl FeatureError {
    /// Where the error is, under `prefix` (`features`, or
    /// `team.communication.broadcast`): `prefix.name`, or `prefix` itself
    /// for the whole list.
    pub fn field(&self, prefix: &str) -> String {
        match (&self.feature, prefix.is_empty()) {
            (Some(name), true) => name.clone(),
            (Some(name), false) => format!("{prefix}.{name}"),
            (None, true) => "features".into(),
            (None, false) => prefix.into(),
        }
    }
}

/// Compiled features over the columns a design may read
/// ([`serl_env::obs::design_names`]: the observation, then the resting
/// order's queue state).
///
/// As serde data it is the list of [`FeatureDef`]s; deserializing one
/// checks and compiles the list ([`check_features`]), so a stored or
/// configured feature set is valid once read and never compiled again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<FeatureDef>", into = "Vec<FeatureDef>")]
pub struct FeatureSet {
    defs: Vec<FeatureDef>,
    programs: Vec<Program>,
    /// Whether the observations it extends carry the queue columns after
    /// the market's (a placing agent's); without them the programs read
    /// the queue as empty.
    queue_input: bool,
}

impl TryFrom<Vec<FeatureDef>> for FeatureSet {
    type Error = FeatureError;
    fn try_from(defs: Vec<FeatureDef>) -> Result<Self, FeatureError> {
        check_features(&defs)
    }
}

impl From<FeatureSet> for Vec<FeatureDef> {
    fn from(f: FeatureSet) -> Self {
        f.defs
    }
}

impl Default for FeatureSet {
    /// No features.
    fn default() -> Self {
        FeatureSet {
            defs: Vec::new(),
            programs: Vec::new(),
            queue_input: false,
        }
    }
}

impl FeatureSet {
    /// Compiles `defs` over the design columns.
    fn compile(defs: &[FeatureDef]) -> Result<Self, FeatureError> {
        let vars = VarSet::from_names(serl_env::obs::design_names());
        let programs = defs
            .iter()
            .map(|d| {
                Program::compile(&d.program, &vars).map_err(|e| FeatureError {
                    feature: Some(d.name.clone()),
                    message: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FeatureSet {
            defs: defs.to_vec(),
            programs,
            queue_input: false,
        })
    }

    /// The same features over observations that do (`true`: a placing
    /// agent's, [`serl_env::QueueState`] after the market's columns) or do
    /// not carry the resting order's queue state.
    pub fn with_queue_input(mut self, present: bool) -> Self {
        self.queue_input = present;
        self
    }

    /// The first feature that reads the resting order's queue state, and
    /// the column it reads: such a feature needs an agent that places its
    /// orders.
    pub fn queue_reader(&self) -> Option<(&FeatureDef, &'static str)> {
        self.defs.iter().zip(&self.programs).find_map(|(d, p)| {
            let column = p
                .variables()
                .into_iter()
                .find(|&v| (OBS_DIM..SIGNAL_COLUMN).contains(&v))?;
            Some((d, serl_env::QueueState::NAMES[column - OBS_DIM]))
        })
    }

    /// The first feature that reads the planted `signal`
    /// ([`serl_env::obs::SIGNAL`]), if any.
    pub fn signal_reader(&self) -> Option<&FeatureDef> {
        self.defs
            .iter()
            .zip(&self.programs)
            .find_map(|(d, p)| p.variables().contains(&SIGNAL_COLUMN).then_some(d))
    }

    /// The definitions, in order.
    pub fn defs(&self) -> &[FeatureDef] {
        &self.defs
    }

    /// How many features.
    pub fn len(&self) -> usize {
        self.programs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.programs.is_empty()
    }

    /// Fresh window states, one per program, for a new episode.
    pub fn states(&self) -> Vec<State> {
        self.programs.iter().map(Program::new_state).collect()
    }

    /// The design columns' values: the market's from `obs`, then the
    /// queue's when `obs` carries them (zero otherwise), then the planted
    /// `signal`.
    fn inputs(&self, obs: &[f32], signal: f32) -> [f64; DESIGN_DIM] {
        let mut vals = [0f64; DESIGN_DIM];
        let n = if self.queue_input {
            OBS_DIM + serl_env::QueueState::COLUMNS
        } else {
            OBS_DIM
        };
        for (v, &o) in vals.iter_mut().zip(&obs[..n]) {
            *v = o as f64;
        }
        vals[SIGNAL_COLUMN] = signal as f64;
        vals
    }

    /// Each program's value over `obs` and the planted `signal` (0 where
    /// there is none), advancing its window state one step.
    pub fn eval_into(&self, states: &mut [State], obs: &[f32], signal: f32, out: &mut [f64]) {
        let vals = self.inputs(obs, signal);
        for ((p, st), o) in self.programs.iter().zip(states.iter_mut()).zip(out) {
            *o = p.eval(st, &vals);
        }
    }

    /// Writes the inner observation and the features into `out` (length
    /// inner + features), advancing each program's window state one step.
    /// The programs read the market's columns (and the queue's, see
    /// [`FeatureSet::with_queue_input`]) and the planted `signal` (0 where
    /// there is none); columns after the market's and the queue's (heard
    /// messages) pass through.
    pub fn extend(&self, states: &mut [State], inner: &[f32], signal: f32, out: &mut [f32]) {
        let vals = self.inputs(inner, signal);
        out[..inner.len()].copy_from_slice(inner);
        for (k, (p, st)) in self.programs.iter().zip(states.iter_mut()).enumerate() {
            out[inner.len() + k] = p.eval(st, &vals) as f32;
        }
    }

    /// Values repaired (NaN, ±∞, division by zero) so far, over all
    /// features.
    pub fn repaired(states: &[State]) -> u64 {
        states.iter().map(|s| s.repaired).sum()
    }
}

/// The columns a designed program may read: the observation's, the
/// resting order's queue state when the agent places its orders
/// (`placing`), and the planted `signal` where the data carries one
/// (`signal`).
pub fn observation_columns(placing: bool, signal: bool) -> Vec<String> {
    let mut columns = serl_env::obs::feature_names();
    if placing {
        columns.extend(serl_env::QueueState::NAMES.iter().map(|n| n.to_string()));
    }
    if signal {
        columns.push(serl_env::obs::SIGNAL.into());
    }
    columns
}

/// What an observation column of [`observation_columns`] means, as the
/// prompts list it: the resting order's columns and the planted signal
/// have their own docs.
pub fn column_doc(name: &str) -> &'static str {
    use serl_env::QueueState;
    if name == serl_env::obs::SIGNAL {
        return serl_env::obs::SIGNAL_DOC;
    }
    QueueState::NAMES
        .iter()
        .zip(QueueState::DOCS)
        .find_map(|(n, doc)| (*n == name).then_some(doc))
        .unwrap_or("observation feature")
}

/// The language of feature and broadcast programs as GBNF for constrained
/// decoders: the expression grammar over `columns`
/// ([`observation_columns`]), window functions included.
pub fn observation_grammar(columns: &[String]) -> String {
    serl_expr::gbnf(&VarSet::from_names(columns.to_vec()))
}

/// Checks a feature list as a designer wrote it: at most
/// [`MAX_FEATURES`], names of 1 to [`MAX_FEATURE_NAME`] letters, digits or
/// underscores, each defined once, programs that compile over the design
/// columns ([`serl_env::obs::design_names`]). Whether the queue's columns
/// may be read is the task's to say ([`FeatureSet::queue_reader`]).
pub fn check_features(defs: &[FeatureDef]) -> Result<FeatureSet, FeatureError> {
    let bad = |d: &FeatureDef, message: String| FeatureError {
        feature: Some(d.name.clone()),
        message,
    };
    if defs.len() > MAX_FEATURES {
        return Err(FeatureError {
            feature: None,
            message: format!("{} features; at most {MAX_FEATURES}", defs.len()),
        });
    }
    let mut seen = std::collections::HashSet::new();
    for d in defs {
        let ok = !d.name.is_empty()
            && d.name.len() <= MAX_FEATURE_NAME
            && d.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(bad(
                d,
                format!(
                    "feature name `{}` must be 1 to {MAX_FEATURE_NAME} letters, digits or underscores",
                    d.name
                ),
            ));
        }
        if !seen.insert(&d.name) {
            return Err(bad(d, format!("feature `{}` is defined twice", d.name)));
        }
    }
    FeatureSet::compile(defs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::communication::{Aggregate, Communication};
    use crate::modules::StateModule;

    fn def(name: &str, program: &str) -> FeatureDef {
        FeatureDef {
            name: name.into(),
            program: program.into(),
        }
    }

    /// A placing agent's observation: the market's columns with
    /// `volume = 2`, then queue ahead 0.5 and 3 minutes resting, then one
    /// heard message.
    fn placing_obs() -> Vec<f32> {
        let names = serl_env::obs::feature_names();
        let queued = OBS_DIM + serl_env::QueueState::COLUMNS;
        let mut obs = vec![0f32; queued + 1];
        obs[names.iter().position(|n| n == "volume").unwrap()] = 2.0;
        serl_env::QueueState {
            ahead: 0.5,
            minutes: 3.0,
        }
        .write(&mut obs[OBS_DIM..queued]);
        obs[queued] = 7.0;
        obs
    }

    #[test]
    fn features_read_the_resting_orders_queue_only_where_the_observation_has_it() {
        let f = check_features(&[
            def("queue_minutes", "queue_ahead / volume"),
            def("waited", "minutes_resting * 10"),
            def("vol", "volume"),
        ])
        .unwrap();
        let (reader, column) = f.queue_reader().unwrap();
        assert_eq!(
            (reader.name.as_str(), column),
            ("queue_minutes", "queue_ahead")
        );
        let obs = placing_obs();
        let placing = f.clone().with_queue_input(true);
        let mut out = vec![0f32; obs.len() + 3];
        placing.extend(&mut placing.states(), &obs, 0.0, &mut out);
        assert_eq!(&out[..obs.len()], &obs[..], "the input passes through");
        assert_eq!(&out[obs.len()..], &[0.25, 3.0, 2.0]);

        // Over an agent that crosses (no queue columns: the message follows
        // the market's), the queue reads as empty and the message is not
        // taken for it.
        let mut crossing = obs[..OBS_DIM].to_vec();
        crossing.push(7.0);
        let mut out = vec![0f32; crossing.len() + 3];
        f.extend(&mut f.states(), &crossing, 0.0, &mut out);
        assert_eq!(&out[crossing.len()..], &[0.0, 0.0, 2.0]);
    }

    /// The planted signal is a design column that no observation carries:
    /// a feature reads it from the decision, whatever follows the market's
    /// columns, and only the prompts of a planted task list it.
    #[test]
    fn a_feature_reads_the_planted_signal_beside_the_observation() {
        let f = check_features(&[
            def("edge", "signal * 2"),
            def("q", "queue_ahead"),
            def("vol", "volume"),
        ])
        .unwrap();
        assert_eq!(f.signal_reader().map(|d| d.name.as_str()), Some("edge"));
        assert_eq!(f.queue_reader().map(|(_, c)| c), Some("queue_ahead"));
        let obs = placing_obs();
        let placing = f.clone().with_queue_input(true);
        let mut out = vec![0f32; obs.len() + 3];
        placing.extend(&mut placing.states(), &obs, -1.5, &mut out);
        assert_eq!(&out[obs.len()..], &[-3.0, 0.5, 2.0]);
        assert!(check_features(&[def("v", "volume")])
            .unwrap()
            .signal_reader()
            .is_none());
        assert!(!observation_columns(true, false).contains(&"signal".to_string()));
        let planted = observation_columns(false, true);
        assert_eq!(planted.last().map(String::as_str), Some("signal"));
        assert!(!planted.contains(&"queue_ahead".to_string()));
        assert!(column_doc("signal").contains("forecast"));
    }

    #[test]
    fn a_queue_feature_needs_a_placing_task_and_never_goes_into_a_broadcast() {
        let windowed = check_features(&[def("q", "ema(minutes_resting, 3)")]).unwrap();
        assert!(windowed.queue_reader().is_some(), "read through a window");
        let market_only = check_features(&[def("v", "ema(volume, 3)")]).unwrap();
        assert!(market_only.queue_reader().is_none());

        let state = StateModule { features: windowed };
        state.check_task(true).unwrap();
        let e = state.check_task(false).unwrap_err().to_string();
        assert!(e.contains("`q` reads `minutes_resting`"), "{e}");
        assert!(e.contains("no placements"), "{e}");

        let e = Communication::new(&[def("q", "queue_ahead")], Aggregate::Mean)
            .unwrap_err()
            .to_string();
        assert!(e.contains("broadcast.q: reads `queue_ahead`"), "{e}");
    }

    #[test]
    fn a_stored_feature_set_reads_back_the_same() {
        let f = check_features(&[def("q", "queue_ahead - 1")]).unwrap();
        let json = serde_json::to_string(&f).unwrap();
        let back: FeatureSet = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f);
    }
}
