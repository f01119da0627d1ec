//! One coordinator per run directory: an exclusive lock file, `RUN/.lock`,
//! that names its holder (host, process, start time, command) and is
//! renewed while the holder lives.
//!
//! The lock is a file created with `create_new`, so two processes on the
//! same filesystem (NFS included) cannot both create it. A lock whose
//! holder is gone is taken over, with a line that says so:
//! - on the same host, a holder whose process no longer exists (or whose
//!   process id now belongs to a process started later) is dead at once;
//! - from another host, liveness cannot be asked, so the holder renews
//!   the lock every quarter of its lease, and a lock not renewed for a
//!   whole lease has expired (a crashed cluster coordinator does not block
//!   the run forever).
//!
//! A take-over first renames the dead holder's file away; the rename of
//! one file succeeds once, so two processes taking over at once cannot
//! both win. Cluster tasks do not take the lock: their coordinator holds it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Context, Result};

/// The lock file's name in a run directory.
pub const LOCK_FILE: &str = ".lock";

/// The run record's name in a run directory (what wrote it: `kind.rs`).
/// Kept here, beside the lock, because a directory the lock created goes
/// away on release when the record is all that was written.
pub const RUN_FILE: &str = "serl-run.json";

/// How long a holder on another host stays the holder without renewing.
pub const DEFAULT_LEASE_SECS: u64 = 120;

/// Who holds a run directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    /// The host name.
    pub host: String,
    /// The process id on that host.
    pub pid: u32,
    /// When the process began, in the kernel's clock ticks since boot
    /// (Linux), so a reused process id is not taken for the holder.
    pub process_start: Option<u64>,
    /// When the lock was taken, RFC 3339.
    pub started: String,
    /// The command line that holds it.
    pub command: String,
    /// When the holder last renewed the lock, Unix seconds.
    pub renewed: i64,
    /// Seconds after the last renewal at which the lock expires.
    pub lease_secs: u64,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "process {} on {} since {} (`{}`)",
            self.pid, self.host, self.started, self.command
        )
    }
}

/// Why a holder is no longer the holder, if it is not.
fn gone(h: &Holder, now: i64) -> Option<String> {
    if h.host == host_name() {
        return match process_start(h.pid) {
            None => Some(format!("process {} is no longer running", h.pid)),
            Some(start) if h.process_start.is_some_and(|s| s != start) => Some(format!(
                "process id {} now belongs to another process",
                h.pid
            )),
            Some(_) => None,
        };
    }
    let silent = now - h.renewed;
    (silent > h.lease_secs as i64).then(|| {
        format!(
            "its lease of {} s ran out {} s ago (last renewed {} s ago)",
            h.lease_secs,
            silent - h.lease_secs as i64,
            silent
        )
    })
}

/// An exclusive hold on a run directory, released when dropped.
pub struct RunLock {
    path: PathBuf,
    /// The run directory, when taking the lock created it: removed on
    /// release if nothing else was written there (a command refused
    /// before it began leaves no directory behind).
    created: Option<PathBuf>,
    holder: Holder,
    stop: Arc<AtomicBool>,
    renewer: Option<JoinHandle<()>>,
}

impl RunLock {
    /// Takes `dir`'s lock for `command` (creating `dir`), or fails naming
    /// the live holder. A dead holder's lock is taken over; `say` gets a
    /// line saying whose and why.
    pub fn acquire(dir: &Path, command: &str, say: &dyn Fn(&str)) -> Result<RunLock> {
        RunLock::acquire_with_lease(dir, command, DEFAULT_LEASE_SECS, say)
    }

    /// [`RunLock::acquire`] with a lease of `lease_secs`.
    pub fn acquire_with_lease(
        dir: &Path,
        command: &str,
        lease_secs: u64,
        say: &dyn Fn(&str),
    ) -> Result<RunLock> {
        let created = (!dir.exists()).then(|| dir.to_path_buf());
        std::fs::create_dir_all(dir).context(format!("creating {}", dir.display()))?;
        let path = dir.join(LOCK_FILE);
        let pid = std::process::id();
        let holder = Holder {
            host: host_name(),
            pid,
            process_start: process_start(pid),
            started: serl_evolve::utc_now(),
            command: command.to_string(),
            renewed: unix_now(),
            lease_secs: lease_secs.max(1),
        };
        refuse_a_live_enclosing_holder(dir)?;
        // Two rounds: a dead holder's file is moved away in the first, and
        // the second creates ours (unless another process was faster).
        for _ in 0..2 {
            if create_new(&path, &holder)? {
                return Ok(RunLock::hold(path, holder, created));
            }
            let Some(current) = read_holder(&path) else {
                // Being written this instant, or left unreadable: a lock
                // that nobody can name is stale once its lease is past.
                let age = modified_secs_ago(&path);
                if age.is_some_and(|a| a <= holder.lease_secs as i64) {
                    crate::bail!(
                        "{} is locked by a lock file that cannot be read yet; try again in a moment, or delete it if no serl process uses the run",
                        path.display()
                    );
                }
                take_away(
                    &path,
                    &format!("an unreadable lock file of {}", path.display()),
                    say,
                );
                continue;
            };
            match gone(&current, unix_now()) {
                None => crate::bail!(
                    "{} is in use by {}; wait for it to finish, or stop it (the lock of a process that has died is taken over without asking)",
                    dir.display(),
                    current
                ),
                Some(why) => take_away(&path, &format!("the lock of {current}: {why}"), say),
            }
        }
        crate::bail!(
            "{}: another process took the run's lock while this one was taking over a dead holder's",
            dir.display()
        )
    }

