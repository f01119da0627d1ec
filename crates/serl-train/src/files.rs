//! Writing files so that a crash leaves the old or the new version, never
//! half of one: the one way policies, checkpoints, metrics and reports
//! reach the disk. The lowest layer of the crate, so every file may use it.

use std::path::Path;

use crate::TrainError;

/// Writes a file so that a crash leaves the old or the new version, never
/// half of one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    serl_report::write_atomic(path, bytes).map_err(|e| TrainError::io(path, e))
}

/// `value` as pretty JSON at `path`, written atomically.
pub(crate) fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), TrainError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| TrainError::io(path, std::io::Error::other(e)))?;
    write_atomic(path, text.as_bytes())
}
