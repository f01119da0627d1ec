//! `serl prompts list|render|check|grammar`: the designer's prompt
//! templates, and what constrains its replies.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serl_design::ModuleKind;
use serl_llm::prompts::sample_context;
use serl_llm::Prompts;

#[derive(Subcommand)]
pub enum PromptsCommand {
    /// The templates in the prompt directory.
    List(DirArg),
    /// A rendered prompt: a module's template with the sample context, or
    /// with your own (`--context FILE.json`).
    Render(RenderArgs),
    /// Render every template against the sample contexts; exit 1 on any
    /// syntax error or undefined variable, naming file and line.
    Check(DirArg),
    /// What a constrained reply to a module must follow: its JSON schema
    /// (sent as `response_format` / Ollama's `format`), or the GBNF grammar
    /// of the expression language its programs are written in.
    Grammar(GrammarArgs),
}

#[derive(Args)]
pub struct GrammarArgs {
    /// reward, state, architecture, imagination, profiling or communication.
    pub module: String,
    /// `json-schema`, or `gbnf` (reward: without window functions; state
    /// and communication: the language over the observation).
    #[arg(long, default_value = "json-schema")]
    pub format: GrammarFormat,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum GrammarFormat {
    JsonSchema,
    Gbnf,
}

#[derive(Args)]
pub struct DirArg {
    /// The prompt directory.
    #[arg(long, default_value = "prompts")]
    pub prompts: PathBuf,
}

#[derive(Args)]
pub struct RenderArgs {
    /// reward, state, architecture, imagination, profiling, communication,
    /// or refine.
    pub module: String,
    /// A JSON context (see docs/prompts.md); default: the sample context.
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
        PromptsCommand::List(a) => {
            let p = load(&a.prompts)?;
            for name in p.list() {
                println!(
                    "{name:<14} {}",
                    a.prompts.join(format!("{name}.j2")).display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        PromptsCommand::Render(a) => {
            let p = load(&a.prompts)?;
            let ctx = match &a.context {
                Some(f) => {
                    let text = std::fs::read_to_string(f)
                        .with_context(|| format!("reading {}", f.display()))?;
                    serde_json::from_str(&text)
                        .with_context(|| format!("{} is not JSON", f.display()))?
                }
                None => {
                    let kind = if a.module == "refine" {
                        ModuleKind::Reward
                    } else {
                        match ModuleKind::parse_name(&a.module) {
                            Some(k) => k,
                            None => bail!(
                                "unknown module `{}`: expected reward, state, architecture, imagination, profiling, communication or refine",
                                a.module
                            ),
                        }
                    };
                    sample_context(kind, true)
                }
            };
            println!("{}", p.render(&a.module, &ctx)?);
            Ok(ExitCode::SUCCESS)
        }
        PromptsCommand::Grammar(a) => {
            let Some(kind) = ModuleKind::parse_name(&a.module) else {
                bail!(
                    "unknown module `{}`: expected reward, state, architecture, imagination, profiling or communication",
                    a.module
                );
            };
            match a.format {
                GrammarFormat::JsonSchema => println!(
                    "{}",
                    serde_json::to_string_pretty(&serl_design::module_schema(kind))?
                ),
                GrammarFormat::Gbnf => match kind {
                    ModuleKind::Reward => print!("{}", serl_design::reward_grammar()),
                    ModuleKind::State | ModuleKind::Communication => {
                        print!("{}", serl_design::observation_grammar())
                    }
                    _ => bail!(
                        "the {} module is JSON without programs: it has a JSON schema (--format json-schema), not a GBNF grammar",
                        kind.name()
                    ),
                },
            }
            Ok(ExitCode::SUCCESS)
        }
        PromptsCommand::Check(a) => {
            let p = load(&a.prompts)?;
            let problems = p.check();
            if problems.is_empty() {
                println!(
                    "{} templates in {} render against the sample contexts",
                    p.list().len(),
                    a.prompts.display()
                );
                Ok(ExitCode::SUCCESS)
            } else {
                for e in &problems {
                    eprintln!("error: {e}");
                }
                Ok(ExitCode::from(1))
            }
        }
    }
}
