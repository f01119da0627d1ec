//! Designers propose modules; [`generate`] validates what they propose and
//! retries with the error until a module passes or the attempts run out.

use serde::Serialize;
use serl_design::{extract_or_why, Module, ModuleKind};

use crate::backend::{Backend, ChatRequest, LlmError, Schema};
use crate::prompts::{ModuleContext, Prompts};
use crate::templates::Template;

/// What a designer answered.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Reply {
    /// The answer as written: a module somewhere in prose or fences, or
    /// (for `refine`) the new instruction.
    pub text: String,
    /// The rendered prompt (empty for the builtin designer, which reads
    /// the context directly).
    pub prompt: String,
    /// Tokens the prompt took (0 for the builtin designer).
    pub prompt_tokens: u64,
    /// Tokens the answer took (0 for the builtin designer).
    pub completion_tokens: u64,
    /// The module itself, where the designer built it (the builtin search
    /// and the grammar draws): taken as it is, its text not read again.
    /// `None` for a model's answer, which [`generate`] reads from `text`.
    #[serde(skip)]
    pub module: Option<Module>,
}

/// The module a reply's text holds: found in its prose or fences, then
/// parsed; the error says why not, for the designer's next try.
pub(crate) fn read_reply(kind: ModuleKind, text: &str) -> Result<Module, String> {
    extract_or_why(kind, text).and_then(|t| Module::parse(kind, &t).map_err(|e| e.to_string()))
}

/// Something that writes modules: an LLM behind prompts, or the builtin
/// search.
pub trait Designer: Send {
    /// How it is named in logs and reports.
    fn name(&self) -> String;
    /// Whether a language model answers (false for the builtin search).
    fn is_llm(&self) -> bool;
    /// A module of `ctx.module`'s kind; `ctx.error` holds the last
    /// rejection when retrying.
    fn propose(&mut self, kind: ModuleKind, ctx: &ModuleContext) -> Result<Reply, LlmError>;
    /// A rewritten micro instruction for `ctx.module`, from
    /// `ctx.history` (high-level DEK).
    fn refine(&mut self, ctx: &ModuleContext) -> Result<Reply, LlmError>;
    /// Designs with a LoRA adapter on its model from now on (`None`: the
    /// base model); a designer without a model it can adapt refuses.
    fn set_adapter(&mut self, adapter: Option<&std::path::Path>) -> Result<(), LlmError> {
        match adapter {
            None => Ok(()),
            Some(dir) => Err(LlmError::Local(format!(
                "the {} designer has no model to fine-tune ({})",
                self.name(),
                dir.display()
            ))),
        }
    }
}

/// What constrains a reply: a GBNF grammar, a JSON schema, their Lark
/// twin for token-masking backends, or nothing; and its longest length.
#[derive(Default)]
struct Constraint {
    grammar: Option<String>,
    schema: Option<Schema>,
    lark: Option<String>,
    max_tokens: Option<u32>,
}

/// The high-level DEK's rewritten instruction: one to three sentences on
/// one line, as `refine.j2` asks. Token-masking backends follow it, so a
/// small model cannot ramble for a thousand tokens; servers get the token
/// limit only.
pub const REFINE_LARK: &str = r#"start: sentence (" " sentence){0,2}
sentence: /[A-Za-z][^.!?\n]{0,280}[.!?]/
"#;

/// The longest rewritten instruction, in tokens (three sentences of about
/// 40 words fit).
pub const REFINE_MAX_TOKENS: u32 = 256;

/// An LLM designer: renders the module's template and asks the backend.
pub struct LlmDesigner {
    /// The templates rendered for each question.
    pub prompts: Prompts,
    /// The chat model asked.
    pub backend: Box<dyn Backend>,
    /// Sampling temperature of every request (default 0.7).
    pub temperature: f64,
    /// Base seed: call `n` asks with `seed + n`, so that retries differ
    /// and a rerun or replay asks the same questions.
    pub seed: u64,
    /// Constrain every reply to its module's JSON schema (OpenAI's
    /// `response_format`, Ollama's `format`); a reward then comes back as
    /// `{"program": "..."}`.
    pub constrained: bool,
    /// Send each module's GBNF grammar (llama.cpp's `grammar` field,
    /// [`serl_design::module_gbnf`]) instead of its JSON schema: the
    /// grammar types the programs inside the JSON, the schema cannot.
    pub gbnf: bool,
    calls: u64,
}

