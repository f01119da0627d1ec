//! No code: this crate only unifies dependency features (see its
//! `Cargo.toml`), so that `cargo run -p serl` and `cargo test --workspace`
//! compile the dependencies once.
