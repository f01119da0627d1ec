//! Prompt templates: minijinja files in a directory (`prompts/` by
//! default), rendered with the documented context of [`ModuleContext`].

use std::path::{Path, PathBuf};

use minijinja::{Environment, UndefinedBehavior};
use serde::Serialize;
use serde_json::{json, Value};
use serl_design::ModuleKind;

use crate::backend::LlmError;
use crate::templates::Template;

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

    /// Renders every template of [`Template::all`] against its sample
    /// contexts; returns every problem found: a required template missing,
    /// or one that does not render (an optional one is checked when
    /// present).
    pub fn check(&self) -> Vec<LlmError> {
        let mut problems = Vec::new();
        for t in Template::all() {
            if !self.has(t.name()) {
                if t.required() {
                    problems.push(LlmError::Template {
                        file: self.dir.join(format!("{t}.j2")).display().to_string(),
                        line: 0,
                        message: "missing".into(),
                    });
                }
                continue;
            }
            // The first error of a template is enough to fix it.
            if let Some(e) = t
                .sample_contexts()
                .iter()
                .find_map(|ctx| self.render(t.name(), ctx).err())
            {
                problems.push(e);
            }
        }
        // Where the operator templates are, the module prompts must show
        // the parents through them.
        if self.has("mutate") || self.has("crossover") {
            problems.extend(check_operators(self));
        }
        problems
    }
}

/// One past design shown to the designer.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    /// The module's text.
    pub source: String,
    /// The best score of a candidate that used it.
    pub score: f64,
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

/// A filled-in context for `kind`, with or without feedback, examples
/// and a retry error: what `serl prompts check` renders.
pub fn sample_context(kind: ModuleKind, full: bool) -> Value {
    let mut c = ModuleContext::new(
        kind,
        TaskInfo::default(),
        "beat TWAP robustly across stocks",
        "keep the design simple",
    );
    if full {
        c.examples = vec![Example {
            source: serl_design::DEFAULT_REWARD_PROGRAM.to_string(),
            score: 0.42,
        }];
        c.feedback = Some(Feedback {
            candidates: vec![CandidateFeedback {
                name: "c1".into(),
                score: 0.42,
                pa: 0.6,
                pa_std: 14.0,
                pa_dynamic: 0.3,
                wr: 0.55,
                glr: 1.1,
                afi: 0.001,
                illusory_gain: 0.3,
                repaired: 2,
            }],
            reward_stats: Some(json!({
                "mean": 0.1, "min": -3.0, "max": 2.0, "repaired": 0,
                "terms": [
                    {"term": "step_pa", "mean": 0.4, "std": 1.2, "repaired_share": 0.0},
                    {"term": "-(2 * remaining_inv^2 / steps)", "mean": -0.3, "std": 0.2, "repaired_share": 0.0},
                ],
                "trained_terms": [
                    {"term": "step_pa", "mean": 0.1, "std": 2.5, "repaired_share": 0.0},
                    {"term": "-(2 * remaining_inv^2 / steps)", "mean": -0.02, "std": 0.05, "repaired_share": 0.0},
                ],
            })),
            errors: vec![
                "reward module: line 1, column 3: unknown name `pa`; did you mean `step_pa`?"
                    .into(),
            ],
        });
        c.error = Some("invalid JSON at line 1 column 2".into());
        c.history =
            vec![json!({"instruction": "penalise inventory late in the day", "score": 0.42})];
    }
    c.to_value()
}

/// A `kind` context for `operator` (`mutate` or `crossover`) with real
/// parents (the default reward and the timing gain, with their results):
/// what `serl prompts check` renders the operator templates with.
pub fn operator_context(kind: ModuleKind, operator: &str) -> Value {
    let mut c: ModuleContext =
        ModuleContext::new(kind, TaskInfo::default(), "beat TWAP", "keep it simple");
    let sources = [
        serl_design::DEFAULT_REWARD_PROGRAM.to_string(),
        "twap_gain - 0.5 * abs(remaining_inv - time_left) / steps".to_string(),
    ];
    let count = if operator == "crossover" { 2 } else { 1 };
    c.operator = operator.to_string();
    c.parents = sources
        .iter()
        .take(count)
        .enumerate()
        .map(|(i, source)| Parent {
            key: format!("i0_c{i}"),
            source: if kind == ModuleKind::Reward {
                source.clone()
            } else {
                String::new()
            },
            score: 1.5 - i as f64,
            lower_bound: Some(0.4),
            pa: 2.0,
            pa_std: 12.0,
            wr: 0.55,
            afi: 0.08,
            pa_dynamic: 1.1,
            terms: vec![json!({"term": "step_pa", "mean": 0.4, "std": 1.2, "repaired_share": 0.0})],
            made_by: "fresh".into(),
        })
        .collect();
    c.to_value()
}

