//! The model: weights, vocabulary and template from one GGUF file, and the
//! decoding loop (prompt in one pass, then one token at a time, masked by
//! the grammar when there is one).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use std::io::Cursor;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::{ModelWeights, MAX_SEQ_LEN};
use llguidance::{Matcher, ParserFactory};

use crate::error::LocalError;
use crate::file::ModelFile;
use crate::sample::{Sampler, Sampling};
use crate::template::{ChatMessage, ChatTemplate};
use crate::vocab::Vocab;

/// How the model is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalOptions {
    /// Threads for the matrix products (0: one per core).
    pub threads: usize,
    /// The context length in tokens (0: the model's, at most 4096, the
    /// longest candle's llama supports).
    pub context_length: usize,
}

/// What a reply must follow: a Lark grammar (llguidance's dialect, which
/// may inline JSON schemas with `%json`) or a JSON schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// A Lark grammar.
    Lark(String),
    /// A JSON schema; the reply is compact JSON.
    JsonSchema(serde_json::Value),
}

/// One question to the model.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The conversation; the reply continues it.
    pub messages: &'a [ChatMessage],
    /// The longest reply, in tokens.
    pub max_tokens: usize,
    /// How tokens are drawn.
    pub sampling: Sampling,
    /// The grammar the reply follows, if any.
    pub constraint: Option<&'a Constraint>,
    /// With a grammar: after this many tokens the sampler steers the reply
    /// to its nearest end, drawing only from the most closing tokens the
    /// grammar allows ([`crate::steer_rank`]). A model that keeps opening
    /// brackets (a random one does) then still ends well-formed; a real
    /// model's reply rarely runs this long.
    pub steer_after: usize,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The reply.
    pub text: String,
    /// Tokens in the rendered prompt.
    pub prompt_tokens: usize,
    /// Tokens generated (the end-of-turn token not counted).
    pub completion_tokens: usize,
    /// Whether the reply ended by itself (end of turn, or the grammar
    /// complete) rather than at `max_tokens`.
    pub finished: bool,
    /// Seconds reading the prompt.
    pub prompt_secs: f64,
    /// Seconds generating the reply.
    pub generate_secs: f64,
}

/// A GGUF instruct model, loaded and ready to answer.
pub struct LocalModel {
    path: String,
    weights: ModelWeights,
    vocab: Arc<Vocab>,
    template: ChatTemplate,
    context: usize,
    n_vocab: usize,
    factory: ParserFactory,
    pool: Arc<rayon::ThreadPool>,
    /// The last prompt, the model's state after reading it, and the
    /// logits there: a request with the same prompt (a module asked again
    /// with another seed) skips the prompt pass. Cloning the weights is
    /// cheap: tensors are shared, and the key-value cache grows by
    /// concatenation into new tensors, so the clone's stays as it was.
    prompt_cache: Option<(Vec<u32>, ModelWeights, Vec<f32>)>,
}

impl LocalModel {
    /// Loads `path`: header checks first (see [`LocalError`]), then the
    /// weights, the vocabulary and the chat template.
    pub fn load(path: &Path, options: LocalOptions) -> Result<LocalModel, LocalError> {
        let file = ModelFile::open(path)?;
        let vocab = Arc::new(Vocab::read(&file)?);
        let template = ChatTemplate::read(&file)?;
        let n_vocab = file
            .content
            .tensor_infos
            .get("token_embd.weight")
            .and_then(|t| t.shape.dims().first().copied())
            .ok_or_else(|| file.unsupported("no `token_embd.weight` matrix".into()))?;
        let model_context = match file.integer("llama.context_length") {
            Some(c) if c > 0 => c as usize,
            _ => MAX_SEQ_LEN,
        };
        let context = match options.context_length {
            0 => model_context,
            n => n,
        }
        .min(MAX_SEQ_LEN);
        let name = path.display().to_string();
        if options.threads > 0 && std::env::var_os("CANDLE_NUM_THREADS").is_none() {
            // candle's matrix products run on its own pool, sized once from
            // this variable on first use (here, before any product).
            std::env::set_var("CANDLE_NUM_THREADS", options.threads.to_string());
        }
        let weights = read_weights(file).map_err(|e| LocalError::Unsupported {
            path: name.clone(),
            message: format!("reading the weights: {e}"),
        })?;
        let tok_env = vocab.tok_env(n_vocab);
        let mut factory = ParserFactory::new_simple(&tok_env)
            .map_err(|e| LocalError::Constraint(e.to_string()))?;
        factory.quiet();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(options.threads)
            .build()
            .map_err(|e| LocalError::Run(e.to_string()))?;
        let pool = Arc::new(pool);
        Ok(LocalModel {
            path: name,
            weights,
            vocab,
            template,
            context,
            n_vocab,
            factory,
            pool,
            prompt_cache: None,
        })
    }

    /// The model file, for logs.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The context length in tokens.
    pub fn context_length(&self) -> usize {
        self.context
    }

    /// Checks that `constraint` compiles against this vocabulary.
    pub fn check(&self, constraint: &Constraint) -> Result<(), LocalError> {
        self.matcher(constraint).map(|_| ())
    }

    fn matcher(&self, constraint: &Constraint) -> Result<Matcher, LocalError> {
        crate::grammar::matcher(&self.factory, constraint)
    }

