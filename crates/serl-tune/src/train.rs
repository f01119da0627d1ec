//! The training loop: examples split into training and held-out shares,
//! grouped by prompt (one cache per group), AdamW steps on batches of a
//! group, the held-out loss after each epoch for early stopping, and a
//! checkpoint after each group.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::{Device, Tensor};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use serl_local::{Adapter, AdapterConfig, BaseModel};

use crate::lora::Lora;
use crate::model::{FloatModel, KvCache};
use crate::optim::AdamW;
use crate::{Example, Objective, TuneConfig, TuneError};

/// Where training is, for a progress bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Optimizer steps taken.
    pub step: u64,
    /// Steps in all epochs (if none stops early).
    pub steps: u64,
    /// The epoch (from 1).
    pub epoch: usize,
    /// The last step's loss (NaN before the first).
    pub loss: f64,
    /// What is being computed: `reference` (the base model's
    /// log-probabilities, DPO), `evaluating` (the held-out examples after
    /// an epoch) or `training`.
    pub doing: &'static str,
}

impl Progress {
    /// What is being computed, in words, for a progress bar's message.
    pub fn describe(&self) -> String {
        match self.doing {
            "reference" => "the base model's log-probabilities of every reply".to_string(),
            "evaluating" => format!("the held-out examples after epoch {}", self.epoch),
            _ => format!("epoch {}, loss {:.4}", self.epoch, self.loss),
        }
    }
}

/// One optimizer step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepLog {
    /// The step (from 1).
    pub step: u64,
    /// The epoch (from 1).
    pub epoch: usize,
    /// The batch's mean loss.
    pub loss: f64,
    /// The gradients' global norm before clipping.
    pub grad_norm: f64,
}

/// The held-out examples after an epoch (epoch 0: the base model).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochLog {
    /// The epoch (0: before training).
    pub epoch: usize,
    /// The mean loss of the held-out examples (the training examples when
    /// none is held out).
    pub loss: f64,
    /// The chosen reply's mean negative log-likelihood per token.
    pub nll: f64,
    /// DPO: the mean margin `(log π(chosen) − log π_ref(chosen)) −
    /// (log π(rejected) − log π_ref(rejected))`.
    pub margin: Option<f64>,
    /// DPO: the share of examples whose margin is positive.
    pub accuracy: Option<f64>,
}

/// What a training run did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    /// The settings.
    pub config: TuneConfig,
    /// The base model.
    pub base: BaseModel,
    /// Examples trained on and held out.
    pub train_examples: usize,
    /// Examples held out.
    pub heldout_examples: usize,
    /// Every step.
    pub steps: Vec<StepLog>,
    /// Every epoch's held-out figures, from epoch 0.
    pub epochs: Vec<EpochLog>,
    /// The epoch whose adapter was kept (the lowest held-out loss).
    pub best_epoch: usize,
    /// Whether the patience ran out before the last epoch.
    pub stopped_early: bool,
    /// Reply tokens through a forward and backward pass.
    pub reply_tokens: u64,
    /// Seconds of forward and backward passes over replies.
    pub reply_secs: f64,
    /// Seconds in all (prompt caches, evaluation, checkpoints).
    pub secs: f64,
}

impl TuneReport {
    /// Reply tokens per second of forward and backward passes.
    pub fn tokens_per_sec(&self) -> f64 {
        self.reply_tokens as f64 / self.reply_secs.max(1e-9)
    }
}

/// The checkpoint: everything a resumed run needs to continue exactly.
#[derive(Serialize, Deserialize)]
struct State {
    data: String,
    report: TuneReport,
    /// Next epoch (from 1) and next group within it.
    epoch: usize,
    group: usize,
    bad_epochs: usize,
    /// DPO: the base's log-probabilities of (chosen, rejected).
    reference: Vec<(f64, f64)>,
    /// Checkpoints written (names the tensor files).
    saves: u64,
    done: bool,
}

const STATE: &str = "state.json";

