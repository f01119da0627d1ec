//! Prompt templates: minijinja files in a directory (`prompts/` by
//! default), rendered with the documented context of [`ModuleContext`].

use std::path::{Path, PathBuf};

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use serde_json::{json, Value};
use serl_design::{Module, ModuleKind};

use crate::backend::LlmError;

/// A directory of prompt templates, loaded and parsed once; undefined
/// variables are errors when rendering.
pub struct Prompts {
    env: Environment<'static>,
    dir: PathBuf,
    names: Vec<String>,
}

fn template_err(file: &str, e: &minijinja::Error) -> LlmError {
    LlmError::Template {
        file: e.name().unwrap_or(file).to_string(),
        line: e.line().unwrap_or(0),
        message: match e.detail() {
            Some(d) => format!("{}: {d}", e.kind()),
            None => e.kind().to_string(),
        },
    }
}

impl Prompts {
    /// Loads every `*.j2` file of `dir`; a syntax error names the file and
    /// line.
    pub fn load(dir: &Path) -> Result<Self, LlmError> {
        let rd = std::fs::read_dir(dir).map_err(|e| LlmError::File {
            path: dir.display().to_string(),
            message: format!("cannot read the prompt directory: {e}"),
        })?;
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        let mut names = Vec::new();
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "j2"))
            .collect();
        files.sort();
        for path in files {
            let file = path
                .file_name()
                .map(|f| f.to_string_lossy().to_string())
                .unwrap_or_default();
            let source = std::fs::read_to_string(&path).map_err(|e| LlmError::File {
                path: path.display().to_string(),
                message: e.to_string(),
            })?;
            env.add_template_owned(file.clone(), source)
                .map_err(|e| template_err(&file, &e))?;
            names.push(file.trim_end_matches(".j2").to_string());
        }
        Ok(Prompts {
            env,
            dir: dir.to_path_buf(),
            names,
        })
    }

    /// The directory the templates came from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Template names (without `.j2`).
    pub fn list(&self) -> &[String] {
        &self.names
    }

    /// Renders template `name` (without `.j2`) with `ctx`, normally a
    /// [`ModuleContext::to_value`]; an error names the file and line.
    pub fn render(&self, name: &str, ctx: &Value) -> Result<String, LlmError> {
        let file = format!("{name}.j2");
        let t = self
            .env
            .get_template(&file)
            .map_err(|_| LlmError::Template {
                file: self.dir.join(&file).display().to_string(),
                line: 0,
                message: format!("no template `{name}` (have: {})", self.names.join(", ")),
            })?;
        t.render(minijinja::value::Serde(ctx))
            .map_err(|e| template_err(&file, &e))
    }

    /// Whether the directory has template `name` (without `.j2`).
    pub fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }
}

/// One past design shown to the designer.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    /// The module's text.
    pub source: String,
    /// The best score of a candidate that used it.
    pub score: f64,
    /// The module itself, where the run holds it: a designer that works
    /// on modules (the builtin search) reads this instead of parsing
    /// `source` back. Not part of the prompt.
    #[serde(skip)]
    pub module: Option<Module>,
}

impl Example {
    /// `module` shown with `score`: its text as a run records it.
    pub fn of(module: Module, score: f64) -> Self {
        Example {
            source: module.text(),
            score,
            module: Some(module),
        }
    }
}

/// A design an operator starts from: a parent the program database chose
/// (`[evolve.search]`), shown with what it achieved so that the designer
/// can change it to do better.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Parent {
    /// Its key in the run (`i2_c1`).
    pub key: String,
    /// This module's text in the parent.
    pub source: String,
    /// The module itself, for designers that change modules rather than
    /// text (the grammar draws). Not part of the prompt.
    #[serde(skip)]
    pub module: Option<Module>,
    /// Its score (what the search ranks by).
    pub score: f64,
    /// The lower confidence bound of its paired difference against plain
    /// PPO over validation days, bps, when the run scores by days.
    pub lower_bound: Option<f64>,
    /// Mean validation PA, bps (whole order).
    pub pa: f64,
    /// Standard deviation of the validation PA across orders, bps.
    pub pa_std: f64,
    /// Win rate: share of orders with positive PA.
    pub wr: f64,
    /// Average fill incompleteness: share of the order left unfilled.
    pub afi: f64,
    /// Mean PA in the dynamic market, bps.
    pub pa_dynamic: f64,
    /// Each reward term on the trained policy's validation episodes
    /// (`term`, `mean`, `std`, `repaired_share`); empty for other modules.
    pub terms: Vec<Value>,
    /// The operator that made it (`fresh`, `mutate`, `crossover`,
    /// `builtin`).
    pub made_by: String,
}

/// One candidate's results in the feedback block.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CandidateFeedback {
    /// The candidate's key in the run.
    pub name: String,
    /// Its score: validation PA × the design's success rate.
    pub score: f64,
    /// Mean validation PA, bps, in the static replay.
    pub pa: f64,
    /// Standard deviation of the validation PA across orders, bps.
    pub pa_std: f64,
    /// Mean PA of the orders replayed in the dynamic market, bps.
    pub pa_dynamic: f64,
    /// Win rate: share of orders with positive PA.
    pub wr: f64,
    /// Gain-loss ratio: mean gain over mean loss, in PA.
    pub glr: f64,
    /// Average fill incompleteness: mean share of the order left unfilled.
    pub afi: f64,
    /// Static minus dynamic PA on the same orders, bps: what the replay
    /// overstates.
    pub illusory_gain: f64,
    /// NaN, ±∞ and division-by-zero values its reward repaired in
    /// training.
    pub repaired: u64,
}