/// Whether `prompts`' module templates show the parents under each
/// operator: every `kind` prompt rendered with [`operator_context`] must
/// carry each parent's module text. One message per template that does
/// not (a prompt directory written before the operators existed, whose
/// `feedback.j2` does not include `mutate.j2` and `crossover.j2`).
pub fn check_operators(prompts: &Prompts) -> Vec<LlmError> {
    let mut problems = Vec::new();
    for operator in ["mutate", "crossover"] {
        let kind = ModuleKind::Reward;
        let ctx = operator_context(kind, operator);
        match prompts.render(kind.name(), &ctx) {
            Err(e) => problems.push(e),
            Ok(text) => {
                let missing = ctx["parents"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| !text.contains(p["source"].as_str().unwrap_or_default()));
                if missing {
                    problems.push(LlmError::Template {
                        file: prompts.dir().join("reward.j2").display().to_string(),
                        line: 0,
                        message: format!(
                            "the {operator} operator's prompt does not show its parents' modules; \
                             include {operator}.j2 (the shipped feedback.j2 does)"
                        ),
                    });
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped() -> PathBuf {
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("../../prompts")
    }

    #[test]
    fn the_shipped_prompts_pass_the_check() {
        let p = Prompts::load(&shipped()).unwrap();
        let problems = p.check();
        assert!(problems.is_empty(), "{problems:?}");
        let text = p
            .render("reward", &sample_context(ModuleKind::Reward, true))
            .unwrap();
        assert!(
            text.contains("remaining_inv") && text.contains("did you mean"),
            "{text}"
        );
    }

    /// The reply a template asks for is the shape the module's schema
    /// constrains it to: each JSON module's template asks for JSON with
    /// the schema's required fields, and the reward's asks for
    /// `{"program": ...}` when constrained and a fenced program when not.
    #[test]
    fn each_template_asks_for_the_shape_its_schema_constrains_the_reply_to() {
        let p = Prompts::load(&shipped()).unwrap();
        for kind in ModuleKind::ALL {
            let mut ctx = sample_context(kind, false);
            ctx["constrained"] = json!(true);
            let text = p.render(kind.name(), &ctx).unwrap();
            let ask = &text[text
                .rfind("Reply with")
                .unwrap_or_else(|| panic!("{kind:?}: no reply instruction"))..];
            let schema = serl_design::module_schema(kind);
            assert!(ask.starts_with("Reply with JSON"), "{kind:?}: {ask}");
            // A schema of several forms (the plan's) asks for each one's.
            let forms = schema["anyOf"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| vec![schema.clone()]);
            for field in forms.iter().flat_map(|f| f["required"].as_array().unwrap()) {
                let field = field.as_str().unwrap();
                assert!(
                    ask.contains(&format!("\"{field}\"")),
                    "{kind:?}: `{field}` not asked for in: {ask}"
                );
            }
            ctx["constrained"] = json!(false);
            let text = p.render(kind.name(), &ctx).unwrap();
            if kind == ModuleKind::Reward {
                assert!(text.contains("```serl fenced block"), "{text}");
            }
        }
    }

    /// Each operator's prompt carries its parents' module text, scores and
    /// validation breakdown, and the request to change or combine them.
    #[test]
    fn each_operator_prompt_shows_its_parents_and_what_they_achieved() {
        let p = Prompts::load(&shipped()).unwrap();
        assert!(check_operators(&p).is_empty());
        let mutate = p
            .render("reward", &operator_context(ModuleKind::Reward, "mutate"))
            .unwrap();
        for needle in [
            serl_design::DEFAULT_REWARD_PROGRAM,
            "Improve this reward (from design i0_c0",
            "0.4 bps at the lower bound",
            "AFI 0.08",
            "`step_pa`: mean 0.4",
            "Write the whole new reward",
        ] {
            assert!(mutate.contains(needle), "`{needle}` not in:\n{mutate}");
        }
        let cross = p
            .render("reward", &operator_context(ModuleKind::Reward, "crossover"))
            .unwrap();
        assert!(
            cross.contains("Combine these two reward modules"),
            "{cross}"
        );
        assert!(cross.contains("twap_gain - 0.5 * abs(remaining_inv - time_left) / steps"));
        assert!(cross.contains(serl_design::DEFAULT_REWARD_PROGRAM));
        assert!(cross.contains("Keep the strengths of both"), "{cross}");
        // The high-level DEK's rewrite of an operator's instruction
        // replaces the template's own words.
        let mut ctx = operator_context(ModuleKind::Reward, "mutate");
        ctx["operator_instruction"] = "Try a smaller penalty on the inventory.".into();
        let rewritten = p.render("reward", &ctx).unwrap();
        assert!(rewritten
            .contains("Try a smaller penalty on the inventory. Write the whole new reward"));
        assert!(
            !rewritten.contains("change one or two things"),
            "{rewritten}"
        );
        let fresh = p
            .render("reward", &sample_context(ModuleKind::Reward, true))
            .unwrap();
        assert!(
            !fresh.contains("Improve this"),
            "a fresh prompt shows no parent"
        );
    }

    #[test]
    fn an_undefined_variable_and_a_syntax_error_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        for f in std::fs::read_dir(shipped()).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, dir.path().join(f.file_name().unwrap())).unwrap();
        }
        std::fs::write(
            dir.path().join("reward.j2"),
            "line one\n{{ task.descripton }}\n",
        )
        .unwrap();
        let p = Prompts::load(dir.path()).unwrap();
        let e = p.check().into_iter().next().unwrap().to_string();
        assert!(
            e.contains("reward.j2") && e.contains("line 2") && e.contains("undefined"),
            "{e}"
        );
        // A directory whose feedback block predates the operators loads,
        // but a search would not show the model its parents: said so.
        std::fs::write(dir.path().join("feedback.j2"), "no parents here\n").unwrap();
        std::fs::write(
            dir.path().join("reward.j2"),
            "{% include \"feedback.j2\" %}\n",
        )
        .unwrap();
        let p = Prompts::load(dir.path()).unwrap();
        let problems = check_operators(&p);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].to_string().contains("include mutate.j2"),
            "{}",
            problems[0]
        );
        std::fs::write(dir.path().join("state.j2"), "ok\n{% if x %}\nno end").unwrap();
        let e = Prompts::load(dir.path()).err().unwrap().to_string();
        assert!(e.contains("state.j2") && e.contains("syntax"), "{e}");
    }

    /// A placing agent's state prompt lists its resting order's columns
    /// (and its grammar derives them); a crossing agent's and every
    /// broadcast prompt do not.
    #[test]
    fn a_placing_tasks_state_prompt_offers_the_resting_orders_columns() {
        let p = Prompts::load(&shipped()).unwrap();
        let placing = TaskInfo {
            placements: vec!["cross".into(), "touch".into()],
            ..TaskInfo::default()
        };
        let render = |kind: ModuleKind, task: TaskInfo| {
            let ctx = ModuleContext::new(kind, task, "m", "m");
            let text = p.render(kind.name(), &ctx.to_value()).unwrap();
            (text, ctx.grammar, ctx.obs_dim)
        };
        let (text, grammar, obs_dim) = render(ModuleKind::State, placing.clone());
        assert!(
            text.contains("queue_ahead") && text.contains("minutes_resting"),
            "{text}"
        );
        assert!(grammar.contains("\"queue_ahead\""), "{grammar}");
        assert_eq!(obs_dim, serl_design::OBS_DIM + 2);
        for (kind, task) in [
            (ModuleKind::State, TaskInfo::default()),
            (ModuleKind::Communication, placing),
        ] {
            let (text, grammar, _) = render(kind, task);
            assert!(!text.contains("queue_ahead"), "{kind:?}: {text}");
            assert!(!grammar.contains("queue_ahead"), "{kind:?}");
        }
    }
}
