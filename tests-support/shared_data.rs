//! `../shared/data` for the test crates that use it, included by path
//! (`#[path = ".../tests-support/shared_data.rs"] mod shared_data;`): one
//! copy of the skip rule instead of one per crate.

use std::io::Write;
use std::path::{Path, PathBuf};

/// `../shared/data/{rel}`, or `None` after a `SKIP` line for `test` when this
/// machine lacks the shared data set. The line goes to the stderr handle
/// itself: the test harness captures `eprintln!` and shows it only for
/// failing tests, and a skipped test would pass silently.
pub fn shared_data(rel: &str, test: &str) -> Option<PathBuf> {
    let path = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../../../shared/data")
        .join(rel);
    if path.exists() {
        return Some(path);
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIP {test}: {} not found; this test checked nothing",
        path.display()
    );
    None
}
