//! What can go wrong loading or running a local model.

/// An error of the local backend. Each names the model file where one is
/// involved, and says what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The model file does not exist or cannot be read.
    #[error("{path}: cannot read the model file: {message}")]
    Unreadable {
        /// The model file.
        path: String,
        /// The operating system's error.
        message: String,
    },
    /// A model file cannot be written.
    #[error("{path}: cannot write the model file: {message}")]
    Write {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The file is not a GGUF model (wrong magic or a header that does
    /// not parse).
    #[error("{path}: not a GGUF model file: {message}")]
    NotGguf {
        /// The model file.
        path: String,
        /// What the reader found.
        message: String,
    },
    /// The file ends before the tensor data its header announces: a
    /// download or copy that was cut short.
    #[error(
        "{path}: the file is truncated: its header announces {needed} bytes, the file has {actual}"
    )]
    Truncated {
        /// The model file.
        path: String,
        /// Bytes the header's tensors need.
        needed: u64,
        /// Bytes the file has.
        actual: u64,
    },
    /// The file is GGUF but holds something serl cannot run: another
    /// architecture, tokenizer or a missing metadata key.
    #[error("{path}: unsupported model: {message}")]
    Unsupported {
        /// The model file.
        path: String,
        /// What is not supported.
        message: String,
    },
    /// The chat template in the file does not parse or does not render.
    #[error("{path}: chat template: {message}")]
    Template {
        /// The model file.
        path: String,
        /// minijinja's error.
        message: String,
    },
    /// The prompt does not fit in the context.
    #[error("the prompt has {tokens} tokens; the context holds {context} (raise [llm.local] context_length or shorten the prompt templates)")]
    ContextFull {
        /// Tokens in the rendered prompt.
        tokens: usize,
        /// The context length.
        context: usize,
    },
    /// The grammar or JSON schema constraining a reply does not compile.
    #[error("the constraint does not compile: {0}")]
    Constraint(String),
    /// An adapter directory is unreadable, malformed, or was trained on
    /// another model.
    #[error("{path}: adapter: {message}")]
    Adapter {
        /// The adapter's file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The model failed while running (a tensor error).
    #[error("the model failed: {0}")]
    Run(String),
}

impl From<candle_core::Error> for LocalError {
    fn from(e: candle_core::Error) -> Self {
        LocalError::Run(e.to_string())
    }
}
