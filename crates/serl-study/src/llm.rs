//! The language models of a study, made from the `[llm]` table: the
//! designer, and the reward critic of `critic = "llm"` in
//! `[train.reward_critic]` (of `serl train`, or of `serl evolve`'s
//! `[evolve.train]` and `[evolve.hierarchy]`; `serl_evolve::LlmCritic`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::bail;
use crate::error::{Context, Result};
use serl_evolve::{CriticMaker, EvolveConfig};
use serl_llm::{
    Backend, BuiltinDesigner, Designer, Flavor, HttpBackend, LlmDesigner, Prompts, Recorder, Replay,
};
use serl_train::{CriticConfig, CriticKind, RewardCritic};

use crate::config::{EvolveFile, LlmChoice, LlmSection};

/// The backend of `llm` for a reward critic, recording every exchange into
/// `transcript` where given.
fn critic_backend(llm: &LlmSection, transcript: Option<&Path>) -> Result<Arc<dyn Backend>> {
    Ok(match llm.backend {
        LlmChoice::Openai | LlmChoice::Ollama => {
            let mut http = llm.http.clone();
            if llm.backend == LlmChoice::Ollama {
                http.flavor = Flavor::Ollama;
            }
            recorded(HttpBackend::new(http)?, transcript)?
        }
        #[cfg(feature = "local")]
        LlmChoice::Local => recorded(serl_llm::LocalBackend::load(&llm.local)?, transcript)?,
        #[cfg(not(feature = "local"))]
        LlmChoice::Local => bail!("this serl was built without the embedded backend: build with `--features local`"),
        LlmChoice::Builtin | LlmChoice::Replay | LlmChoice::Grammar => bail!(
            "[train.reward_critic] critic = \"llm\" needs [llm] backend = \"openai\", \"ollama\" or \"local\" (to replay a run's weights, set [train.reward_critic] replay = \"RUN/metrics.jsonl\")"
        ),
    })
}

/// The LLM critic asking `backend` with the templates in `prompts`.
fn llm_critic(
    llm: &LlmSection,
    prompts: &Path,
    seed: u64,
    backend: Arc<dyn Backend>,
) -> Result<Box<dyn RewardCritic>> {
    let templates = Prompts::load(prompts)
        .with_context(|| format!("loading the prompts in {}", prompts.display()))?;
    Ok(Box::new(serl_evolve::LlmCritic::new(
        templates,
        backend,
        llm.temperature,
        seed,
    )))
}

/// `inner`, recording into `transcript` where given.
fn recorded<B: Backend + 'static>(inner: B, transcript: Option<&Path>) -> Result<Arc<dyn Backend>> {
    Ok(match transcript {
        Some(path) => Arc::new(Recorder::new(inner, path)?),
        None => Arc::new(inner),
    })
}

/// The critic `serl train` trains with, when its config asks for an LLM
/// one: every exchange goes to the run's `critic-transcript.jsonl`.
pub fn for_training(
    critic: &CriticConfig,
    llm: &LlmSection,
    prompts: Option<&PathBuf>,
    seed: u64,
    dir: &Path,
) -> Result<Option<Box<dyn RewardCritic>>> {
    if critic.is_off() || critic.critic != CriticKind::Llm {
        return Ok(None);
    }
    let prompts = prompts.cloned().unwrap_or_else(|| PathBuf::from("prompts"));
    let transcript = dir.join("critic-transcript.jsonl");
    let backend = critic_backend(llm, Some(&transcript))?;
    llm_critic(llm, &prompts, seed, backend).map(Some)
}

/// What makes the LLM critics of an evolve run's trainings, when its
/// `[evolve.train]` or `[evolve.hierarchy]` critic asks for one: one
/// backend, made (and so checked) now, shared by them all. The trainings
/// run side by side, so they are not recorded: their weights are, in each
/// training's metrics.
pub fn maker_for_evolve(
    cfg: &EvolveConfig,
    llm: &LlmSection,
    prompts: &Path,
    on_cluster: bool,
) -> Result<Option<Box<CriticMaker>>> {
    let llm_asked = |c: &CriticConfig| !c.is_off() && c.critic == CriticKind::Llm;
    let asked = llm_asked(&cfg.train.reward_critic)
        || cfg.hierarchy.as_ref().is_some_and(|h| {
            h.rows.contains(&serl_evolve::Switch::RewardCritic) && llm_asked(&h.reward_critic)
        });
    if !asked {
        return Ok(None);
    }
    if on_cluster {
        bail!("critic = \"llm\" asks the model from the trainings, which run as cluster tasks here: use the local engine, or the builtin critic");
    }
    // A bad [llm] table or prompt directory is refused now, not after the
    // search.
    let backend = critic_backend(llm, None)?;
    llm_critic(llm, prompts, cfg.seed, backend.clone())?;
    let (llm, prompts, seed) = (llm.clone(), prompts.to_path_buf(), cfg.seed);
    Ok(Some(Box::new(move || {
        llm_critic(&llm, &prompts, seed, backend.clone()).map_err(|e| e.chain())
    })))
}

