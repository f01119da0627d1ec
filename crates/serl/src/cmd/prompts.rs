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
    Probe(super::probe::ProbeArgs),
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
    /// reward, state, architecture, imagination, profiling or communication.
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
                GrammarFormat::Gbnf => print!("{}", serl_design::module_gbnf(kind)),
                GrammarFormat::Lark => print!("{}", serl_design::module_lark(kind)),
            }
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "local")]
        PromptsCommand::TestModel(a) => test_model(&a),
        #[cfg(feature = "local")]
        PromptsCommand::Probe(a) => super::probe::run(&a),
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

/// `serl prompts test-model`: a random model whose BPE merges come from the
/// templates, so that rendered prompts fit in its context.
#[cfg(feature = "local")]
fn test_model(a: &TestModelArgs) -> Result<ExitCode> {
    use serl_llm::serl_local::{write_test_model, TestModelSpec};
    let mut corpus = String::new();
    let entries = std::fs::read_dir(&a.prompts)
        .with_context(|| format!("reading the prompt directory {}", a.prompts.display()))?;
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    for f in files {
        if f.extension().is_some_and(|e| e == "j2") {
            corpus.push_str(&std::fs::read_to_string(&f).with_context(|| f.display().to_string())?);
        }
    }
    let spec = TestModelSpec {
        corpus,
        merges: 1500,
        seed: a.seed,
        ..TestModelSpec::default()
    };
    if let Some(dir) = a.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    write_test_model(&a.out, &spec)?;
    println!(
        "wrote {} (random weights; for tests and trying --llm local)",
        a.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
