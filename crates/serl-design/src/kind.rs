//! Which module a text is, and why one was rejected.

use serde::{Deserialize, Serialize};

/// Which module a text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleKind {
    /// The per-step reward, an expression program.
    Reward,
    /// Designed state features.
    State,
    /// The policy network.
    Architecture,
    /// Synthetic market days to train on.
    Imagination,
    /// The market's background population.
    Profiling,
    /// What execution agents tell each other.
    Communication,
    /// An intraday execution plan the executor follows.
    Plan,
}

impl ModuleKind {
    /// Every kind, in the order prompts and reports list them.
    pub const ALL: [ModuleKind; 7] = [
        ModuleKind::Reward,
        ModuleKind::State,
        ModuleKind::Architecture,
        ModuleKind::Imagination,
        ModuleKind::Profiling,
        ModuleKind::Communication,
        ModuleKind::Plan,
    ];

    /// The kind's name in configs, prompts and run directories.
    pub fn name(self) -> &'static str {
        match self {
            ModuleKind::Reward => "reward",
            ModuleKind::State => "state",
            ModuleKind::Architecture => "architecture",
            ModuleKind::Imagination => "imagination",
            ModuleKind::Profiling => "profiling",
            ModuleKind::Communication => "communication",
            ModuleKind::Plan => "plan",
        }
    }

    /// The kind named `s`, if any.
    pub fn parse_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Written as JSON (all but the reward, which is a program).
    pub fn is_json(self) -> bool {
        self != ModuleKind::Reward
    }
}

impl std::fmt::Display for ModuleKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a module was rejected: what the designer is told.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind} module: {message}")]
pub struct ModuleError {
    /// The module's kind name, or the check that failed (`smoke test`).
    pub kind: &'static str,
    /// What is wrong, precise enough to send back to the designer.
    pub message: String,
}

pub(crate) fn err(kind: ModuleKind, message: impl Into<String>) -> ModuleError {
    ModuleError {
        kind: kind.name(),
        message: message.into(),
    }
}

/// A JSON module's text parsed as `T`, with the line and column of the
/// first error.
pub(crate) fn json<T: for<'de> Deserialize<'de>>(
    kind: ModuleKind,
    text: &str,
) -> Result<T, ModuleError> {
    serde_json::from_str(text).map_err(|e| {
        err(
            kind,
            format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        )
    })
}

/// `v` is finite and within `[lo, hi]`, or the error that names `field`.
pub(crate) fn in_range(
    kind: ModuleKind,
    field: &str,
    v: f64,
    lo: f64,
    hi: f64,
) -> Result<(), ModuleError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(err(kind, format!("{field} = {v} is outside [{lo}, {hi}]")))
    }
}
