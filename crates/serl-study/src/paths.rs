//! Portable runs: every path a run reads (data, prompts, model, adapter)
//! is made absolute when the run starts, and recorded beside the path as
//! written, so `--resume` works from any directory.
//!
//! A relative path in a config file is taken from the config file's
//! directory (as Cargo and most tools do); a relative path on the command
//! line, or a default (`data/lean`, `prompts`), from the working
//! directory. A config path that is missing beside its config but present
//! in the working directory (the rule before 2026-12) is refused with the
//! path that would fix it.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use crate::error::Result;

/// Where a relative path is taken from.
#[derive(Clone, Copy, Debug)]
pub enum Base<'a> {
    /// The directory of this config file.
    Config(&'a Path),
    /// The working directory (a command-line flag, or a default).
    WorkingDir,
}

/// Makes `path` absolute against `base`, recording `field = path as
/// written` in `written` when it changed. `None` (and the backend's
/// `"default"` model) stay as they are.
pub fn resolve(
    field: &str,
    path: &mut Option<PathBuf>,
    base: Base,
    written: &mut BTreeMap<String, PathBuf>,
) -> Result<()> {
    let Some(p) = path.as_ref() else {
        return Ok(());
    };
    if p.as_os_str() == "default" {
        return Ok(());
    }
    if p.is_absolute() {
        // Folded (`/a/b/../c` is `/a/c`), so that one place is one path.
        *path = Some(absolute(p)?);
        return Ok(());
    }
    let resolved = match base {
        Base::Config(file) => {
            let dir = file.parent().unwrap_or(Path::new(""));
            let beside = absolute(&dir.join(p))?;
            if !beside.exists() && p.exists() && !dir.as_os_str().is_empty() {
                crate::bail!(
                    "{}: {field} = {:?} is not there ({} does not exist): a relative path in a config is taken from the config file's directory; write {:?}",
                    file.display(),
                    p.display().to_string(),
                    beside.display(),
                    relative_to(&absolute(p)?, &absolute(dir)?).display().to_string()
                );
            }
            beside
        }
        Base::WorkingDir => absolute(p)?,
    };
    written
        .entry(field.to_string())
        .or_insert_with(|| p.clone());
    *path = Some(resolved);
    Ok(())
}

/// For the error of a path that is not there: how the config wrote it,
/// when it wrote it relative (`prompts = "../prompts" in the config: a
/// relative path there is read from the config file's directory`), or
/// nothing. A config copied away from the data and prompts it names
/// fails with the path it looked at and why it looked there.
pub fn as_written_hint(field: &str, written: &BTreeMap<String, PathBuf>) -> String {
    match written.get(field).filter(|w| w.is_relative()) {
        Some(w) => format!(
            " ({field} = {:?} in the config: a relative path there is read from the config file's directory)",
            w.display().to_string()
        ),
        None => String::new(),
    }
}

/// `p` made absolute against the working directory, with `.` and `..`
/// folded (not through symbolic links: a run records the path it was
/// given).
pub fn absolute(p: &Path) -> Result<PathBuf> {
    let abs = std::path::absolute(p)?;
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Ok(out)
}

/// `to` written relative to the directory `from` (both absolute).
fn relative_to(to: &Path, from: &Path) -> PathBuf {
    let (to_c, from_c): (Vec<_>, Vec<_>) = (to.components().collect(), from.components().collect());
    let common = to_c.iter().zip(&from_c).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from_c.len() {
        out.push("..");
    }
    for c in &to_c[common..] {
        out.push(c);
    }
    out
}

/// A path a run recorded that is no longer there: the error names the
/// path, how it was written, and the flag that points the run elsewhere.
pub fn check_present(
    field: &str,
    path: Option<&Path>,
    written: &BTreeMap<String, PathBuf>,
    flag: &str,
    run: &Path,
) -> Result<()> {
    let Some(p) = path.filter(|p| p.as_os_str() != "default") else {
        return Ok(());
    };
    if p.exists() {
        return Ok(());
    }
    let as_written = written
        .get(field)
        .map(|w| format!(" (written {:?})", w.display().to_string()))
        .unwrap_or_default();
    crate::bail!(
        "{}: the run's {field} {}{as_written} is not there; if it moved, resume with `{flag} NEW_PATH`",
        run.join("evolve.toml").display(),
        p.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_path_is_taken_from_the_config_files_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("configs")).unwrap();
        std::fs::create_dir_all(dir.path().join("data/lean")).unwrap();
        let config = dir.path().join("configs/evolve.toml");
        let mut written = BTreeMap::new();
        let mut p = Some(PathBuf::from("../data/lean"));
        resolve("data_path", &mut p, Base::Config(&config), &mut written).unwrap();
        assert_eq!(p.unwrap(), absolute(&dir.path().join("data/lean")).unwrap());
        assert_eq!(written["data_path"], PathBuf::from("../data/lean"));
    }

    #[test]
    fn an_absolute_path_and_the_default_model_stay_as_written() {
        let mut written = BTreeMap::new();
        let mut p = Some(PathBuf::from("/srv/data"));
        resolve("data_path", &mut p, Base::WorkingDir, &mut written).unwrap();
        let mut m = Some(PathBuf::from("default"));
        resolve("llm.local.model", &mut m, Base::WorkingDir, &mut written).unwrap();
        assert_eq!(p.unwrap(), PathBuf::from("/srv/data"));
        assert_eq!(m.unwrap(), PathBuf::from("default"));
        assert!(written.is_empty());
    }

    #[test]
    fn relative_to_walks_up_and_down() {
        assert_eq!(
            relative_to(Path::new("/a/data/lean"), Path::new("/a/configs")),
            PathBuf::from("../data/lean")
        );
    }

    #[test]
    fn a_missing_recorded_path_names_the_flag() {
        let mut written = BTreeMap::new();
        written.insert("data_path".to_string(), PathBuf::from("data/lean"));
        let e = check_present(
            "data_path",
            Some(Path::new("/nowhere/data/lean")),
            &written,
            "--data",
            Path::new("/runs/x"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("/nowhere/data/lean")
                && e.contains("\"data/lean\"")
                && e.contains("--data NEW_PATH"),
            "{e}"
        );
    }
}
