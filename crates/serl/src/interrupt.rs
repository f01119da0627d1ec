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
use std::sync::{Mutex, OnceLock};

use std::path::Path;

use anyhow::{Context, Result};
use serl_study::rundir::{OutRule, RunKind};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

type Hint = Box<dyn Fn() -> String + Send + Sync>;

/// What to say on stopping: how to go on (read when the signal comes,
/// since what there is to resume changes as the run goes).
static HINT: OnceLock<Hint> = OnceLock::new();
/// Whether a clean point ([`at_clean_point`]) is coming: a training is
/// under way.
static TRAINING: AtomicBool = AtomicBool::new(false);
/// The signal that asked to stop at the next clean point (0: none).
static PENDING: AtomicI32 = AtomicI32::new(0);

/// The run directory this command holds (one coordinator per run); let
/// go on a signal as on a normal end.
static HELD: Mutex<Option<serl_study::rundir::RunLock>> = Mutex::new(None);

/// This command line, as a run records it and its lock names it.
fn command_line() -> String {
    std::iter::once("serl".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Claims `dir` for a run of `kind`, following the one rule for an output
/// folder (`--force`, `--resume`; `docs/cli.md`): refuses a folder the
/// rule does not allow, then takes its run lock for this command line
/// until the command ends ([`release`]) or a signal stops it (a second
/// coordinator of the same run is refused with the holder's name), and
/// records the run's kind.
pub fn claim_run(dir: &Path, kind: RunKind, (force, resume): (bool, bool)) -> Result<()> {
    if force && resume {
        anyhow::bail!("--force starts the run afresh and --resume goes on with it: give one");
    }
    let rule = OutRule::from_flags(force, resume);
    serl_study::rundir::check_out(dir, kind, rule)?;
    let command = command_line();
    let lock = serl_study::rundir::RunLock::acquire(dir, &command, &|l| eprintln!("{l}"))?;
    *HELD.lock().unwrap_or_else(|p| p.into_inner()) = Some(lock);
    serl_study::rundir::begin_run(dir, kind, rule, &command)?;
    Ok(())
}

/// Lets go of the run lock, if this command holds one.
pub fn release() {
    let held = HELD.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(held);
}

/// Handles SIGINT and SIGTERM from now on; `hint` says how to go on.
pub fn install(hint: impl Fn() -> String + Send + Sync + 'static) -> Result<()> {
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
    release();
    crate::trace::finish();
    std::process::exit(128 + sig)
}
