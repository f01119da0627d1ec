//! Designed state features: named programs in serl's expression language
//! over the base observation, appended to it. The state module writes
//! them, communication broadcasts them, and the trainer widens the
//! network's input to match.

use serde::{Deserialize, Serialize};
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

/// Compiled features over a base observation with the given names.
///
/// As serde data it is the list of [`FeatureDef`]s; deserializing one
/// checks and compiles the list over the environment's observation
/// ([`check_features`]), so a stored or configured feature set is valid
/// once read and never compiled again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Vec<FeatureDef>", into = "Vec<FeatureDef>")]
pub struct FeatureSet {
    defs: Vec<FeatureDef>,
    programs: Vec<Program>,
    base: usize,
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
    /// No features, over the environment's observation.
    fn default() -> Self {
        FeatureSet {
            defs: Vec::new(),
            programs: Vec::new(),
            base: serl_env::OBS_DIM,
        }
    }
}

impl FeatureSet {
    /// Compiles `defs` over columns named `base_names`.
    pub fn compile(defs: &[FeatureDef], base_names: &[String]) -> Result<Self, FeatureError> {
        if defs.len() > MAX_FEATURES {
            return Err(FeatureError {
                feature: None,
                message: format!("{} features; at most {MAX_FEATURES}", defs.len()),
            });
        }
        let vars = VarSet::from_names(base_names.to_vec());
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
            base: base_names.len(),
        })
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

    /// Each program's value over `obs` (its first columns are the ones the
    /// programs were compiled over), advancing its window state one step.
    pub fn eval_into(&self, states: &mut [State], obs: &[f32], out: &mut [f64]) {
        let vals: Vec<f64> = obs[..self.base].iter().map(|&v| v as f64).collect();
        for ((p, st), o) in self.programs.iter().zip(states.iter_mut()).zip(out) {
            *o = p.eval(st, &vals);
        }
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

    /// Values repaired (NaN, ±∞, division by zero) so far, over all
    /// features.
    pub fn repaired(states: &[State]) -> u64 {
        states.iter().map(|s| s.repaired).sum()
    }
}

/// The language of feature and broadcast programs as GBNF for constrained
/// decoders: the expression grammar over the observation's columns,
/// window functions included.
pub fn observation_grammar() -> String {
    serl_expr::gbnf(&VarSet::from_names(serl_env::obs::feature_names()))
}

/// Checks a feature list as a designer wrote it: at most
/// [`MAX_FEATURES`], names of 1 to [`MAX_FEATURE_NAME`] letters, digits or
/// underscores, each defined once, programs that compile over the
/// environment's observation.
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
    FeatureSet::compile(defs, &serl_env::obs::feature_names())
}