    fn hold(path: PathBuf, holder: Holder, created: Option<PathBuf>) -> RunLock {
        let stop = Arc::new(AtomicBool::new(false));
        let renewer = {
            let (path, mut holder, stop) = (path.clone(), holder.clone(), stop.clone());
            let every = Duration::from_secs(holder.lease_secs).div_f64(4.0);
            std::thread::Builder::new()
                .name("run-lock".into())
                .spawn(move || renew_until(&path, &mut holder, &stop, every))
                .ok()
        };
        RunLock {
            path,
            created,
            holder,
            stop,
            renewer,
        }
    }

    /// Who holds the lock: this process.
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// The holder of `dir`'s lock, if there is a readable one.
    pub fn holder_of(dir: &Path) -> Option<Holder> {
        read_holder(&dir.join(LOCK_FILE))
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.renewer.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        // Only our own lock is removed: a holder that took it over (after
        // a lease ran out) keeps it.
        if read_holder(&self.path).is_some_and(|h| same_holder(&h, &self.holder)) {
            let _ = std::fs::remove_file(&self.path);
        }
        // A run refused before it began leaves nothing behind: its record
        // goes when nothing else was written (a record alone would vouch
        // for files put there later), and so does a directory the lock
        // created (the removal fails, as it should, unless it is empty).
        if let Some(dir) = self.path.parent() {
            let only_the_record = std::fs::read_dir(dir)
                .is_ok_and(|es| es.flatten().all(|e| e.file_name() == RUN_FILE));
            if only_the_record {
                let _ = std::fs::remove_file(dir.join(RUN_FILE));
            }
        }
        if let Some(dir) = &self.created {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// A run inside a directory another live command holds (an arm of a
/// study while `serl evolve study` runs it) belongs to that command.
fn refuse_a_live_enclosing_holder(dir: &Path) -> Result<()> {
    let Ok(abs) = crate::paths::absolute(dir) else {
        return Ok(());
    };
    for above in abs.ancestors().skip(1) {
        let Some(h) = read_holder(&above.join(LOCK_FILE)) else {
            continue;
        };
        if gone(&h, unix_now()).is_none() && h.pid != std::process::id() {
            crate::bail!(
                "{} is inside {}, which is in use by {}; wait for it to finish, or stop it",
                dir.display(),
                above.display(),
                h
            );
        }
    }
    Ok(())
}

fn same_holder(a: &Holder, b: &Holder) -> bool {
    a.host == b.host && a.pid == b.pid && a.started == b.started
}

/// Renews the lock's time until told to stop; stops renewing (and says
/// nothing more) once the file is no longer ours.
fn renew_until(path: &Path, holder: &mut Holder, stop: &AtomicBool, every: Duration) {
    while !stop.load(Ordering::SeqCst) {
        std::thread::park_timeout(every);
        if stop.load(Ordering::SeqCst) {
            return;
        }
        if !read_holder(path).is_some_and(|h| same_holder(&h, holder)) {
            return;
        }
        holder.renewed = unix_now();
        let _ = write_atomic(path, holder);
    }
}

/// Creates the lock file with `holder` in it; `false` if it exists.
fn create_new(path: &Path, holder: &Holder) -> Result<bool> {
    use std::io::Write;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(mut f) => {
            let text = serde_json::to_string_pretty(holder)?;
            f.write_all(text.as_bytes())
                .and_then(|_| f.sync_all())
                .context(format!("writing {}", path.display()))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e).context(format!("creating the run's lock {}", path.display())),
    }
}

fn write_atomic(path: &Path, holder: &Holder) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("renew.{}", holder.pid));
    std::fs::write(&tmp, serde_json::to_string_pretty(holder)?)?;
    std::fs::rename(&tmp, path)
}

/// Moves a dead holder's lock aside (one process wins the rename).
fn take_away(path: &Path, whose: &str, say: &dyn Fn(&str)) {
    let aside = path.with_extension(format!("stale.{}", std::process::id()));
    if std::fs::rename(path, &aside).is_ok() {
        let _ = std::fs::remove_file(&aside);
        say(&format!("took over {whose}"));
    }
}

fn read_holder(path: &Path) -> Option<Holder> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn modified_secs_ago(path: &Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(modified.elapsed().map_or(0, |d| d.as_secs() as i64))
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// This machine's name.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// When process `pid` began (clock ticks since boot), `None` if it does
/// not exist. Elsewhere than Linux every process counts as alive, and
/// only the lease frees a lock.
fn process_start(pid: u32) -> Option<u64> {
    if !Path::new("/proc").exists() {
        return Some(0);
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after its `)`.
    let after = &stat[stat.rfind(')')? + 2..];
    let mut fields = after.split_whitespace();
    // A zombie (killed, not yet reaped by its parent) is dead for us.
    if matches!(fields.next(), Some("Z" | "X")) {
        return None;
    }
    let start = fields.nth(18)?;
    start.parse().ok().or(Some(0))
}

#[cfg(test)]
mod tests;
