//! Claiming an output folder: the one rule, the lock, the record.

use std::path::Path;

use super::kind::{begin_run, check_out, OutRule, RunKind};
use super::lock::RunLock;
use crate::error::Result;

/// Claims `dir` for a run of `kind` under `rule`, as every command that
/// writes a folder does: refuses a folder the rule does not allow
/// ([`check_out`]), takes its lock for `command` (a second coordinator of
/// the same run is refused with the holder's name; `say` hears of a stale
/// lock taken over), then begins the run ([`begin_run`]). The run is held
/// until the returned lock drops.
pub fn claim(
    dir: &Path,
    kind: RunKind,
    rule: OutRule,
    command: &str,
    say: &dyn Fn(&str),
) -> Result<RunLock> {
    check_out(dir, kind, rule)?;
    let lock = RunLock::acquire(dir, command, say)?;
    begin_run(dir, kind, rule, command)?;
    Ok(lock)
}