    /// The reply to `request`.
    pub fn chat(&mut self, request: &Request) -> Result<Generation, LocalError> {
        let prompt =
            self.template
                .render(request.messages, &self.vocab.bos_text, &self.vocab.eos_text)?;
        let tokens = self.vocab.encode(&prompt)?;
        if tokens.len() + 1 >= self.context {
            return Err(LocalError::ContextFull {
                tokens: tokens.len(),
                context: self.context,
            });
        }
        let mut matcher = request.constraint.map(|c| self.matcher(c)).transpose()?;
        let pool = self.pool.clone();
        pool.install(|| self.decode(&tokens, request, matcher.as_mut()))
    }

    fn decode(
        &mut self,
        prompt: &[u32],
        request: &Request,
        mut matcher: Option<&mut Matcher>,
    ) -> Result<Generation, LocalError> {
        let start = Instant::now();
        let mut logits = match &self.prompt_cache {
            Some((tokens, weights, logits)) if tokens == prompt => {
                self.weights = weights.clone();
                logits.clone()
            }
            _ => {
                let logits = self.forward(prompt, 0)?;
                self.prompt_cache = Some((prompt.to_vec(), self.weights.clone(), logits.clone()));
                logits
            }
        };
        let prompt_secs = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let mut sampler = Sampler::new(request.sampling);
        let mut reply = Vec::new();
        let budget = request.max_tokens.min(self.context - prompt.len() - 1);
        let mut finished = false;
        while reply.len() < budget {
            let token = match matcher.as_deref_mut() {
                Some(m) => {
                    if m.is_stopped() {
                        finished = true;
                        break;
                    }
                    let mask = m
                        .compute_mask()
                        .map_err(|e| LocalError::Constraint(e.to_string()))?;
                    if reply.len() >= request.steer_after {
                        let steer = &self.vocab.steer;
                        let rank = |t: u32| steer.get(t as usize).copied().unwrap_or(3);
                        let best = (0..self.n_vocab as u32)
                            .filter(|&t| mask.is_allowed(t))
                            .map(rank)
                            .min();
                        sampler.sample(&logits, |t| mask.is_allowed(t) && Some(rank(t)) == best)
                    } else {
                        sampler.sample(&logits, |t| mask.is_allowed(t))
                    }
                }
                None => sampler.sample(&logits, |_| true),
            };
            let Some(token) = token else { break };
            if self.vocab.stop.contains(&token) {
                finished = true;
                break;
            }
            if let Some(m) = matcher.as_deref_mut() {
                m.consume_token(token)
                    .map_err(|e| LocalError::Constraint(e.to_string()))?;
            }
            reply.push(token);
            let stopped = matcher.as_deref().is_some_and(Matcher::is_stopped);
            if stopped || reply.len() == budget {
                // No next token: the forward pass would be wasted.
                finished = stopped;
                break;
            }
            logits = self.forward(&[token], prompt.len() + reply.len() - 1)?;
        }
        Ok(Generation {
            text: self.vocab.decode(&reply),
            prompt_tokens: prompt.len(),
            completion_tokens: reply.len(),
            finished,
            prompt_secs,
            generate_secs: start.elapsed().as_secs_f64(),
        })
    }

    /// The next-token logits after `tokens`, which start at `position`.
    fn forward(&mut self, tokens: &[u32], position: usize) -> Result<Vec<f32>, LocalError> {
        let input = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
        let logits = self.weights.forward(&input, position)?;
        let logits = logits.squeeze(0)?.to_dtype(candle_core::DType::F32)?;
        let v: Vec<f32> = logits.to_vec1()?;
        if v.len() != self.n_vocab {
            return Err(LocalError::Run(format!(
                "{} logits for a vocabulary of {}",
                v.len(),
                self.n_vocab
            )));
        }
        Ok(v)
    }
}

/// Whether candle multiplies tensors of `dtype` without SIMD (it has AVX
/// kernels for Q4_0, Q8_0 and the K-quants, not for these).
fn slow(dtype: GgmlDType) -> bool {
    matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1)
}

/// The network of `file`. Tensors in a layout candle multiplies without
/// SIMD are converted to Q8_0 on loading (same 32-value blocks, more
/// precise, about twice the memory of Q4_1): SmolLM2's Q4_1 file then
/// runs several times faster.
fn read_weights(mut file: ModelFile) -> candle_core::Result<ModelWeights> {
    let cpu = Device::Cpu;
    if !file
        .content
        .tensor_infos
        .values()
        .any(|t| slow(t.ggml_dtype))
    {
        return ModelWeights::from_gguf(file.content, &mut file.reader, &cpu);
    }
    let mut names: Vec<String> = file.content.tensor_infos.keys().cloned().collect();
    names.sort();
    let mut tensors = Vec::with_capacity(names.len());
    for name in &names {
        let q = file.content.tensor(&mut file.reader, name, &cpu)?;
        let q = if slow(q.dtype()) {
            QTensor::quantize(&q.dequantize(&cpu)?, GgmlDType::Q8_0)?
        } else {
            q
        };
        tensors.push(q);
    }
    // The rewritten file is aligned to 32 bytes, whatever the original
    // declared.
    let metadata: Vec<(&str, &Value)> = file
        .content
        .metadata
        .iter()
        .filter(|(k, _)| k.as_str() != "general.alignment")
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let named: Vec<(&str, &QTensor)> = names.iter().map(String::as_str).zip(&tensors).collect();
    let mut buffer = Cursor::new(Vec::new());
    gguf_file::write(&mut buffer, &metadata, &named)?;
    buffer.set_position(0);
    let content = Content::read(&mut buffer)?;
    ModelWeights::from_gguf(content, &mut buffer, &cpu)
}
