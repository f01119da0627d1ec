//! serl-lob's integration tests, one module per theme, gathered into one
//! test binary so the test build links the crate's dependencies once
//! rather than once per file.

mod invariants;
mod lobster;
mod matching;