/// Trains an adapter on `examples` and writes it to `dir`
/// (`adapter.json`, `adapter.safetensors`, `history.json`), resuming from
/// `dir/checkpoint` when a run with the same settings and examples left
/// one there.
pub fn train(
    model: &FloatModel,
    base: BaseModel,
    examples: &[Example],
    config: &TuneConfig,
    dir: &Path,
    on: &mut dyn FnMut(&Progress),
) -> Result<TuneReport, TuneError> {
    config.check()?;
    let examples = usable(examples, config.objective)?;
    let (train_idx, heldout_idx) = split(examples.len(), config.holdout, config.seed);
    let per_epoch: u64 = groups(&examples, &train_idx)
        .iter()
        .map(|g| g.len().div_ceil(config.batch) as u64)
        .sum();
    let mut run = Run {
        model,
        config,
        examples: &examples,
        ckpt: dir.join("checkpoint"),
        start: Instant::now(),
        offset: 0.0,
        steps: per_epoch * config.epochs as u64,
    };
    let mut lora = Lora::new_on(
        model.shape(),
        adapter_config(config),
        config.seed,
        model.device(),
    )?;
    lora.set_dropout(config.dropout, config.seed);
    let mut opt = AdamW::new(config.learning_rate, config.weight_decay);
    let data = fingerprint(&examples, config, &base);
    let mut state = match run.resume(&data, &mut lora, &mut opt)? {
        Some(s) => s,
        None => run.fresh(data, base, &lora, &train_idx, &heldout_idx, on)?,
    };
    run.offset = state.report.secs;
    if !state.done {
        run.epochs(
            &mut state,
            &mut lora,
            &mut opt,
            &train_idx,
            &heldout_idx,
            on,
        )?;
        let best = run.read_tensors(
            &format!("best-{}.safetensors", state.report.best_epoch),
            &Device::Cpu,
        )?;
        lora.load(&best)?;
        let adapter: Adapter = lora.to_adapter(state.report.base.clone())?;
        adapter.save(dir)?;
        state.done = true;
        run.save_state(&state)?;
    }
    let history = serde_json::to_string_pretty(&state.report).map_err(ck)?;
    write(&dir.join("history.json"), history.as_bytes())?;
    Ok(state.report)
}

fn ck(e: impl std::fmt::Display) -> TuneError {
    TuneError::Checkpoint(e.to_string())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), TuneError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| ck(format!("{}: {e}", path.display())))
}

fn adapter_config(c: &TuneConfig) -> AdapterConfig {
    AdapterConfig {
        rank: c.rank,
        alpha: c.alpha,
        targets: c.targets.clone(),
    }
}

/// The examples the objective can use: every one for SFT, those with a
/// rejected reply for DPO; empty replies or prompts are an error.
fn usable(examples: &[Example], objective: Objective) -> Result<Vec<Example>, TuneError> {
    if let Some(i) = examples.iter().position(|e| {
        e.prompt.is_empty() || e.chosen.is_empty() || e.rejected.as_ref().is_some_and(Vec::is_empty)
    }) {
        return Err(TuneError::Data(format!(
            "example {i} has an empty prompt or reply"
        )));
    }
    let out: Vec<Example> = examples
        .iter()
        .filter(|e| objective == Objective::Sft || e.rejected.is_some())
        .cloned()
        .collect();
    if out.is_empty() {
        return Err(TuneError::Data(match objective {
            Objective::Dpo => {
                "no preference pairs (DPO needs a rejected reply); try `--objective sft`".into()
            }
            Objective::Sft => "no examples".into(),
        }));
    }
    Ok(out)
}

/// Seeded split: (training, held-out) indices; at least one of each when
/// there are two examples and a share is held out.
fn split(n: usize, holdout: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.shuffle(&mut SmallRng::seed_from_u64(seed ^ 0x5EED));
    let mut h = (n as f64 * holdout).round() as usize;
    if holdout > 0.0 && n >= 2 {
        h = h.clamp(1, n - 1);
    } else {
        h = 0;
    }
    let heldout = idx[..h].to_vec();
    (idx[h..].to_vec(), heldout)
}

/// Indices grouped by prompt, in order of first appearance.
fn groups(examples: &[Example], idx: &[usize]) -> Vec<Vec<usize>> {
    let mut order: Vec<&[u32]> = Vec::new();
    let mut by: BTreeMap<&[u32], Vec<usize>> = BTreeMap::new();
    for &i in idx {
        let p = examples[i].prompt.as_slice();
        let g = by.entry(p).or_default();
        if g.is_empty() {
            order.push(p);
        }
        g.push(i);
    }
    order
        .into_iter()
        .map(|p| by.remove(p).unwrap_or_default())
        .collect()
}

