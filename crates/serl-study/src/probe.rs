//! What a local model makes of serl's prompts (`serl prompts probe`): each
//! module's prompt asked `n` times, constrained (as `serl evolve` asks)
//! and, when asked, free; the share of replies that are well-formed
//! (extract and parse) and that validate, and the model's speed. The
//! figures in docs/llm.md come from it.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use serl_design::{extract_or_why, well_formed, Module, ModuleKind};
use serl_llm::{
    Designer, LlmDesigner, LocalBackend, LocalConfig, ModuleContext, Prompts, TaskInfo,
};

use crate::error::{Context, Result, StudyError};

/// What the probe asks.
pub struct ProbeRequest {
    /// The GGUF instruct model.
    pub model: PathBuf,
    /// A LoRA adapter for it (`serl llm finetune`).
    pub adapter: Option<PathBuf>,
    /// Replies per module and mode.
    pub n: usize,
    /// Also ask without constraints.
    pub unconstrained: bool,
    /// Modules to ask by name (all designable ones when empty).
    pub modules: Vec<String>,
    /// Threads (0: one per core).
    pub threads: usize,
    /// The sampling temperature.
    pub temperature: f64,
    /// Base seed (each reply adds its number).
    pub seed: u64,
    /// The prompt templates.
    pub prompts: PathBuf,
}

/// One module in one mode.
#[derive(Serialize)]
pub struct Row {
    /// The module's name.
    pub module: String,
    /// Whether the replies were constrained to the module's grammar.
    pub constrained: bool,
    /// Replies asked for.
    pub replies: usize,
    /// Replies that were well-formed (extracted and parsed).
    pub well_formed: usize,
    /// Replies that validated.
    pub valid: usize,
    /// Tokens generated over all replies.
    pub completion_tokens: u64,
    /// Wall seconds over all replies.
    pub seconds: f64,
    /// Each reply's text.
    pub texts: Vec<String>,
    /// Why each reply that did not validate was refused.
    pub errors: Vec<String>,
}

/// `constrained` in a row's words.
pub fn mode(constrained: bool) -> &'static str {
    if constrained {
        "constrained"
    } else {
        "free"
    }
}

/// The probe's table: per module and mode, the share of replies well-formed
/// and valid, and the tokens a reply took and a second gave.
pub fn table(rows: &[Row]) -> serl_report::Table {
    let header = [
        "module",
        "decoding",
        "replies",
        "well-formed",
        "valid",
        "tokens/reply",
        "tokens/s",
    ];
    let mut t = serl_report::Table::new(header);
    let pct = |k: usize, n: usize| format!("{:.0}%", 100.0 * k as f64 / n.max(1) as f64);
    for r in rows {
        let per_reply = r.completion_tokens as f64 / r.replies.max(1) as f64;
        t.row([
            r.module.clone(),
            mode(r.constrained).into(),
            r.replies.to_string(),
            pct(r.well_formed, r.replies),
            pct(r.valid, r.replies),
            format!("{per_reply:.0}"),
            format!("{:.1}", r.completion_tokens as f64 / r.seconds.max(1e-9)),
        ]);
    }
    t
}

/// The lines under the table: each row's first refusal, then up to `show`
/// replies of each.
pub fn lines(rows: &[Row], show: usize) -> Vec<String> {
    let refused = rows.iter().filter_map(|r| {
        let e = r.errors.first()?;
        let (n, m) = (r.errors.len(), mode(r.constrained));
        Some(format!("{} ({m}): {n} refused; the first: {e}", r.module))
    });
    let texts = rows.iter().flat_map(|r| {
        let head = format!("--- {} ({}):", r.module, mode(r.constrained));
        r.texts
            .iter()
            .take(show)
            .map(move |t| format!("{head}\n{}", t.trim()))
    });
    refused.chain(texts).collect()
}

impl ProbeRequest {
    /// The modules asked.
    pub fn kinds(&self) -> Result<Vec<ModuleKind>> {
        if self.modules.is_empty() {
            return Ok(ModuleKind::ALL.to_vec());
        }
        self.modules
            .iter()
            .map(|m| ModuleKind::parse_name(m).with_context(|| format!("unknown module `{m}`")))
            .collect()
    }

