//! `serl prompts probe`: what a local model makes of serl's prompts. Each
//! module's prompt is asked `--n` times, constrained (as `serl evolve`
//! asks) and, with `--unconstrained`, free; the table gives the share of
//! replies that are well-formed (extract and parse) and that validate, and
//! the model's speed. The figures in docs/llm.md come from it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use super::prompts::module_names;
use anyhow::{Context, Result};
use clap::builder::PossibleValuesParser;
use clap::Args;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serl_design::{extract, well_formed, Module, ModuleKind};
use serl_llm::{
    Designer, LlmDesigner, LocalBackend, LocalConfig, ModuleContext, Prompts, TaskInfo,
};

#[derive(Args)]
pub struct ProbeArgs {
    /// The GGUF instruct model.
    #[arg(long)]
    pub model: PathBuf,
    /// Replies per module and mode.
    #[arg(long, default_value_t = 20)]
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

#[derive(Serialize)]
struct Row {
    module: String,
    constrained: bool,
    replies: usize,
    well_formed: usize,
    valid: usize,
    completion_tokens: u64,
    seconds: f64,
    texts: Vec<String>,
    /// Why each reply that did not validate was refused.
    errors: Vec<String>,
}

pub fn run(a: &ProbeArgs) -> Result<ExitCode> {
    let kinds: Vec<ModuleKind> = if a.modules.is_empty() {
        ModuleKind::ALL.to_vec()
    } else {
        a.modules
            .iter()
            .map(|m| ModuleKind::parse_name(m).with_context(|| format!("unknown module `{m}`")))
            .collect::<Result<_>>()?
    };
    let backend = LocalBackend::load(&LocalConfig {
        model: Some(a.model.clone()),
        threads: a.threads,
        ..LocalConfig::default()
    })?;
    let prompts = Prompts::load(&a.prompts)
        .with_context(|| format!("loading the prompts in {}", a.prompts.display()))?;
    let mut designer = LlmDesigner::new(prompts, Box::new(backend), a.seed);
    designer.temperature = a.temperature;
    let modes: &[bool] = if a.unconstrained {
        &[true, false]
    } else {
        &[true]
    };
    let bar = ProgressBar::new((kinds.len() * modes.len() * a.n) as u64).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} replies {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut rows = Vec::new();
    for &constrained in modes {
        designer.constrained = constrained;
        for &kind in &kinds {
            bar.set_message(format!("{} ({})", kind.name(), mode(constrained)));
            rows.push(ask(&mut designer, kind, constrained, a.n, &bar)?);
        }
    }
    bar.finish_and_clear();
    print_rows(&rows, a.show);
    speed(a)?;
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn mode(constrained: bool) -> &'static str {
    if constrained {
        "constrained"
    } else {
        "free"
    }
}

fn ask(
    designer: &mut LlmDesigner,
    kind: ModuleKind,
    constrained: bool,
    n: usize,
    bar: &ProgressBar,
) -> Result<Row> {
    let ctx = ModuleContext::new(
        kind,
        TaskInfo::default(),
        "Design an execution agent that beats TWAP robustly across stocks",
        "keep the design simple",
    );
    let mut row = Row {
        module: kind.name().into(),
        constrained,
        replies: n,
        well_formed: 0,
        valid: 0,
        completion_tokens: 0,
        seconds: 0.0,
        texts: Vec::new(),
        errors: Vec::new(),
    };
    for _ in 0..n {
        let start = Instant::now();
        let reply = designer.propose(kind, &ctx)?;
        row.seconds += start.elapsed().as_secs_f64();
        row.completion_tokens += reply.completion_tokens;
        row.well_formed += usize::from(well_formed(kind, &reply.text));
        let text = extract(kind, &reply.text).unwrap_or_default();
        match Module::parse(kind, &text) {
            Ok(_) => row.valid += 1,
            Err(e) => row.errors.push(e.to_string()),
        }
        row.texts.push(reply.text);
        bar.inc(1);
    }
    Ok(row)
}

fn print_rows(rows: &[Row], show: usize) {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "module",
        "decoding",
        "replies",
        "well-formed",
        "valid",
        "tokens/reply",
        "tokens/s",
    ]);
    let pct = |k: usize, n: usize| format!("{:.0}%", 100.0 * k as f64 / n.max(1) as f64);
    for r in rows {
        t.add_row([
            r.module.clone(),
            mode(r.constrained).into(),
            r.replies.to_string(),
            pct(r.well_formed, r.replies),
            pct(r.valid, r.replies),
            format!(
                "{:.0}",
                r.completion_tokens as f64 / r.replies.max(1) as f64
            ),
            format!("{:.1}", r.completion_tokens as f64 / r.seconds.max(1e-9)),
        ]);
    }
    println!("{t}");
    for r in rows {
        if let Some(e) = r.errors.first() {
            println!(
                "{} ({}): {} refused; the first: {e}",
                r.module,
                mode(r.constrained),
                r.errors.len()
            );
        }
    }
    for r in rows {
        for text in r.texts.iter().take(show) {
            println!(
                "--- {} ({}):\n{}",
                r.module,
                mode(r.constrained),
                text.trim()
            );
        }
    }
}

/// The model's raw speed on the reward prompt (with the sample context),
/// unconstrained: prompt
/// tokens per second (one pass) and generated tokens per second, median of
/// three replies of up to 128 tokens.
fn speed(a: &ProbeArgs) -> Result<()> {
    use serl_llm::serl_local::{ChatMessage, LocalModel, LocalOptions, Request, Sampling};
    let mut model = LocalModel::load(
        &a.model,
        LocalOptions {
            threads: a.threads,
            ..LocalOptions::default()
        },
    )?;
    let prompts = Prompts::load(&a.prompts)?;
    // The prompt `serl prompts render reward` prints.
    let ctx = serl_llm::prompts::sample_context(ModuleKind::Reward, true);
    let messages = [ChatMessage {
        role: "user".into(),
        content: prompts.render("reward", &ctx)?,
    }];
    let (mut prompt_rate, mut prompt_tokens) = (0.0, 0);
    let mut decode_rates = Vec::new();
    for seed in 0..3 {
        let g = model.chat(&Request {
            messages: &messages,
            max_tokens: 128,
            sampling: Sampling {
                temperature: a.temperature,
                top_p: 0.95,
                seed: a.seed.wrapping_add(seed),
            },
            constraint: None,
            steer_after: usize::MAX,
        })?;
        if seed == 0 {
            // The later replies reuse the prompt's cache.
            prompt_tokens = g.prompt_tokens;
            prompt_rate = g.prompt_tokens as f64 / g.prompt_secs.max(1e-9);
        }
        decode_rates.push(g.completion_tokens as f64 / g.generate_secs.max(1e-9));
    }
    decode_rates.sort_by(f64::total_cmp);
    println!(
        "speed: prompt {:.0} tokens/s ({} tokens), generation {:.1} tokens/s (median of 3)",
        prompt_rate, prompt_tokens, decode_rates[1]
    );
    Ok(())
}