/// The designer for `backend`: HTTP backends record into `transcript`,
/// replay reads `replay_from`.
pub fn make_designer(
    cfg: &EvolveFile,
    backend: LlmChoice,
    prompts: &Path,
    transcript: &Path,
    replay_from: &Path,
) -> Result<Box<dyn Designer>> {
    let llm = |inner: Box<dyn serl_llm::Backend>| -> Result<Box<dyn Designer>> {
        let mut d = LlmDesigner::new(Prompts::load(prompts)?, inner, cfg.evolve.seed);
        d.temperature = cfg.llm.temperature;
        d.constrained = cfg.llm.constrained;
        d.gbnf = cfg.llm.gbnf;
        Ok(Box::new(d))
    };
    match backend {
        LlmChoice::Builtin => Ok(Box::new(BuiltinDesigner::new(cfg.evolve.seed))),
        LlmChoice::Grammar => Ok(Box::new(serl_llm::GrammarDesigner::new(
            cfg.evolve.seed,
            cfg.llm.temperature,
        ))),
        LlmChoice::Openai | LlmChoice::Ollama => {
            let mut http = cfg.llm.http.clone();
            if backend == LlmChoice::Ollama {
                http.flavor = Flavor::Ollama;
            }
            llm(Box::new(Recorder::new(
                HttpBackend::new(http)?,
                transcript,
            )?))
        }
        #[cfg(feature = "local")]
        LlmChoice::Local => llm(Box::new(Recorder::new(
            serl_llm::LocalBackend::load(&cfg.llm.local)?,
            transcript,
        )?)),
        #[cfg(not(feature = "local"))]
        LlmChoice::Local => {
            bail!("this serl was built without the embedded backend: build with `--features local`")
        }
        LlmChoice::Replay => llm(Box::new(Replay::open(replay_from)?)),
    }
}

/// `[evolve.finetune]`'s learner: the embedded model of `[llm.local]`
/// fine-tuned between rounds; none for another designer (the loop then
/// refuses the table, saying why).
pub fn learner_for_evolve<'a>(
    cfg: &serl_evolve::EvolveConfig,
    llm: &crate::config::LlmSection,
) -> Option<Box<dyn serl_evolve::Learner + 'a>> {
    #[cfg(feature = "local")]
    if let (Some(f), LlmChoice::Local, Some(model)) = (&cfg.finetune, llm.backend, &llm.local.model)
    {
        return Some(Box::new(crate::finetune::LocalLearner::new(
            model.clone(),
            f.tune.clone(),
        )));
    }
    #[cfg(not(feature = "local"))]
    let _ = (cfg, llm);
    None
}

/// `serl prompts test-model`: writes to `out` a model of random weights
/// whose BPE merges come from the `.j2` templates in `prompts` (read in
/// name order), so that rendered prompts fit in its context: for tests
/// and for trying `--llm local` without a real model.
#[cfg(feature = "local")]
pub fn write_test_model(prompts: &Path, out: &Path, seed: u64) -> Result<()> {
    use serl_llm::serl_local::{write_test_model, TestModelSpec};
    let entries = std::fs::read_dir(prompts)
        .with_context(|| format!("reading the prompt directory {}", prompts.display()))?;
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    let mut corpus = String::new();
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "j2"))
    {
        corpus.push_str(&std::fs::read_to_string(f).with_context(|| f.display().to_string())?);
    }
    let spec = TestModelSpec {
        corpus,
        merges: 1500,
        seed,
        ..TestModelSpec::default()
    };
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_test_model(out, &spec).map_err(crate::StudyError::msg)
}
