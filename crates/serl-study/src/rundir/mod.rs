//! What every run directory shares, whatever wrote it: one coordinator at
//! a time ([`RunLock`]), and a check that it is whole ([`check_run`]:
//! records readable, planned outputs present, the data unchanged, and the
//! repairs it has had).

mod check;
mod lock;

pub use check::{
    changed_data, check_run, data_fingerprint, record_fingerprints, set_aside_unreadable,
    CheckReport, Fingerprints, FINGERPRINTS_FILE,
};
pub use lock::{host_name, Holder, RunLock, DEFAULT_LEASE_SECS, LOCK_FILE};
