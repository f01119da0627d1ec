//! `serl prompts probe`: what a local model makes of serl's prompts. Each
//! module's prompt is asked `--n` times, constrained (as `serl evolve`
//! asks) and, with `--unconstrained`, free; the table gives the share of
//! replies that are well-formed (extract and parse) and that validate, and
//! the model's speed. The figures in docs/llm.md come from it.

use std::path::PathBuf;
use std::process::ExitCode;

use super::super::args::module_names;
use anyhow::{Context, Result};
use clap::builder::PossibleValuesParser;
use clap::Args;
use serl_design::ModuleKind;
use serl_study::probe::ProbeRequest;

#[derive(Args)]
pub struct ProbeArgs {
    /// The GGUF instruct model.
    #[arg(long)]
    pub model: PathBuf,
    /// A LoRA adapter for the model (`serl llm finetune`).
    #[arg(long)]
    pub adapter: Option<PathBuf>,
    /// Replies per module and mode.
    #[arg(long, value_parser = crate::cmd::args::at_least_one::<usize>, default_value_t = 20)]
    pub n: usize,
    /// Also ask without constraints.
    #[arg(long)]
    pub unconstrained: bool,
    #[arg(long, value_delimiter = ',', value_parser = PossibleValuesParser::new(module_names()),
          help = format!("Modules to ask, comma-separated (default: all {} designable modules)", ModuleKind::ALL.len()))]
    pub modules: Vec<String>,
    /// Threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Sampling temperature.
    #[arg(long, default_value_t = 0.7)]
    pub temperature: f64,
    /// Base seed (each reply adds its number).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print this many replies per module and mode.
    #[arg(long, default_value_t = 0)]
    pub show: usize,
    /// Also write the figures (and every reply) as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The prompt templates.
    #[arg(long, default_value = "prompts")]
    pub prompts: PathBuf,
}

pub fn run(a: &ProbeArgs) -> Result<ExitCode> {
    let request = ProbeRequest {
        model: a.model.clone(),
        adapter: a.adapter.clone(),
        n: a.n,
        unconstrained: a.unconstrained,
        modules: a.modules.clone(),
        threads: a.threads,
        temperature: a.temperature,
        seed: a.seed,
        prompts: a.prompts.clone(),
    };
    let asked = request.kinds()?.len() * request.modes().len() * a.n;
    let bar = crate::progress::Meter::new("probe", "replies", asked as u64);
    let at = |kind: ModuleKind, constrained| {
        bar.set_message(format!(
            "{} ({})",
            kind.name(),
            serl_study::probe::mode(constrained)
        ))
    };
    let rows = serl_study::probe::probe(&request, &at, &|| bar.inc(1))?;
    bar.finish();
    println!("{}", crate::show::boxed(&serl_study::probe::table(&rows)));
    crate::show::lines(serl_study::probe::lines(&rows, a.show));
    eprintln!("probe: measuring the model's speed (a prompt and a reply, 3 times)");
    let s = serl_study::probe::speed(&request)?;
    println!(
        "speed: prompt {:.0} tokens/s ({} tokens), generation {:.1} tokens/s (median of 3)",
        s.prompt_rate, s.prompt_tokens, s.decode_rate
    );
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}
