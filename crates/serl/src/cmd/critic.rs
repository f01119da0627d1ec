//! `[train.reward_critic] critic = "llm"` in `serl train`: the language
//! model of the `[llm]` table as the run's reward critic
//! (`serl_evolve::LlmCritic`), every exchange recorded in the run
//! directory's `critic-transcript.jsonl`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serl_llm::{Backend, Flavor, HttpBackend, Prompts, Recorder};
use serl_train::RewardCritic;

use super::evolve::{LlmChoice, LlmSection};

/// The LLM critic of a training into `dir`, asking `llm` with the
/// templates in `prompts` (default `prompts/`).
pub fn llm_critic(
    llm: &LlmSection,
    prompts: Option<&PathBuf>,
    seed: u64,
    dir: &Path,
) -> Result<Box<dyn RewardCritic>> {
    let prompts_dir = prompts.cloned().unwrap_or_else(|| PathBuf::from("prompts"));
    let prompts = Prompts::load(&prompts_dir)
        .with_context(|| format!("loading the prompts in {}", prompts_dir.display()))?;
    let transcript = dir.join("critic-transcript.jsonl");
    let backend: Box<dyn Backend> = match llm.backend {
        LlmChoice::Openai | LlmChoice::Ollama => {
            let mut http = llm.http.clone();
            if llm.backend == LlmChoice::Ollama {
                http.flavor = Flavor::Ollama;
            }
            Box::new(Recorder::new(HttpBackend::new(http)?, &transcript)?)
        }
        #[cfg(feature = "local")]
        LlmChoice::Local => Box::new(Recorder::new(
            serl_llm::LocalBackend::load(&llm.local)?,
            &transcript,
        )?),
        #[cfg(not(feature = "local"))]
        LlmChoice::Local => bail!("this serl was built without the embedded backend: build with `--features local`"),
        LlmChoice::Builtin | LlmChoice::Replay => bail!(
            "[train.reward_critic] critic = \"llm\" needs [llm] backend = \"openai\", \"ollama\" or \"local\" (to replay a run's weights, set [train.reward_critic] replay = \"RUN/metrics.jsonl\")"
        ),
    };
    Ok(Box::new(serl_evolve::LlmCritic::new(
        prompts,
        backend,
        llm.temperature,
        seed,
    )))
}