/// The last round's results, for the `feedback` block of every module
/// template.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Feedback {
    /// The round's scored candidates.
    pub candidates: Vec<CandidateFeedback>,
    /// Statistics of the best candidate's reward on the smoke episode
    /// (`mean`, `min`, `max`, `repaired`), when it has them.
    pub reward_stats: Option<Value>,
    /// The first rejection messages of the round.
    pub errors: Vec<String>,
}

/// The task as the prompts describe it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskInfo {
    /// The execution task in words.
    pub description: String,
    /// Decision steps per episode.
    pub steps: usize,
    /// Minutes between decisions.
    pub decision_minutes: u16,
    /// The benchmark's name (`TWAP`, `VWAP`).
    pub benchmark: String,
    /// Where the agent may place its child orders (`cross`, `touch`, ...);
    /// empty when every order crosses the spread.
    pub placements: Vec<String>,
    /// Agents working each parent order together (a team sharing one
    /// policy); 1 for an agent alone.
    pub team_agents: usize,
    /// How a team shares the work: `cooperative` (one parent order split
    /// across its members) or `competitive` (independent orders competing).
    pub team_mode: String,
    /// Whether the data carries a planted forecast (`serl data plant`)
    /// that state features may read as `signal`.
    #[serde(default)]
    pub signal: bool,
}

impl Default for TaskInfo {
    fn default() -> Self {
        TaskInfo {
            description: "Execute a parent order of Q shares (buy or sell) within one US equity trading session, \
                at a better average price than the session's TWAP."
                .into(),
            steps: 13,
            decision_minutes: 30,
            benchmark: "TWAP".into(),
            placements: Vec::new(),
            team_agents: 1,
            team_mode: String::new(),
            signal: false,
        }
    }
}

/// Everything a module template may use (see `docs/prompts.md`).
#[derive(Debug, Clone, Serialize)]
pub struct ModuleContext {
    /// The module being designed (`reward`, `state`, ...).
    pub module: String,
    /// The execution task.
    pub task: TaskInfo,
    /// The user's research instruction (`[evolve] macro_instruction`).
    pub macro_instruction: String,
    /// This module's current instruction, evolved by high-level DEK.
    pub micro_instruction: String,
    /// `{name, doc}` of each variable the module may read.
    pub variables: Vec<Value>,
    /// The expression language over those variables, as GBNF.
    pub grammar: String,
    /// Width of the observation.
    pub obs_dim: usize,
    /// Most parameters a network may have.
    pub max_params: usize,
    /// Most multiply-adds its forward pass may take for one decision.
    pub max_macs: usize,
    /// The best distinct designs of this module so far.
    pub examples: Vec<Example>,
    /// The last round's results (none in the first round).
    pub feedback: Option<Feedback>,
    /// The previous reply's rejection, when retrying.
    pub error: Option<String>,
    /// ⟨instruction, score⟩ history, for `refine`.
    pub history: Vec<Value>,
    /// The reply is constrained to the module's JSON schema
    /// (`serl_design::module_schema`): a program comes back as
    /// `{"program": "..."}`, so the templates ask for that shape.
    pub constrained: bool,
    /// What the designer is asked to do: `fresh` (a new module, today's
    /// prompt), `mutate` (change `parents[0]`'s module to do better) or
    /// `crossover` (combine `parents[0]`'s and `parents[1]`'s).
    pub operator: String,
    /// The designs the operator starts from (none for `fresh`).
    pub parents: Vec<Parent>,
    /// The operator's instruction as the high-level DEK last rewrote it
    /// (empty: the template's own words).
    pub operator_instruction: String,
}

impl ModuleContext {
    /// The context for a `kind` module: its variables and grammar (reward
    /// variables for a reward, observation features otherwise), with no
    /// examples, feedback, error or history yet.
    pub fn new(
        kind: ModuleKind,
        task: TaskInfo,
        macro_instruction: &str,
        micro_instruction: &str,
    ) -> Self {
        let placing_task = !task.placements.is_empty();
        let (variables, grammar) = match kind {
            ModuleKind::Reward => (
                serl_design::reward_vars_doc(),
                serl_design::reward_grammar(),
            ),
            _ => {
                // A placing agent's state features may also read its
                // resting order; a broadcast only what every agent sees.
                let placing = kind == ModuleKind::State && placing_task;
                let signal = kind == ModuleKind::State && task.signal;
                let columns = serl_design::observation_columns(placing, signal);
                let variables = columns
                    .iter()
                    .map(|n| json!({"name": n, "doc": serl_design::column_doc(n)}))
                    .collect();
                (variables, serl_design::observation_grammar(&columns))
            }
        };
        ModuleContext {
            module: kind.name().into(),
            task,
            macro_instruction: macro_instruction.into(),
            micro_instruction: micro_instruction.into(),
            variables,
            grammar,
            obs_dim: serl_design::observation_columns(placing_task, false).len(),
            max_params: serl_design::MAX_PARAMS,
            max_macs: serl_design::MAX_MACS,
            examples: Vec::new(),
            feedback: None,
            error: None,
            history: Vec::new(),
            constrained: false,
            operator: "fresh".into(),
            parents: Vec::new(),
            operator_instruction: String::new(),
        }
    }

    /// The context as JSON, as templates receive it.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}
