//! Ctrl-C and SIGTERM (`timeout`, Slurm's time limit) during a long
//! command: a word on stderr and the command that goes on from where the
//! run stopped, rather than a silent death.
//!
//! A run directory is resumable at any instant (every file is written
//! atomically, the loop state last), so stopping at once loses at most
//! the work since the last checkpoint. While training, the first signal
//! waits for the update under way to be written, so that it is kept; a
//! second one stops at once.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::error::{Context, Result};

type Hint = Box<dyn Fn() -> String + Send + Sync>;

/// What to say on stopping: how to go on (read when the signal comes,
/// since what there is to resume changes as the run goes).
static HINT: OnceLock<Hint> = OnceLock::new();
/// Whether a clean point ([`at_clean_point`]) is coming: a training is
/// under way.
static TRAINING: AtomicBool = AtomicBool::new(false);
/// The signal that asked to stop at the next clean point (0: none).
static PENDING: AtomicI32 = AtomicI32::new(0);

/// Handles SIGINT and SIGTERM from now on; `hint` says how to go on.
pub fn on_signal(hint: impl Fn() -> String + Send + Sync + 'static) -> Result<()> {
    if HINT.set(Box::new(hint)).is_err() {
        return Ok(());
    }
    let mut signals = Signals::new([SIGINT, SIGTERM]).context("handling SIGINT and SIGTERM")?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if TRAINING.load(Ordering::SeqCst) && PENDING.swap(sig, Ordering::SeqCst) == 0 {
                    eprintln!(
                        "\ninterrupted: stopping once the current update is saved (interrupt again to stop now)"
                    );
                    continue;
                }
                stop(sig);
            }
        })
        .context("starting the signal thread")?;
    Ok(())
}

/// Runs `f`, a training that calls [`at_clean_point`] after each update.
pub fn training<T>(f: impl FnOnce() -> T) -> T {
    TRAINING.store(true, Ordering::SeqCst);
    let out = f();
    TRAINING.store(false, Ordering::SeqCst);
    out
}

/// A point where stopping loses nothing: stops when a signal asked to.
pub fn at_clean_point() {
    match PENDING.load(Ordering::SeqCst) {
        0 => {}
        sig => stop(sig),
    }
}

/// Says how to go on and exits as a process killed by `sig` reports
/// itself to a shell (128 + the signal's number).
fn stop(sig: i32) -> ! {
    let _ = std::io::stdout().flush();
    let hint = HINT.get().map(|h| h()).unwrap_or_default();
    eprintln!("\ninterrupted: {hint}");
    super::held::release();
    super::trace::flush();
    std::process::exit(128 + sig)
}
