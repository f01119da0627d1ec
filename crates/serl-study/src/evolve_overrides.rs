//! The run directory and config of `serl evolve`: a new run's config with
//! the command line's settings over it, or a resumed run's own, which
//! refuses by name any setting the command line would change.

use std::path::{Path, PathBuf};

use serl_cluster::EngineKind;

use crate::config::{read_toml, Base, EvolveFile, LlmChoice};
use crate::error::Result;
use crate::paths::{absolute, check_present};

/// The settings a command line gives over a config.
#[derive(Clone, Debug, Default)]
pub struct EvolveOverrides {
    /// `--data`: the bar data the run reads.
    pub data: Option<PathBuf>,
    /// `--llm`: who designs.
    pub llm: Option<LlmChoice>,
    /// `--model`: the GGUF model of `--llm local`.
    pub model: Option<PathBuf>,
    /// `--adapter`: a LoRA adapter for that model.
    pub adapter: Option<PathBuf>,
    /// `--base-url`: the chat server of `--llm openai|ollama`.
    pub base_url: Option<String>,
    /// `--gbnf`: send GBNF grammars instead of JSON schemas.
    pub gbnf: bool,
    /// `--prompts`: the prompt templates the run starts from.
    pub prompts: Option<PathBuf>,
    /// `--lockbox`: keep the test split sealed until the run is final.
    pub lockbox: bool,
    /// `--engine`: where the trainings run.
    pub engine: Option<EngineKind>,
    /// `--seed`: the run's seed.
    pub seed: Option<u64>,
}

/// Where a run comes from: a config for a new run in `out`, or the run
/// directory to resume.
pub enum EvolveStart<'a> {
    /// A new run.
    New {
        /// The run directory to create.
        out: &'a Path,
        /// The config file; the defaults when `None`.
        config: Option<&'a Path>,
        /// Whether a run already in `out` is to be written over
        /// (`--force`; the caller clears it before the run begins).
        force: bool,
    },
    /// The run directory of a run to resume.
    Resume(&'a Path),
}

/// The run directory and its config, validated.
pub fn resolve(start: EvolveStart, o: &EvolveOverrides) -> Result<(PathBuf, EvolveFile)> {
    match start {
        EvolveStart::Resume(dir) => {
            let saved = dir.join("evolve.toml");
            if !saved.exists() {
                crate::bail!(
                    "{} has no evolve.toml: it is not a run directory of `serl evolve`",
                    dir.display()
                );
            }
            let mut cfg: EvolveFile = read_toml(&saved)?;
            let moved = repoint_moved(o, &mut cfg)?;
            refuse_changes(o, &cfg, dir)?;
            if let Some(l) = o.llm {
                // A resumed LLM run may be finished by replaying its transcript.
                cfg.llm.backend = l;
            }
            if let Some(e) = o.engine {
                // A resumed run may finish on another engine: tasks are the same.
                cfg.cluster.engine = e;
            }
            check_paths_present(&cfg, dir)?;
            cfg.validate()?;
            if moved {
                same_data(dir, &cfg)?;
                // The new places hold for every later resume too.
                crate::evolve::write_config(dir, &cfg)?;
            }
            Ok((dir.to_path_buf(), cfg))
        }
        EvolveStart::New { out, config, force } => {
            if !force && out.join("evolve.toml").exists() {
                crate::bail!(
                    "{} already holds an evolve run; continue it with `serl evolve --resume {}`",
                    out.display(),
                    out.display()
                );
            }
            let mut cfg = match config {
                Some(p) => EvolveFile::read(p)?,
                None => EvolveFile::default(),
            };
            o.apply(&mut cfg)?;
            cfg.resolve_paths(Base::WorkingDir)?;
            cfg.validate()?;
            Ok((out.to_path_buf(), cfg))
        }
    }
}

impl EvolveOverrides {
    fn apply(&self, cfg: &mut EvolveFile) -> Result<()> {
        if let Some(d) = &self.data {
            cfg.data_path = Some(d.clone());
        }
        if let Some(l) = self.llm {
            cfg.llm.backend = l;
        }
        if let Some(p) = &self.prompts {
            cfg.prompts = Some(p.clone());
        }
        if let Some(m) = &self.model {
            cfg.llm.set_local_model(m)?;
        }
        if let Some(a) = &self.adapter {
            cfg.llm.set_local_adapter(a)?;
        }
        if let Some(u) = &self.base_url {
            cfg.llm.http.base_url = Some(u.clone());
        }
        cfg.llm.gbnf |= self.gbnf;
        cfg.evolve.lockbox |= self.lockbox;
        if let Some(e) = self.engine {
            cfg.cluster.engine = e;
        }
        if let Some(s) = self.seed {
            cfg.evolve.seed = s;
        }
        Ok(())
    }
}

