//! `serl prompts list|render|check|grammar`: the designer's prompt
//! templates, and what constrains its replies.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::builder::PossibleValuesParser;
use clap::{Args, Subcommand};
use serl_design::ModuleKind;
use serl_llm::{Prompts, Template};

use super::args::module_names;

#[cfg(feature = "local")]
mod probe;

#[derive(Subcommand)]
pub enum PromptsCommand {
    /// Every template serl renders (one per designable module, then the
    /// others), its file, and whether the directory lacks it.
    List(DirArg),
    /// A rendered prompt: a template with its sample context, or with
    /// your own (`--context FILE.json`).
    Render(RenderArgs),
    /// Render every template against its sample contexts; exit 1 on a
    /// missing required template, a syntax error or an undefined
    /// variable, naming file and line.
    Check(DirArg),
    /// What a constrained reply to a module must follow: its JSON schema
    /// (sent as `response_format` / Ollama's `format`), its GBNF grammar
    /// (llama.cpp's `grammar`), or the Lark grammar the local backend
    /// masks tokens with; both grammars type the programs inside.
    Grammar(GrammarArgs),
    /// Write a tiny chat model with random weights (GGUF), its vocabulary
    /// learned from the prompt templates: `--llm local` with no download.
    /// Its designs are noise; with constrained decoding, well-formed noise.
    #[cfg(feature = "local")]
    TestModel(TestModelArgs),
    /// Ask a local GGUF model each module's prompt `--n` times and report
    /// the share of replies that are well-formed and that validate,
    /// constrained (and with `--unconstrained`, free), with its speed.
    #[cfg(feature = "local")]
    Probe(probe::ProbeArgs),
}

#[cfg(feature = "local")]
#[derive(Args)]
pub struct TestModelArgs {
    /// Where to write the model.
    #[arg(long)]
    pub out: PathBuf,
    /// The prompt templates its vocabulary is learned from.
    #[arg(long, default_value = "prompts")]
    pub prompts: PathBuf,
    /// Seed of the weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

#[derive(Args)]
pub struct GrammarArgs {
    /// The module (`serl prompts list` names them).
    #[arg(value_parser = PossibleValuesParser::new(module_names()))]
    pub module: String,
    /// `json-schema` (what `response_format` and Ollama's `format`
    /// carry), `gbnf` (llama.cpp's `grammar` with `[llm] gbnf = true`) or
    /// `lark` (the local backend's): the two grammars are the whole reply,
    /// its programs typed.
    #[arg(long, default_value = "json-schema")]
    pub format: GrammarFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum GrammarFormat {
    JsonSchema,
    Gbnf,
    Lark,
}

#[derive(Args)]
pub struct DirArg {
    /// The prompt directory.
    #[arg(long, default_value = "prompts")]
    pub prompts: PathBuf,
}

#[derive(Args)]
pub struct RenderArgs {
    /// The template (`serl prompts list` names them): a module's, or
    /// system, feedback, refine or reward_critic.
    #[arg(value_parser = PossibleValuesParser::new(Template::names()))]
    pub template: String,
    /// A JSON context (see docs/prompts.md); default: the template's
    /// sample context.
    #[arg(long)]
    pub context: Option<PathBuf>,
    #[arg(long, default_value = "prompts")]
    pub prompts: PathBuf,
}

fn load(dir: &Path) -> Result<Prompts> {
    Prompts::load(dir).with_context(|| format!("loading the prompts in {}", dir.display()))
}

pub fn run(cmd: PromptsCommand) -> Result<ExitCode> {
    match cmd {
        PromptsCommand::List(a) => list(&a.prompts),
        PromptsCommand::Render(a) => render(&a),
        PromptsCommand::Check(a) => check(&a.prompts),
        PromptsCommand::Grammar(a) => {
            let kind = ModuleKind::parse_name(&a.module)
                .with_context(|| format!("unknown module `{}`", a.module))?;
            match a.format {
                GrammarFormat::JsonSchema => println!(
                    "{}",
                    serde_json::to_string_pretty(&serl_design::module_schema(kind))?
                ),
                GrammarFormat::Gbnf => print!("{}", serl_design::module_gbnf(kind)),
                GrammarFormat::Lark => print!("{}", serl_design::module_lark(kind)),
            }
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "local")]
        PromptsCommand::TestModel(a) => test_model(&a),
        #[cfg(feature = "local")]
        PromptsCommand::Probe(a) => probe::run(&a),
    }
}

/// Every template serl renders, one a line: its name, its file, what it
/// is for, and whether the directory lacks it. A `.j2` file that serl
/// never renders is named on stderr, so that a misspelt file is found.
fn list(dir: &Path) -> Result<ExitCode> {
    let (lines, notes) = load(dir)?.listing();
    lines.iter().for_each(|l| println!("{l}"));
    notes.iter().for_each(|n| eprintln!("{n}"));
    Ok(ExitCode::SUCCESS)
}

fn render(a: &RenderArgs) -> Result<ExitCode> {
    let p = load(&a.prompts)?;
    let template = Template::parse_name(&a.template)
        .with_context(|| format!("unknown template `{}`", a.template))?;
    let ctx = match &a.context {
        Some(f) => {
            let text =
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{} is not JSON", f.display()))?
        }
        None => template.sample_contexts().swap_remove(0),
    };
    println!("{}", p.render(template.name(), &ctx)?);
    Ok(ExitCode::SUCCESS)
}

fn check(dir: &Path) -> Result<ExitCode> {
    let p = load(dir)?;
    let problems = p.check();
    if !problems.is_empty() {
        for e in &problems {
            eprintln!("error: {e}");
        }
        return Ok(ExitCode::from(1));
    }
    println!("{}", p.rendered_line());
    Ok(ExitCode::SUCCESS)
}

/// `serl prompts test-model`: a random model whose BPE merges come from the
/// templates, so that rendered prompts fit in its context.
#[cfg(feature = "local")]
fn test_model(a: &TestModelArgs) -> Result<ExitCode> {
    serl_study::llm::write_test_model(&a.prompts, &a.out, a.seed)?;
    let out = a.out.display();
    println!("wrote {out} (random weights; for tests and trying --llm local)");
    Ok(ExitCode::SUCCESS)
}
