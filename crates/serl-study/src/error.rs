//! The one error type of a study, and the two helpers that keep its
//! messages as specific as the code that raised them: [`Context`] names
//! the file or step a lower error happened in, [`bail!`](crate::bail)
//! says what is wrong in words.

use std::fmt::Display;

/// Why a study stopped. Displayed with its sources (`{:#}` through anyhow,
/// or [`StudyError::chain`]), it reads like `loading data/x: line 4: ...`.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// What is wrong, in words (a config value, a missing file, a flag).
    #[error("{0}")]
    Message(String),
    /// Where a lower error happened; the error itself is the source.
    #[error("{context}")]
    Context {
        /// The file or step, in words (`loading data/x`).
        context: String,
        /// The lower error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A file or directory that could not be read or written.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// JSON that did not parse or serialize.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A config that could not be written back as TOML.
    #[error(transparent)]
    TomlWrite(#[from] toml::ser::Error),
    /// Bar data that did not load.
    #[error(transparent)]
    Data(#[from] serl_data::DataError),
    /// A message the order book refused.
    #[error(transparent)]
    Lob(#[from] serl_lob::LobError),
    /// A LOBSTER day that could not be opened, parsed or replayed.
    #[error(transparent)]
    Replay(#[from] serl_lob::ReplayError),
    /// Orders or an environment that could not be set up.
    #[error(transparent)]
    Env(#[from] serl_env::EnvError),
    /// An impact study that could not run.
    #[error(transparent)]
    Impact(#[from] serl_market::ImpactError),
    /// A training that failed.
    #[error(transparent)]
    Train(#[from] serl_train::TrainError),
    /// A designer or reward-critic backend that failed.
    #[error(transparent)]
    Llm(#[from] serl_llm::LlmError),
    /// An evolve run that failed.
    #[error(transparent)]
    Evolve(#[from] serl_evolve::EvolveError),
    /// A cluster plan that could not be read, or a batch that did not finish.
    #[error(transparent)]
    Cluster(#[from] serl_cluster::ClusterError),
    /// A module (reward, state, network) that did not build.
    #[error(transparent)]
    Module(#[from] serl_design::ModuleError),
}

/// A study's result.
pub type Result<T, E = StudyError> = std::result::Result<T, E>;

impl StudyError {
    /// An error that is only words.
    pub fn msg(text: impl Display) -> StudyError {
        StudyError::Message(text.to_string())
    }

    /// The error and its sources on one line, `outer: inner: ...`.
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut next = std::error::Error::source(self);
        while let Some(e) = next {
            text.push_str(": ");
            text.push_str(&e.to_string());
            next = e.source();
        }
        text
    }
}

/// Says where an error happened: `.context("reading x")?`.
pub trait Context<T> {
    /// The error, if any, as a [`StudyError::Context`] saying `what`.
    fn context(self, what: impl Display) -> Result<T>;
    /// [`Context::context`] with the words made only on an error.
    fn with_context<S: Display>(self, what: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Display) -> Result<T> {
        self.map_err(|e| StudyError::Context {
            context: what.to_string(),
            source: Box::new(e),
        })
    }

    fn with_context<S: Display>(self, what: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| StudyError::Context {
            context: what().to_string(),
            source: Box::new(e),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Display) -> Result<T> {
        self.ok_or_else(|| StudyError::msg(what))
    }

    fn with_context<S: Display>(self, what: impl FnOnce() -> S) -> Result<T> {
        self.ok_or_else(|| StudyError::msg(what()))
    }
}

/// Returns a [`StudyError::Message`] from the function: `bail!("{x} is
/// not a run directory")`.
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::StudyError::Message(format!($($arg)*)))
    };
}