/// `--data`, `--model` and `--adapter` on a resumed run whose recorded
/// path is gone (the data or model moved, the run directory went to
/// another machine): the run reads them from the new place. `true` when
/// a path changed. Where the recorded path is still there, the flag is
/// left to [`refuse_changes`].
fn repoint_moved(o: &EvolveOverrides, cfg: &mut EvolveFile) -> Result<bool> {
    let mut moved = false;
    let mut repoint = |given: &Option<PathBuf>, recorded: &mut Option<PathBuf>| -> Result<()> {
        if let Some(g) = given {
            if !recorded.as_ref().is_some_and(|r| r.exists()) {
                *recorded = Some(absolute(g)?);
                moved = true;
            }
        }
        Ok(())
    };
    repoint(&o.data, &mut cfg.data_path)?;
    #[cfg(feature = "local")]
    {
        repoint(&o.model, &mut cfg.llm.local.model)?;
        repoint(&o.adapter, &mut cfg.llm.local.adapter)?;
    }
    Ok(moved)
}

/// Data found at a new place must be the data the run started with.
fn same_data(dir: &Path, cfg: &EvolveFile) -> Result<()> {
    let data = cfg.data_path();
    match crate::rundir::changed_data(dir, &data) {
        Some((Some(now), recorded)) => crate::bail!(
            "--data {}: not the data the run started with (fingerprint {now}; the run recorded {recorded} in {})",
            data.display(),
            dir.join(crate::rundir::FINGERPRINTS_FILE).display()
        ),
        _ => Ok(()),
    }
}

/// What a resumed run reads from outside its directory is still there,
/// or the error names the path and the flag that points elsewhere.
fn check_paths_present(cfg: &EvolveFile, dir: &Path) -> Result<()> {
    let w = &cfg.paths_as_written;
    check_present("data_path", Some(&cfg.data_path()), w, "--data", dir)?;
    #[cfg(feature = "local")]
    if cfg.llm.backend == LlmChoice::Local {
        check_present(
            "llm.local.model",
            cfg.llm.local.model.as_deref(),
            w,
            "--model",
            dir,
        )?;
        check_present(
            "llm.local.adapter",
            cfg.llm.local.adapter.as_deref(),
            w,
            "--adapter",
            dir,
        )?;
    }
    Ok(())
}

/// A resumed run keeps the settings it started with (its `evolve.toml`):
/// a flag that would change one is refused, named, rather than ignored.
/// `--llm` and `--engine` are applied (a run may be finished by replaying
/// its transcript, or on another engine: the tasks are the same).
fn refuse_changes(a: &EvolveOverrides, cfg: &EvolveFile, dir: &Path) -> Result<()> {
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
    let abs = |p: &Option<PathBuf>| p.as_deref().map(|p| absolute(p).unwrap_or(p.to_path_buf()));
    if a.data.is_some() {
        differs("--data", shown(&abs(&a.data)), shown(&abs(&cfg.data_path)));
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
    #[cfg(feature = "local")]
    {
        if a.model.is_some() {
            differs(
                "--model",
                shown(&abs(&a.model)),
                shown(&abs(&cfg.llm.local.model)),
            );
        }
        if a.adapter.is_some() {
            differs(
                "--adapter",
                shown(&abs(&a.adapter)),
                shown(&abs(&cfg.llm.local.adapter)),
            );
        }
    }
    #[cfg(not(feature = "local"))]
    if a.model.is_some() {
        changed.push(format!("--model {}", shown(&a.model)));
    }
    if changed.is_empty() {
        return Ok(());
    }
    crate::bail!(
        "a resumed run keeps the settings it started with ({}): {} would change them; drop the flag, or start a new run with --out",
        dir.join("evolve.toml").display(),
        changed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_run(dir: &Path) -> EvolveFile {
        let start = EvolveStart::New {
            out: dir,
            config: None,
            force: false,
        };
        // Its data: any directory that is there (a resumed run checks).
        let data = EvolveOverrides {
            data: Some(dir.to_path_buf()),
            ..EvolveOverrides::default()
        };
        let (_, cfg) = resolve(start, &data).unwrap();
        assert!(cfg.data_path.as_ref().is_some_and(|p| p.is_absolute()));
        std::fs::write(dir.join("evolve.toml"), toml::to_string(&cfg).unwrap()).unwrap();
        cfg
    }

    #[test]
    fn a_resumed_run_refuses_a_new_seed_by_name_and_takes_another_engine() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = new_run(dir.path());
        let seed = EvolveOverrides {
            seed: Some(cfg.evolve.seed + 1),
            ..EvolveOverrides::default()
        };
        let e = resolve(EvolveStart::Resume(dir.path()), &seed)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--seed"), "{e}");
        let engine = EvolveOverrides {
            engine: Some(EngineKind::Slurm),
            ..EvolveOverrides::default()
        };
        let (_, resumed) = resolve(EvolveStart::Resume(dir.path()), &engine).unwrap();
        assert_eq!(resumed.cluster.engine, EngineKind::Slurm);
    }

    #[test]
    fn a_new_run_in_a_run_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        new_run(dir.path());
        let start = EvolveStart::New {
            out: dir.path(),
            config: None,
            force: false,
        };
        let e = resolve(start, &EvolveOverrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("already holds an evolve run"), "{e}");
    }
}