impl LlmDesigner {
    /// A designer asking `backend` with `prompts`, temperature 0.7 and no
    /// grammar constraint.
    pub fn new(prompts: Prompts, backend: Box<dyn Backend>, seed: u64) -> Self {
        LlmDesigner {
            prompts,
            backend,
            temperature: 0.7,
            seed,
            constrained: false,
            gbnf: false,
            calls: 0,
        }
    }

    fn ask(
        &mut self,
        template: Template,
        ctx: &ModuleContext,
        json: bool,
        constraint: Constraint,
    ) -> Result<Reply, LlmError> {
        let prompt = self.prompts.render(template.name(), &ctx.to_value())?;
        let mut req = ChatRequest::new(prompt.clone());
        req.temperature = self.temperature;
        // Each call gets its own seed so that retries differ, yet a rerun
        // or a replay asks exactly the same questions.
        req.seed = Some(self.seed.wrapping_add(self.calls));
        req.json = json;
        req.grammar = constraint.grammar;
        req.schema = constraint.schema;
        req.lark = constraint.lark;
        if let Some(n) = constraint.max_tokens {
            req.max_tokens = n;
        }
        self.calls += 1;
        let r = self.backend.chat(&req)?;
        Ok(Reply {
            text: r.content,
            prompt,
            prompt_tokens: r.prompt_tokens,
            completion_tokens: r.completion_tokens,
            module: None,
        })
    }
}

impl Designer for LlmDesigner {
    fn set_adapter(&mut self, adapter: Option<&std::path::Path>) -> Result<(), LlmError> {
        self.backend.set_adapter(adapter)
    }

    fn name(&self) -> String {
        format!("LLM: {}", self.backend.name())
    }
    fn is_llm(&self) -> bool {
        true
    }
    fn propose(&mut self, kind: ModuleKind, ctx: &ModuleContext) -> Result<Reply, LlmError> {
        let constraint = if self.gbnf {
            // A server gets one constraint: llama.cpp refuses a request
            // with both a grammar and a schema, llama-cpp-python's server
            // lets the schema win.
            Constraint {
                grammar: Some(serl_design::module_gbnf(kind)),
                lark: Some(serl_design::module_lark(kind)),
                ..Constraint::default()
            }
        } else if self.constrained {
            Constraint {
                schema: Some(Schema {
                    name: kind.name().into(),
                    schema: serl_design::module_schema(kind),
                }),
                lark: Some(serl_design::module_lark(kind)),
                ..Constraint::default()
            }
        } else {
            Constraint::default()
        };
        let mut ctx = ctx.clone();
        ctx.constrained = constraint.schema.is_some() || constraint.grammar.is_some();
        self.ask(Template::Module(kind), &ctx, kind.is_json(), constraint)
    }
    fn refine(&mut self, ctx: &ModuleContext) -> Result<Reply, LlmError> {
        let constraint = Constraint {
            lark: Some(REFINE_LARK.into()),
            max_tokens: Some(REFINE_MAX_TOKENS),
            ..Constraint::default()
        };
        self.ask(Template::Refine, ctx, false, constraint)
    }
}

/// One try at a module.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    /// The designer's answer (empty when asking it failed).
    pub reply: String,
    /// Why it was rejected (`None` for the accepted one).
    pub error: Option<String>,
}

/// The outcome of generating one module.
#[derive(Debug, Clone, Serialize)]
pub struct Generated {
    /// Which module was asked for.
    pub kind: ModuleKind,
    /// The accepted module, if an attempt passed.
    pub module: Option<Module>,
    /// Every attempt in order; the accepted one, if any, is last.
    pub attempts: Vec<Attempt>,
    /// The prompt of the first attempt answered, as it was sent (empty
    /// where the designer reads the context directly, as the builtin one
    /// does).
    pub prompt: String,
    /// Prompt tokens over all attempts.
    pub prompt_tokens: u64,
    /// Answer tokens over all attempts.
    pub completion_tokens: u64,
    /// Set when the designer itself failed in a way retrying cannot fix
    /// (an unreachable server, a missing key, a broken template, a replay
    /// without the answer): the loop should stop and say so.
    pub fatal: Option<String>,
}

impl Generated {
    /// 1 / attempts when a module was accepted, else 0 (as in the paper).
    pub fn success_rate(&self) -> f64 {
        if self.module.is_some() {
            1.0 / self.attempts.len().max(1) as f64
        } else {
            0.0
        }
    }
}

