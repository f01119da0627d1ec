//! What a resumed run may change, and how long a run took over the
//! processes that worked on it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::{EvolveArgs, EvolveFile};

/// A resumed run keeps the settings it started with (its `evolve.toml`):
/// a flag that would change one is refused, named, rather than ignored.
/// `--llm` and `--engine` are applied (a run may be finished by replaying
/// its transcript, or on another engine: the tasks are the same).
pub(super) fn refuse_changes(a: &EvolveArgs, cfg: &EvolveFile, dir: &Path) -> Result<()> {
    let mut changed: Vec<String> = Vec::new();
    let mut differs = |flag: &str, given: String, saved: String| {
        if given != saved {
            changed.push(format!("{flag} {given} (the run has {saved})"));
        }
    };
    let shown = |p: &Option<PathBuf>| p.as_ref().map_or("-".into(), |p| p.display().to_string());
    if let Some(s) = a.seed {
        differs("--seed", s.to_string(), cfg.evolve.seed.to_string());
    }
    if a.data.is_some() {
        differs("--data", shown(&a.data), shown(&cfg.data_path));
    }
    if a.prompts.is_some() {
        differs("--prompts", shown(&a.prompts), shown(&cfg.prompts));
    }
    if let Some(u) = &a.base_url {
        differs(
            "--base-url",
            u.clone(),
            cfg.llm.http.base_url.clone().unwrap_or_default(),
        );
    }
    if a.gbnf && !cfg.llm.gbnf {
        differs("--gbnf", "on".into(), "off".into());
    }
    if a.lockbox && !cfg.evolve.lockbox {
        differs("--lockbox", "on".into(), "off".into());
    }
    if a.model.is_some() {
        changed.push(format!("--model {}", shown(&a.model)));
    }
    if changed.is_empty() {
        return Ok(());
    }
    bail!(
        "a resumed run keeps the settings it started with ({}): {} would change them; drop the flag, or start a new run with --out",
        dir.join("evolve.toml").display(),
        changed.join(", ")
    )
}

/// How long the run took: this process's seconds, and the run's over
/// every process where it was resumed.
pub(super) fn took(this_process: f64, all_processes: f64) -> String {
    if all_processes > this_process + 1.0 {
        format!("{all_processes:.0}s in all over its processes ({this_process:.0}s in this one)")
    } else {
        format!("{this_process:.0}s in all")
    }
}
