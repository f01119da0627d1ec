//! The lockbox (`[evolve] lockbox = true`): the test split stays sealed
//! until the run is declared final, so a report can say that its design
//! was fixed before the test was seen.
//!
//! A sealed run stops after the search, the validation of plain PPO and
//! the final retrainings, and writes `lockbox.json`: the best design's key
//! and its modules, and when they were sealed. `serl evolve --resume DIR
//! --open-test` declares the run final: it records when the test was
//! opened (once; a later resume keeps the first time), checks that the
//! best design is the sealed one, and only then plays the test.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serl_design::Design;

use crate::error::{read_json, write_json, EvolveError};

/// What `lockbox.json` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lockbox {
    /// The best design's candidate key when the test was sealed.
    pub design_key: String,
    /// That design's modules, as the run stores them.
    pub design: Design,
    /// When the test was sealed (UTC, RFC 3339).
    pub sealed_at: String,
    /// When the run was declared final and the test opened (`None`: it
    /// is still sealed).
    pub opened_at: Option<String>,
}

impl Lockbox {
    /// Whether the test is still sealed (not yet opened).
    pub fn sealed(&self) -> bool {
        self.opened_at.is_none()
    }

    /// The lockbox of the run in `dir`, if it has one.
    pub fn read(dir: &Path) -> Option<Lockbox> {
        read_json(&dir.join(FILE))
    }
}

const FILE: &str = "lockbox.json";

/// Seals the test for the design `key`: writes `lockbox.json` (keeping
/// an earlier seal's time when resumed) and returns it.
pub(crate) fn seal(dir: &Path, key: &str, design: &Design) -> Result<Lockbox, EvolveError> {
    let lockbox = match Lockbox::read(dir) {
        Some(l) if l.design_key == key => l,
        _ => Lockbox {
            design_key: key.to_string(),
            design: design.clone(),
            sealed_at: now(),
            opened_at: None,
        },
    };
    write_json(&dir.join(FILE), &lockbox)?;
    Ok(lockbox)
}

/// Opens the sealed test for the design `key`: the design must be the one
/// sealed; the first opening's time is recorded.
pub(crate) fn open(dir: &Path, key: &str) -> Result<Lockbox, EvolveError> {
    let path = dir.join(FILE);
    let mut lockbox = Lockbox::read(dir).ok_or_else(|| {
        EvolveError::Config(format!(
            "{}: no sealed test to open; a run with [evolve] lockbox = true seals it first",
            path.display()
        ))
    })?;
    if lockbox.design_key != key {
        return Err(EvolveError::Config(format!(
            "{}: the test was sealed for design {}, but the best design is now {key}; the lockbox cannot vouch for a design chosen after the seal",
            path.display(),
            lockbox.design_key
        )));
    }
    if lockbox.sealed() {
        lockbox.opened_at = Some(now());
        write_json(&path, &lockbox)?;
    }
    Ok(lockbox)
}

/// The time now, UTC, RFC 3339 to the second.
pub fn now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    chrono::DateTime::from_timestamp(secs as i64, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}