fn fingerprint(examples: &[Example], config: &TuneConfig, base: &BaseModel) -> String {
    let mut h = blake3::Hasher::new();
    h.update(serde_json::to_string(config).unwrap_or_default().as_bytes());
    h.update(base.hash.as_bytes());
    for e in examples {
        for part in [Some(&e.prompt), Some(&e.chosen), e.rejected.as_ref()] {
            let part = part.map_or(&[][..], |p| p.as_slice());
            h.update(&(part.len() as u64).to_le_bytes());
            for t in part {
                h.update(&t.to_le_bytes());
            }
        }
    }
    h.finalize().to_hex().to_string()
}

struct Run<'a> {
    model: &'a FloatModel,
    config: &'a TuneConfig,
    examples: &'a [Example],
    ckpt: PathBuf,
    start: Instant,
    /// Seconds spent before this process (a resumed run's).
    offset: f64,
    /// Optimizer steps in all epochs.
    steps: u64,
}

/// softplus(x) = log(1 + eˣ), stably.
fn softplus(x: &Tensor) -> candle_core::Result<Tensor> {
    x.relu()? + (x.abs()?.neg()?.exp()? + 1.0)?.log()?
}

impl Run<'_> {
    fn progress(&self, step: u64, epoch: usize, loss: f64, doing: &'static str) -> Progress {
        Progress {
            step,
            steps: self.steps,
            epoch,
            loss,
            doing,
        }
    }

    /// The cache of a prompt's tokens but its last, and that last token.
    fn prompt_cache(
        &self,
        lora: Option<&Lora>,
        prompt: &[u32],
    ) -> Result<(Option<KvCache>, u32), TuneError> {
        let (head, last) = prompt.split_at(prompt.len() - 1);
        let cache = if head.is_empty() {
            None
        } else {
            Some(self.model.cache(lora, head)?)
        };
        Ok((cache, last[0]))
    }

    /// The example's loss (a scalar with gradients) and its reply tokens.
    fn loss(
        &self,
        lora: &Lora,
        cache: Option<&KvCache>,
        last: u32,
        i: usize,
        reference: &[(f64, f64)],
    ) -> Result<(Tensor, u64), TuneError> {
        let e = &self.examples[i];
        let lp = |reply: &[u32]| self.model.reply_logprob(Some(lora), cache, last, reply);
        let chosen = lp(&e.chosen)?;
        match (self.config.objective, &e.rejected) {
            (Objective::Sft, _) | (Objective::Dpo, None) => Ok((
                (chosen.neg()? / e.chosen.len() as f64)?,
                e.chosen.len() as u64,
            )),
            (Objective::Dpo, Some(rejected)) => {
                let (rc, rr) = reference[i];
                let margin = ((chosen - lp(rejected)?)? - (rc - rr))?;
                let loss = softplus(&(margin * -self.config.beta)?)?;
                Ok((loss, (e.chosen.len() + rejected.len()) as u64))
            }
        }
    }

    /// The base model's log-probabilities of each example's replies.
    fn reference(&self) -> Result<Vec<(f64, f64)>, TuneError> {
        let mut out = vec![(0.0, 0.0); self.examples.len()];
        if self.config.objective != Objective::Dpo {
            return Ok(out);
        }
        let all: Vec<usize> = (0..self.examples.len()).collect();
        for g in groups(self.examples, &all) {
            let (cache, last) = self.prompt_cache(None, &self.examples[g[0]].prompt)?;
            for i in g {
                let e = &self.examples[i];
                let lp = |r: &[u32]| -> Result<f64, TuneError> {
                    Ok(self
                        .model
                        .reply_logprob(None, cache.as_ref(), last, r)?
                        .to_scalar::<f32>()? as f64)
                };
                let rej = e.rejected.as_deref().map(lp).transpose()?.unwrap_or(0.0);
                out[i] = (lp(&e.chosen)?, rej);
            }
        }
        Ok(out)
    }

    /// The figures of `lora` on the examples `idx` (no gradients kept).
    fn evaluate(
        &self,
        lora: &Lora,
        idx: &[usize],
        reference: &[(f64, f64)],
        epoch: usize,
    ) -> Result<EpochLog, TuneError> {
        let frozen = lora.frozen()?;
        let (mut loss, mut nll, mut margin, mut wins) = (0.0, 0.0, 0.0, 0usize);
        for g in groups(self.examples, idx) {
            let (cache, last) = self.prompt_cache(Some(&frozen), &self.examples[g[0]].prompt)?;
            for i in g {
                let e = &self.examples[i];
                let lp = |r: &[u32]| -> Result<f64, TuneError> {
                    Ok(self
                        .model
                        .reply_logprob(Some(&frozen), cache.as_ref(), last, r)?
                        .to_scalar::<f32>()? as f64)
                };
                let c = lp(&e.chosen)?;
                nll -= c / e.chosen.len() as f64;
                match (self.config.objective, &e.rejected) {
                    (Objective::Dpo, Some(r)) => {
                        let m = (c - lp(r)?) - (reference[i].0 - reference[i].1);
                        margin += m;
                        wins += usize::from(m > 0.0);
                        let x = -self.config.beta * m;
                        loss += x.max(0.0) + (-x.abs()).exp().ln_1p();
                    }
                    _ => loss -= c / e.chosen.len() as f64,
                }
            }
        }
        let n = idx.len().max(1) as f64;
        let dpo = self.config.objective == Objective::Dpo;
        Ok(EpochLog {
            epoch,
            loss: loss / n,
            nll: nll / n,
            margin: dpo.then_some(margin / n),
            accuracy: dpo.then_some(wins as f64 / n),
        })
    }

    fn fresh(
        &self,
        data: String,
        base: BaseModel,
        lora: &Lora,
        train: &[usize],
        heldout: &[usize],
        on: &mut dyn FnMut(&Progress),
    ) -> Result<State, TuneError> {
        on(&self.progress(0, 0, f64::NAN, "reference"));
        let reference = self.reference()?;
        on(&self.progress(0, 0, f64::NAN, "evaluating"));
        let measure = if heldout.is_empty() { train } else { heldout };
        let first = self.evaluate(lora, measure, &reference, 0)?;
        let mut state = State {
            data,
            report: TuneReport {
                config: self.config.clone(),
                base,
                train_examples: train.len(),
                heldout_examples: heldout.len(),
                steps: Vec::new(),
                epochs: vec![first],
                best_epoch: 0,
                stopped_early: false,
                reply_tokens: 0,
                reply_secs: 0.0,
                secs: 0.0,
            },
            epoch: 1,
            group: 0,
            bad_epochs: 0,
            reference,
            saves: 0,
            done: false,
        };
        std::fs::create_dir_all(&self.ckpt)
            .map_err(|e| ck(format!("{}: {e}", self.ckpt.display())))?;
        self.write_tensors("best-0.safetensors", &lora.tensors()?)?;
        self.checkpoint(&mut state, lora, &AdamW::new(0.0, 0.0))?;
        Ok(state)
    }

    /// The saved state, if a run with the same settings and examples left
    /// one; its adapter and moments are loaded into `lora` and `opt`.
    fn resume(
        &self,
        data: &str,
        lora: &mut Lora,
        opt: &mut AdamW,
    ) -> Result<Option<State>, TuneError> {
        let path = self.ckpt.join(STATE);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(None);
        };
        let state: State =
            serde_json::from_str(&text).map_err(|e| ck(format!("{}: {e}", path.display())))?;
        if state.data != data {
            return Err(ck(format!(
                "{} belongs to a run with other settings or examples; write the adapter elsewhere or remove the directory",
                self.ckpt.display()
            )));
        }
        let device = lora.device();
        lora.load(&self.read_tensors(&format!("lora-{}.safetensors", state.saves), &device)?)?;
        let moments = self.read_tensors(&format!("adam-{}.safetensors", state.saves), &device)?;
        opt.load(&moments, state.report.steps.len() as u64);
        Ok(Some(state))
    }

    fn read_tensors(
        &self,
        name: &str,
        device: &Device,
    ) -> Result<HashMap<String, Tensor>, TuneError> {
        let path = self.ckpt.join(name);
        candle_core::safetensors::load(&path, device)
            .map_err(|e| ck(format!("{}: {e}", path.display())))
    }

    fn write_tensors(&self, name: &str, t: &HashMap<String, Tensor>) -> Result<(), TuneError> {
        let path = self.ckpt.join(name);
        let tmp = self.ckpt.join(format!("{name}.tmp"));
        candle_core::safetensors::save(t, &tmp)
            .map_err(ck)
            .and_then(|_| std::fs::rename(&tmp, &path).map_err(ck))
    }

    fn save_state(&self, state: &State) -> Result<(), TuneError> {
        let text = serde_json::to_string(state).map_err(ck)?;
        write(&self.ckpt.join(STATE), text.as_bytes())
    }

    /// Writes the adapter and moments under new names, then the state
    /// that names them (the commit), then drops the previous files.
    fn checkpoint(&self, state: &mut State, lora: &Lora, opt: &AdamW) -> Result<(), TuneError> {
        let n = state.saves + 1;
        self.write_tensors(&format!("lora-{n}.safetensors"), &lora.tensors()?)?;
        self.write_tensors(&format!("adam-{n}.safetensors"), &opt.tensors())?;
        state.saves = n;
        state.report.secs = self.offset + self.start.elapsed().as_secs_f64();
        self.save_state(state)?;
        for old in [
            format!("lora-{}.safetensors", n - 1),
            format!("adam-{}.safetensors", n - 1),
        ] {
            let _ = std::fs::remove_file(self.ckpt.join(old));
        }
        Ok(())
    }

    /// The epochs left: each a pass over the training groups in a seeded
    /// order, then the held-out figures, the best adapter kept, and the
    /// patience checked.
    fn epochs(
        &self,
        state: &mut State,
        lora: &mut Lora,
        opt: &mut AdamW,
        train: &[usize],
        heldout: &[usize],
        on: &mut dyn FnMut(&Progress),
    ) -> Result<(), TuneError> {
        let c = self.config;
        let all_groups = groups(self.examples, train);
        let measure = if heldout.is_empty() { train } else { heldout };
        while state.epoch <= c.epochs {
            let mut order = all_groups.clone();
            order.shuffle(&mut SmallRng::seed_from_u64(
                c.seed.wrapping_add(state.epoch as u64),
            ));
            while state.group < order.len() {
                self.group(state, lora, opt, &order[state.group], on)?;
                state.group += 1;
                self.checkpoint(state, lora, opt)?;
            }
            let last = state.report.steps.last().map_or(f64::NAN, |s| s.loss);
            on(&self.progress(
                state.report.steps.len() as u64,
                state.epoch,
                last,
                "evaluating",
            ));
            let log = self.evaluate(lora, measure, &state.reference, state.epoch)?;
            let best = state.report.epochs[state.report.best_epoch].loss;
            if log.loss < best {
                state.report.best_epoch = state.epoch;
                state.bad_epochs = 0;
                self.write_tensors(
                    &format!("best-{}.safetensors", state.epoch),
                    &lora.tensors()?,
                )?;
            } else {
                state.bad_epochs += 1;
            }
            state.report.epochs.push(log);
            state.epoch += 1;
            state.group = 0;
            let out_of_patience = !heldout.is_empty() && state.bad_epochs >= c.patience.max(1);
            if out_of_patience && state.epoch <= c.epochs {
                state.report.stopped_early = true;
                state.epoch = c.epochs + 1;
            }
            self.checkpoint(state, lora, opt)?;
        }
        Ok(())
    }

    /// The optimizer steps on one prompt's examples, `batch` at a time.
    fn group(
        &self,
        state: &mut State,
        lora: &mut Lora,
        opt: &mut AdamW,
        group: &[usize],
        on: &mut dyn FnMut(&Progress),
    ) -> Result<(), TuneError> {
        let c = self.config;
        let (cache, last) = self.prompt_cache(Some(lora), &self.examples[group[0]].prompt)?;
        for batch in group.chunks(c.batch) {
            let step = state.report.steps.len() as u64 + 1;
            lora.with_dropout_seed(c.seed ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let started = Instant::now();
            // One backward pass per example, the gradients added up: the
            // peak memory is one example's graph, not the batch's.
            let vars = lora.vars();
            let mut grads: Vec<Option<Tensor>> = vec![None; vars.len()];
            let (mut loss, mut tokens) = (0.0, 0);
            for &i in batch {
                let (l, n) = self.loss(lora, cache.as_ref(), last, i, &state.reference)?;
                let l = (l / batch.len() as f64)?;
                let g = l.backward()?;
                for (sum, (_, v)) in grads.iter_mut().zip(&vars) {
                    if let Some(g) = g.get(v.as_tensor()) {
                        *sum = Some(match sum.take() {
                            Some(s) => (s + g)?,
                            None => g.clone(),
                        });
                    }
                }
                loss += l.to_scalar::<f32>()? as f64;
                tokens += n;
            }
            let grad_norm = opt.step(&vars, &grads, c.clip)?;
            state.report.reply_secs += started.elapsed().as_secs_f64();
            state.report.reply_tokens += tokens;
            if !loss.is_finite() {
                return Err(TuneError::Data(format!(
                    "the loss is {loss} at step {step}; lower `learning_rate`"
                )));
            }
            state.report.steps.push(StepLog {
                step,
                epoch: state.epoch,
                loss,
                grad_norm,
            });
            on(&self.progress(step, state.epoch, loss, "training"));
        }
        Ok(())
    }
}