    /// The decoding modes asked: constrained, and free when asked.
    pub fn modes(&self) -> &'static [bool] {
        if self.unconstrained {
            &[true, false]
        } else {
            &[true]
        }
    }
}

/// Asks every module in every mode; `at` hears each module and mode
/// before it is asked, `tick` each reply.
pub fn probe(a: &ProbeRequest, at: &dyn Fn(ModuleKind, bool), tick: &dyn Fn()) -> Result<Vec<Row>> {
    let kinds = a.kinds()?;
    let backend = LocalBackend::load(&LocalConfig {
        model: Some(a.model.clone()),
        adapter: a.adapter.clone(),
        threads: a.threads,
        ..LocalConfig::default()
    })?;
    let prompts = Prompts::load(&a.prompts)
        .with_context(|| format!("loading the prompts in {}", a.prompts.display()))?;
    let mut designer = LlmDesigner::new(prompts, Box::new(backend), a.seed);
    designer.temperature = a.temperature;
    let mut rows = Vec::new();
    for &constrained in a.modes() {
        designer.constrained = constrained;
        for &kind in &kinds {
            at(kind, constrained);
            rows.push(ask(&mut designer, kind, constrained, a.n, tick)?);
        }
    }
    Ok(rows)
}

fn ask(
    designer: &mut LlmDesigner,
    kind: ModuleKind,
    constrained: bool,
    n: usize,
    tick: &dyn Fn(),
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
        let parsed = extract_or_why(kind, &reply.text)
            .and_then(|text| Module::parse(kind, &text).map_err(|e| e.to_string()));
        match parsed {
            Ok(_) => row.valid += 1,
            Err(e) => row.errors.push(e),
        }
        row.texts.push(reply.text);
        tick();
    }
    Ok(row)
}

/// The model's raw speed on the reward prompt (with the sample context),
/// unconstrained: prompt
/// tokens per second (one pass) and generated tokens per second, median of
/// three replies of up to 128 tokens.
pub fn speed(a: &ProbeRequest) -> Result<Speed> {
    use serl_llm::serl_local::{ChatMessage, LocalModel, LocalOptions, Request, Sampling};
    let mut model = LocalModel::load(
        &a.model,
        LocalOptions {
            threads: a.threads,
            ..LocalOptions::default()
        },
    )
    .map_err(StudyError::msg)?;
    let prompts = Prompts::load(&a.prompts)?;
    // The prompt `serl prompts render reward` prints.
    let ctx = serl_llm::sample_context(ModuleKind::Reward, true);
    let messages = [ChatMessage {
        role: "user".into(),
        content: prompts.render("reward", &ctx)?,
    }];
    let (mut prompt_rate, mut prompt_tokens) = (0.0, 0);
    let mut decode_rates = Vec::new();
    for seed in 0..3 {
        let g = model
            .chat(&Request {
                messages: &messages,
                max_tokens: 128,
                sampling: Sampling {
                    temperature: a.temperature,
                    top_p: 0.95,
                    seed: a.seed.wrapping_add(seed),
                },
                constraint: None,
                steer_after: usize::MAX,
            })
            .map_err(StudyError::msg)?;
        if seed == 0 {
            // The later replies reuse the prompt's cache.
            prompt_tokens = g.prompt_tokens;
            prompt_rate = g.prompt_tokens as f64 / g.prompt_secs.max(1e-9);
        }
        decode_rates.push(g.completion_tokens as f64 / g.generate_secs.max(1e-9));
    }
    decode_rates.sort_by(f64::total_cmp);
    Ok(Speed {
        prompt_rate,
        prompt_tokens,
        decode_rate: decode_rates[1],
    })
}

/// The model's raw speed: prompt tokens per second (and how many), and
/// the median generated tokens per second.
pub struct Speed {
    /// Prompt tokens per second, one pass.
    pub prompt_rate: f64,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Generated tokens per second, the median of three replies.
    pub decode_rate: f64,
}
