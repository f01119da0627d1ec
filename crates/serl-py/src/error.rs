//! serl's errors in Python: one exception class, `serl.SerlError` (a
//! `ValueError`), carrying serl's message with its causes (the file, the
//! line, the field).

use pyo3::PyErr;

pyo3::create_exception!(
    _native,
    SerlError,
    pyo3::exceptions::PyValueError,
    "An error from serl: a missing or malformed file, an invalid config or module, a bad action."
);

/// A failure, in words, on its way to Python as a [`SerlError`].
#[derive(Debug)]
pub struct Fail(pub String);

impl Fail {
    /// A failure described by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Fail(message.into())
    }
}

impl From<Fail> for PyErr {
    fn from(f: Fail) -> PyErr {
        SerlError::new_err(f.0)
    }
}

/// An error and every cause under it, joined with ": ", as the `serl`
/// binary prints them.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