/// Asks `designer` for a `kind` module until one is extracted, parses,
/// validates and passes `check` (a smoke test), at most `max_attempts`
/// times; each rejection goes back to the designer as `ctx.error`.
pub fn generate(
    designer: &mut dyn Designer,
    kind: ModuleKind,
    ctx: &ModuleContext,
    max_attempts: usize,
    check: &dyn Fn(&Module) -> Result<(), String>,
) -> Generated {
    let mut ctx = ctx.clone();
    ctx.error = None;
    let mut g = Generated {
        kind,
        module: None,
        attempts: Vec::new(),
        prompt: String::new(),
        prompt_tokens: 0,
        completion_tokens: 0,
        fatal: None,
    };
    for _ in 0..max_attempts.max(1) {
        let mut reply = match designer.propose(kind, &ctx) {
            Ok(r) => r,
            Err(e) => {
                let msg = e.to_string();
                g.attempts.push(Attempt {
                    reply: String::new(),
                    error: Some(msg),
                });
                // A server that cannot be reached will not be reached by
                // asking again at once; the backend already retried.
                if matches!(
                    e,
                    LlmError::Connect { .. }
                        | LlmError::MissingKey(_)
                        | LlmError::Template { .. }
                        | LlmError::NotRecorded { .. }
                ) {
                    g.fatal = Some(e.to_string());
                    break;
                }
                continue;
            }
        };
        if g.prompt.is_empty() {
            g.prompt = reply.prompt.clone();
        }
        g.prompt_tokens += reply.prompt_tokens;
        g.completion_tokens += reply.completion_tokens;
        let module = match reply.module.take() {
            Some(m) if m.kind() == kind => Ok(m),
            Some(m) => Err(format!(
                "the designer built a {} module where a {} module was asked for",
                m.kind().name(),
                kind.name()
            )),
            None => read_reply(kind, &reply.text),
        };
        let result = module.and_then(|m| check(&m).map(|_| m));
        match result {
            Ok(m) => {
                g.attempts.push(Attempt {
                    reply: reply.text,
                    error: None,
                });
                g.module = Some(m);
                break;
            }
            Err(e) => {
                ctx.error = Some(e.clone());
                g.attempts.push(Attempt {
                    reply: reply.text,
                    error: Some(e),
                });
            }
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::TaskInfo;

    /// Answers with a typed module and text no reader could parse, then
    /// with a module of another kind.
    struct Typed(Vec<Module>);

    impl Designer for Typed {
        fn name(&self) -> String {
            "typed".into()
        }
        fn is_llm(&self) -> bool {
            false
        }
        fn propose(&mut self, _: ModuleKind, _: &ModuleContext) -> Result<Reply, LlmError> {
            Ok(Reply {
                text: "(written elsewhere)".into(),
                module: self.0.pop(),
                ..Reply::default()
            })
        }
        fn refine(&mut self, _: &ModuleContext) -> Result<Reply, LlmError> {
            Ok(Reply::default())
        }
    }

    /// A module the designer built is taken as it is (its text is not
    /// read again), checked like any other; one of the wrong kind is a
    /// rejection the designer hears.
    #[test]
    fn a_typed_module_is_taken_as_built_and_checked() {
        let reward = Module::parse(ModuleKind::Reward, "twap_gain").unwrap();
        let state = Module::parse(
            ModuleKind::State,
            r#"{"features": [{"name": "v", "program": "ema(volume, 5)"}]}"#,
        )
        .unwrap();
        let ctx = ModuleContext::new(ModuleKind::Reward, TaskInfo::default(), "m", "m");
        let mut d = Typed(vec![reward.clone(), state]);
        let g = generate(&mut d, ModuleKind::Reward, &ctx, 3, &|_| Ok(()));
        assert_eq!(g.module, Some(reward));
        assert_eq!(g.attempts.len(), 2);
        let why = g.attempts[0].error.as_deref().unwrap();
        assert!(why.contains("state module where a reward module"), "{why}");
        let mut d = Typed(vec![Module::parse(ModuleKind::Reward, "twap_gain").unwrap()]);
        let g = generate(
            &mut d,
            ModuleKind::Reward,
            &ctx,
            1,
            &|_| Err("smoke".into()),
        );
        assert_eq!(g.module, None);
        assert_eq!(g.attempts[0].error.as_deref(), Some("smoke"));
    }
}
