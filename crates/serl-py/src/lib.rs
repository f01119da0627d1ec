//! # serl-py: serl from Python
//!
//! The native half of the `serl` Python package (python/serl): the
//! module `serl._native`, built into a wheel by maturin
//! (python/pyproject.toml). Nothing in the workspace depends on it.
//!
//! - `env.rs`: `Envs`, N of the trainer's own execution environments
//!   (static replay or dynamic market, designed features and reward),
//!   stepped one at a time or all together, numpy in and out;
//! - `backtest.rs`: `backtest`, serl's backtester with Python callables
//!   among the strategies;
//! - `runs.rs`: `run_train` and `run_evolve`, the workflows of `serl
//!   train` and `serl evolve` through the same library functions;
//! - `setup.rs`: configs, data, orders and the designed module files, read
//!   with serl's own readers;
//! - `error.rs`: `SerlError`, serl's messages as a Python exception.
//!
//! The Python layer (`serl.ExecutionEnv`, `serl.VecExecutionEnv`,
//! `serl.backtest`, `serl.load_run`) gives these the Gymnasium API and
//! pandas tables; docs/python.md shows it.

use pyo3::prelude::*;

mod backtest;
mod env;
mod error;
mod runs;
mod setup;

/// serl's native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("SerlError", m.py().get_type::<error::SerlError>())?;
    m.add_class::<env::Envs>()?;
    m.add_function(wrap_pyfunction!(backtest::backtest, m)?)?;
    m.add_function(wrap_pyfunction!(runs::run_train, m)?)?;
    m.add_function(wrap_pyfunction!(runs::run_evolve, m)?)?;
    m.add("OBS_COLUMNS", serl_env::obs::feature_names())?;
    Ok(())
}
