//! Fine-tuning the designer on what its designs achieved (`serl llm
//! finetune`, `[evolve.finetune]`): the pairs of one or more run
//! directories, rendered with the model's chat template as the designer
//! asked them, trained into a LoRA adapter by `serl-tune`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serl_evolve::{
    pairs_from_candidates, read_run_pairs, sft_from_candidates, CandidateResult, EvolveError,
    Learned, Learner, Pair, SftExample,
};
use serl_llm::Designer;
use serl_local::{BaseModel, ChatMessage, LocalModel, LocalOptions};
use serl_tune::{Example, FloatModel};
pub use serl_tune::{Objective, Progress, TuneConfig, TuneDevice, TuneReport};

use crate::error::{Context, Result, StudyError};

/// What to fine-tune on.
pub struct FinetuneRequest {
    /// Run directories whose pairs are the data.
    pub runs: Vec<PathBuf>,
    /// The GGUF model the adapter is for.
    pub model: PathBuf,
    /// The adapter's directory (resumed when it holds a checkpoint of the
    /// same settings and data).
    pub out: PathBuf,
    /// The settings.
    pub config: TuneConfig,
}

/// The command line's settings over a settings file's.
#[derive(Debug, Default, Clone)]
pub struct TuneOverrides {
    /// The objective.
    pub objective: Option<Objective>,
    /// Passes over the examples at most.
    pub epochs: Option<usize>,
    /// The seed of the adapter's start, the split and the order.
    pub seed: Option<u64>,
    /// Where to train.
    pub device: Option<TuneDevice>,
}

/// The settings: the TOML file `config` (the fields of
/// `[evolve.finetune.tune]`) or the defaults, with `overrides` over them.
pub fn settings(config: Option<&Path>, overrides: &TuneOverrides) -> Result<TuneConfig> {
    let mut c: TuneConfig = match config {
        Some(p) => crate::read_toml(p)?,
        None => TuneConfig::default(),
    };
    c.objective = overrides.objective.unwrap_or(c.objective);
    c.epochs = overrides.epochs.unwrap_or(c.epochs);
    c.seed = overrides.seed.unwrap_or(c.seed);
    c.device = overrides.device.unwrap_or(c.device);
    Ok(c)
}

impl FinetuneRequest {
    /// The command that goes on with this fine-tuning from its checkpoint.
    pub fn resume_hint(&self) -> String {
        let runs: Vec<String> = self.runs.iter().map(|p| p.display().to_string()).collect();
        let (runs, model, out) = (runs.join(" "), self.model.display(), self.out.display());
        format!("resume with: serl llm finetune --from {runs} --model {model} --out {out} --resume")
    }
}

/// What a fine-tuning did.
pub struct FinetuneOutcome {
    /// The training's figures.
    pub report: TuneReport,
    /// Examples read from the runs (before the objective's filter).
    pub examples: usize,
    /// Examples left out: longer than the model's context.
    pub too_long: usize,
}

impl FinetuneOutcome {
    /// A line per epoch (its held-out loss, and for DPO the margin and
    /// the accuracy; the kept one marked), then the examples, steps and
    /// speed.
    pub fn lines(&self) -> Vec<String> {
        let r = &self.report;
        let mut lines: Vec<String> = r
            .epochs
            .iter()
            .map(|e| {
                let kept = if e.epoch == r.best_epoch {
                    "  (kept)"
                } else {
                    ""
                };
                match (e.margin, e.accuracy) {
                    (Some(m), Some(acc)) => format!(
                        "epoch {}: held-out loss {:.4}, margin {m:+.3}, accuracy {:.0}%{kept}",
                        e.epoch,
                        e.loss,
                        acc * 100.0
                    ),
                    _ => format!(
                        "epoch {}: held-out loss {:.4} (NLL per token){kept}",
                        e.epoch, e.loss
                    ),
                }
            })
            .collect();
        lines.push(format!(
            "{} examples ({} held out, {} too long for the context); {} steps, {:.1} reply tokens/s, {:.1} s",
            self.examples,
            r.heldout_examples,
            self.too_long,
            r.steps.len(),
            r.tokens_per_sec(),
            r.secs
        ));
        lines
    }
}

