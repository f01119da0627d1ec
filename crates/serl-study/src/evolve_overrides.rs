//! The run directory and config of `serl evolve`: a new run's config with
//! the command line's settings over it, or a resumed run's own, which
//! refuses by name any setting the command line would change.

use std::path::{Path, PathBuf};

use serl_cluster::EngineKind;

use crate::config::{read_toml, EvolveFile, LlmChoice};
use crate::error::Result;

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
            refuse_changes(o, &cfg, dir)?;
            if let Some(l) = o.llm {
                // A resumed LLM run may be finished by replaying its transcript.
                cfg.llm.backend = l;
            }
            if let Some(e) = o.engine {
                // A resumed run may finish on another engine: tasks are the same.
                cfg.cluster.engine = e;
            }
            cfg.validate()?;
            Ok((dir.to_path_buf(), cfg))
        }
        EvolveStart::New { out, config } => {
            if out.join("evolve.toml").exists() {
                crate::bail!(
                    "{} already holds an evolve run; continue it with `serl evolve --resume {}`",
                    out.display(),
                    out.display()
                );
            }
            let mut cfg = match config {
                Some(p) => read_toml(p)?,
                None => EvolveFile::default(),
            };
            o.apply(&mut cfg)?;
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
        };
        let (_, cfg) = resolve(start, &EvolveOverrides::default()).unwrap();
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
        };
        let e = resolve(start, &EvolveOverrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("already holds an evolve run"), "{e}");
    }
}
