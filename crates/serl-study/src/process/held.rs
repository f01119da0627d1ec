//! The run directory this process coordinates (one coordinator per run),
//! held until the command ends or a signal stops it.

use std::path::Path;
use std::sync::Mutex;

use crate::error::Result;
use crate::rundir::{OutRule, RunKind, RunLock};

static HELD: Mutex<Option<RunLock>> = Mutex::new(None);

/// This command line, as a run records it and its lock names it.
fn command_line() -> String {
    std::iter::once("serl".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Claims `dir` for a run of `kind` under the flags `(force, resume)`
/// ([`crate::rundir::claim`]) for this command line, held until
/// [`release`] (or a signal's stop); the lock's notices go to stderr.
pub fn claim_run(dir: &Path, kind: RunKind, (force, resume): (bool, bool)) -> Result<()> {
    if force && resume {
        crate::bail!("--force starts the run afresh and --resume goes on with it: give one");
    }
    let rule = OutRule::from_flags(force, resume);
    let lock = crate::rundir::claim(dir, kind, rule, &command_line(), &|l| eprintln!("{l}"))?;
    *HELD.lock().unwrap_or_else(|p| p.into_inner()) = Some(lock);
    Ok(())
}

/// Lets go of the run lock, if this process holds one.
pub fn release() {
    let held = HELD.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(held);
}