/// The examples of `pairs` and `sft` for `objective`: DPO trains on the
/// pairs, SFT on the best reply of each prompt. Duplicates are dropped.
pub fn examples_of(
    pairs: &[Pair],
    sft: &[SftExample],
    objective: Objective,
) -> Vec<(String, String, Option<String>)> {
    let mut seen = BTreeSet::new();
    let all: Vec<(String, String, Option<String>)> = match objective {
        Objective::Dpo => pairs
            .iter()
            .map(|p| (p.prompt.clone(), p.chosen.clone(), Some(p.rejected.clone())))
            .collect(),
        Objective::Sft => sft
            .iter()
            .map(|s| (s.prompt.clone(), s.reply.clone(), None))
            .collect(),
    };
    all.into_iter().filter(|e| seen.insert(e.clone())).collect()
}

/// The prompt as the designer sent it (one user message, rendered with
/// the model's template) and the replies, as tokens.
fn tokenize(
    engine: &LocalModel,
    texts: &[(String, String, Option<String>)],
) -> Result<Vec<Example>> {
    let mut out = Vec::with_capacity(texts.len());
    for (prompt, chosen, rejected) in texts {
        let messages = [ChatMessage {
            role: "user".into(),
            content: prompt.clone(),
        }];
        let encode = |t: &str| engine.encode(t).context("tokenizing a reply");
        out.push(Example {
            prompt: engine
                .prompt_tokens(&messages)
                .context("rendering a prompt")?,
            chosen: encode(chosen)?,
            rejected: rejected.as_deref().map(encode).transpose()?,
        });
    }
    Ok(out)
}

/// Reads the runs' pairs and trains the adapter, calling `on` after each
/// step.
pub fn finetune(req: &FinetuneRequest, on: &mut dyn FnMut(&Progress)) -> Result<FinetuneOutcome> {
    req.config.check().context("the fine-tuning settings")?;
    let (mut pairs, mut sft) = (Vec::new(), Vec::new());
    for run in &req.runs {
        let (p, s) = read_run_pairs(run)
            .with_context(|| format!("reading the pairs of {}", run.display()))?;
        pairs.extend(p);
        sft.extend(s);
    }
    let texts = examples_of(&pairs, &sft, req.config.objective);
    if texts.is_empty() {
        return Err(StudyError::msg(format!(
            "{}: no {} examples in these runs (`serl llm pairs` counts them)",
            req.runs
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            match req.config.objective {
                Objective::Dpo => "preference",
                Objective::Sft => "SFT",
            }
        )));
    }
    train_texts(&req.model, &texts, &req.config, &req.out, on)
}

/// Tokenizes `texts` with `model`'s template and trains an adapter on
/// them into `out`.
pub fn train_texts(
    model: &Path,
    texts: &[(String, String, Option<String>)],
    config: &TuneConfig,
    out: &Path,
    on: &mut dyn FnMut(&Progress),
) -> Result<FinetuneOutcome> {
    let mut engine =
        LocalModel::load(model, LocalOptions::default()).context("loading the model")?;
    let examples = tokenize(&engine, texts)?;
    let context = engine.context_length();
    let span =
        |e: &Example| e.prompt.len() + e.chosen.len().max(e.rejected.as_ref().map_or(0, Vec::len));
    let kept: Vec<Example> = examples
        .iter()
        .filter(|e| span(e) < context)
        .cloned()
        .collect();
    let too_long = examples.len() - kept.len();
    let longest = kept.iter().map(span).max().unwrap_or(1);
    let base = BaseModel {
        file: file_name(model),
        hash: engine.hash().context("hashing the model")?,
    };
    let device = config.device.device().context("choosing the device")?;
    let float =
        FloatModel::read_on(model, longest + 1, &device).context("reading the model in f32")?;
    let report = serl_tune::train(&float, base, &kept, config, out, on)
        .with_context(|| format!("fine-tuning into {}", out.display()))?;
    Ok(FinetuneOutcome {
        report,
        examples: examples.len(),
        too_long,
    })
}

/// `[evolve.finetune]`'s learner: the embedded model's file, fine-tuned
/// on every pair so far after each chosen round.
pub struct LocalLearner {
    model: PathBuf,
    config: TuneConfig,
}

impl LocalLearner {
    /// A learner of `model` with `config`'s settings.
    pub fn new(model: PathBuf, config: TuneConfig) -> LocalLearner {
        LocalLearner { model, config }
    }
}

/// Examples fewer than this are not worth an adapter (nothing held out).
const FEWEST_EXAMPLES: usize = 2;

