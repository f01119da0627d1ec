//! What every run directory shares, whatever wrote it: a record of the
//! command's kind and one rule for a folder that exists already
//! ([`check_out`], [`begin_run`], both at once with its lock: [`claim`]),
//! one coordinator at a time ([`RunLock`]), and a check that it is whole
//! ([`check_run`]: records readable, what its kind writes present, planned
//! outputs present, the data unchanged, and the repairs it has had).

mod check;
mod claim;
mod kind;
mod lock;
mod whole;

pub use check::{
    changed_data, data_fingerprint, record_fingerprints, set_aside_unreadable, CheckReport,
    Fingerprints, FINGERPRINTS_FILE,
};
pub use claim::claim;
pub use kind::{
    begin_run, check_out, infer_kind, read_record, run_kind, OutRule, RunKind, RunRecord,
};
pub use lock::{host_name, Holder, RunLock, DEFAULT_LEASE_SECS, LOCK_FILE, RUN_FILE};
pub use whole::check_run;