impl Learner for LocalLearner {
    fn learn(
        &mut self,
        iteration: usize,
        all: &[CandidateResult],
        dir: &Path,
        designer: &mut dyn Designer,
    ) -> std::result::Result<Learned, EvolveError> {
        let start = Instant::now();
        let texts = examples_of(
            &pairs_from_candidates(all),
            &sft_from_candidates(all),
            self.config.objective,
        );
        let mut learned = Learned {
            iteration: iteration + 1,
            adapter: None,
            examples: texts.len(),
            heldout_loss: None,
            secs: 0.0,
        };
        if texts.len() >= FEWEST_EXAMPLES {
            let outcome = train_texts(&self.model, &texts, &self.config, dir, &mut |_| {})
                .map_err(|e| {
                    EvolveError::Designer(format!("fine-tuning the designer: {}", e.chain()))
                })?;
            designer
                .set_adapter(Some(dir))
                .map_err(|e| EvolveError::Designer(e.to_string()))?;
            let r = &outcome.report;
            learned.adapter = Some(dir.to_path_buf());
            learned.heldout_loss = Some((r.epochs[0].loss, r.epochs[r.best_epoch].loss));
            // The training's own seconds, kept in its checkpoint: a
            // resumed run reads the adapter back in a second.
            learned.secs = r.secs;
        } else {
            learned.secs = start.elapsed().as_secs_f64();
        }
        Ok(learned)
    }
}

/// `out/report.md` and `out/report.html`: the settings, the held-out
/// figures per epoch, and the loss curve (each step's training loss, the
/// held-out loss at each epoch's end).
pub fn write_report(out: &Path, runs: &[PathBuf], outcome: &FinetuneOutcome) -> Result<PathBuf> {
    use std::fmt::Write as _;
    let r = &outcome.report;
    let c = &r.config;
    let mut md = String::from("# Fine-tuning the designer\n\n");
    let _ = writeln!(
        md,
        "Base model `{}` (BLAKE3 `{}…`); pairs from {}.\n\n{} examples read, {} longer than the context left out; {} trained on, {} held out. Objective {:?}, rank {}, alpha {}, targets {}, learning rate {}, batch {}, clip {}, seed {}.\n",
        r.base.file,
        &r.base.hash[..12.min(r.base.hash.len())],
        runs.iter().map(|p| format!("`{}`", p.display())).collect::<Vec<_>>().join(", "),
        outcome.examples,
        outcome.too_long,
        r.train_examples,
        r.heldout_examples,
        c.objective,
        c.rank,
        c.alpha,
        c.targets.iter().map(|t| t.name()).collect::<Vec<_>>().join(" "),
        c.learning_rate,
        c.batch,
        c.clip,
        c.seed,
    );
    let mut t = serl_report::Table::new([
        "epoch",
        "held-out loss",
        "NLL per token",
        "DPO margin",
        "DPO accuracy",
    ])
    .right(0..5);
    for e in &r.epochs {
        let opt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.4}"));
        let kept = if e.epoch == r.best_epoch {
            " (kept)"
        } else {
            ""
        };
        t.row([
            format!("{}{kept}", e.epoch),
            format!("{:.4}", e.loss),
            format!("{:.4}", e.nll),
            opt(e.margin),
            opt(e.accuracy),
        ]);
    }
    md.push_str(&t.markdown());
    let _ = writeln!(
        md,
        "\n{} steps{}; {} reply tokens through forward and backward passes at {:.1} tokens/s; {:.1} s in all.\n\n![Loss](loss.svg)\n",
        r.steps.len(),
        if r.stopped_early { ", stopped early (no better held-out loss)" } else { "" },
        r.reply_tokens,
        r.tokens_per_sec(),
        r.secs,
    );
    let train: Vec<(f64, f64)> = r.steps.iter().map(|s| (s.step as f64, s.loss)).collect();
    let end_of = |epoch: usize| {
        r.steps
            .iter()
            .filter(|s| s.epoch == epoch)
            .map(|s| s.step)
            .max()
            .unwrap_or(0) as f64
    };
    let heldout: Vec<(f64, f64)> = r.epochs.iter().map(|e| (end_of(e.epoch), e.loss)).collect();
    let mut svg = String::new();
    let chart = serl_report::Chart::new("Loss", "optimizer step", "loss");
    let series = [
        ("training (each step)".to_string(), train),
        ("held out (each epoch)".to_string(), heldout),
    ];
    let drawn = serl_report::lines_chart(&mut svg, &chart, &series).is_ok();
    std::fs::write(out.join("report.md"), &md)?;
    let svgs = if drawn {
        vec![("Loss".to_string(), svg)]
    } else {
        Vec::new()
    };
    let html = out.join("report.html");
    std::fs::write(&html, serl_report::html(&md, &svgs))?;
    Ok(html)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}
