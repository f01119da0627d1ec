//! The model: weights, vocabulary and template from one GGUF file, and the
//! decoding loop (prompt in one pass, then one token at a time, masked by
//! the grammar when there is one).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use llguidance::{Matcher, ParserFactory};

use crate::adapter::{model_hash, Adapter};
use crate::engine::{Network, State};
use crate::error::LocalError;
use crate::file::ModelFile;
use crate::grammar::Constraint;
use crate::sample::{Sampler, Sampling};
use crate::template::{ChatMessage, ChatTemplate};
use crate::vocab::Vocab;

/// How the model is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalOptions {
    /// Threads for the matrix products (0: one per core).
    pub threads: usize,
    /// The context length in tokens (0: the model's, at most
    /// [`MAX_CONTEXT`]).
    pub context_length: usize,
    /// Conversations whose key-value caches are kept (at least 1; see
    /// [`LocalModel::chat`]).
    pub cache_slots: usize,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            threads: 0,
            context_length: 0,
            cache_slots: DEFAULT_CACHE_SLOTS,
        }
    }
}

/// Conversations kept by default: one per module a design round asks for,
/// and the instruction rewrites.
pub const DEFAULT_CACHE_SLOTS: usize = 8;

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
    /// Of those, the ones a kept conversation already held (not read
    /// again).
    pub cached_tokens: usize,
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
    file: PathBuf,
    /// The adapter's base model hash, once computed.
    hash: Option<String>,
    network: Network,
    /// The key-value caches of the last conversations.
    cache: Conversations,
    vocab: Arc<Vocab>,
    template: ChatTemplate,
    context: usize,
    n_vocab: usize,
    factory: ParserFactory,
    pool: Arc<rayon::ThreadPool>,
}

/// The longest context the backend runs (the key-value cache holds
/// `2 × layers × kv_width` f16 values per token).
pub const MAX_CONTEXT: usize = 8192;

impl LocalModel {
    /// Loads `path`: header checks first (see [`LocalError`]), then the
    /// weights, the vocabulary and the chat template.
    pub fn load(path: &Path, options: LocalOptions) -> Result<LocalModel, LocalError> {
        let mut file = ModelFile::open(path)?;
        let vocab = Arc::new(Vocab::read(&file)?);
        let template = ChatTemplate::read(&file)?;
        let n_vocab = file
            .content
            .tensor_infos
            .get("token_embd.weight")
            .and_then(|t| t.shape.dims().first().copied())
            .ok_or_else(|| file.unsupported("no `token_embd.weight` matrix".into()))?;
        let arch = file.string("general.architecture")?;
        let model_context = match file.integer(&format!("{arch}.context_length")) {
            Some(c) if c > 0 => c as usize,
            _ => MAX_CONTEXT,
        };
        let context = match options.context_length {
            0 => model_context,
            n => n,
        }
        .min(MAX_CONTEXT);
        let name = path.display().to_string();
        let network = Network::read(path, &file.content, &mut file.reader, &arch, context)
            .map_err(|e| LocalError::Unsupported {
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
            file: path.to_path_buf(),
            hash: None,
            network,
            cache: Conversations::new(options.cache_slots),
            vocab,
            template,
            context,
            n_vocab,
            factory,
            pool,
        })
    }

    /// The model file, for logs.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// BLAKE3 of the model file (what an adapter names its base by).
    pub fn hash(&mut self) -> Result<String, LocalError> {
        if self.hash.is_none() {
            self.hash = Some(model_hash(&self.file)?);
        }
        Ok(self.hash.clone().unwrap_or_default())
    }

    /// Runs with `adapter`'s low-rank updates from now on (`None`: the base
    /// model). An adapter trained on another file is refused; the kept
    /// conversations are dropped (their caches were computed without it).
    pub fn set_adapter(&mut self, adapter: Option<Adapter>) -> Result<(), LocalError> {
        if let Some(a) = &adapter {
            let hash = self.hash()?;
            if a.base.hash != hash {
                return Err(LocalError::Adapter {
                    path: self.path.clone(),
                    message: format!(
                        "the adapter was trained on `{}` (hash {}…), not on this file (hash {}…)",
                        a.base.file,
                        &a.base.hash[..a.base.hash.len().min(12)],
                        &hash[..12]
                    ),
                });
            }
        }
        self.network
            .set_adapter(adapter.map(Arc::new))
            .map_err(|message| LocalError::Adapter {
                path: self.path.clone(),
                message,
            })?;
        self.cache.clear();
        Ok(())
    }

    /// The tokens of the prompt that `messages` render to, the reply's
    /// first token to follow (what [`LocalModel::chat`] reads).
    pub fn prompt_tokens(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, LocalError> {
        let prompt = self
            .template
            .render(messages, &self.vocab.bos_text, &self.vocab.eos_text)?;
        self.vocab.encode(&prompt)
    }

    /// The context length in tokens.
    pub fn context_length(&self) -> usize {
        self.context
    }

    /// The next-token logits after `tokens`, read like a prompt (from the
    /// kept conversation that shares the most with them): what the
    /// sampler would draw the next token from. For tests and probes.
    pub fn logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>, LocalError> {
        self.check_tokens(tokens)?;
        let mut state = self.cache.take(tokens);
        let pool = self.pool.clone();
        let logits = pool.install(|| self.network.logits(&mut state, tokens));
        self.cache.put(state);
        logits.map_err(|e| LocalError::Run(format!("{}: {e}", self.path)))
    }

    /// The prompt's tokens: `text` as the model's tokenizer encodes it
    /// (special tokens written out become their ids).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        self.vocab.encode(text)
    }

    /// The width of the logits: the embedding's rows.
    pub fn vocab_size(&self) -> usize {
        self.n_vocab
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<(), LocalError> {
        if tokens.is_empty() {
            return Err(LocalError::Run(format!(
                "{}: an empty prompt (no tokens)",
                self.path
            )));
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.n_vocab) {
            return Err(LocalError::Unsupported {
                path: self.path.clone(),
                message: format!(
                    "the tokenizer gave token {t}, past the embedding's {} rows",
                    self.n_vocab
                ),
            });
        }
        if tokens.len() + 1 >= self.context {
            return Err(LocalError::ContextFull {
                tokens: tokens.len(),
                context: self.context,
            });
        }
        Ok(())
    }

    /// Checks that `constraint` compiles against this vocabulary.
    pub fn check(&self, constraint: &Constraint) -> Result<(), LocalError> {
        self.matcher(constraint).map(|_| ())
    }

    fn matcher(&self, constraint: &Constraint) -> Result<Matcher, LocalError> {
        crate::grammar::matcher(&self.factory, constraint)
    }

    /// The reply to `request`. The prompt is read from the kept
    /// conversation that shares the longest prefix with it (the same
    /// module asked again for the next candidate shares all of it; another
    /// module, the system prompt), so only what differs is read; the
    /// logits do not depend on what was kept (a kept prefix gives exactly
    /// a fresh start's).
    pub fn chat(&mut self, request: &Request) -> Result<Generation, LocalError> {
        let tokens = self.prompt_tokens(request.messages)?;
        self.check_tokens(&tokens)?;
        let mut matcher = request.constraint.map(|c| self.matcher(c)).transpose()?;
        let pool = self.pool.clone();
        pool.install(|| self.decode(&tokens, request, matcher.as_mut()))
    }

    fn decode(
        &mut self,
        prompt: &[u32],
        request: &Request,
        matcher: Option<&mut Matcher>,
    ) -> Result<Generation, LocalError> {
        let start = Instant::now();
        let mut state = self.cache.take(prompt);
        let cached_tokens = self.network.reusable(&state, prompt);
        let result = self.network.logits(&mut state, prompt).map(|logits| {
            let prompt_secs = start.elapsed().as_secs_f64();
            let mut logits = logits;
            let reply = self.generate(&mut state, &mut logits, prompt.len(), request, matcher);
            (prompt_secs, reply)
        });
        self.cache.put(state);
        let (prompt_secs, result) =
            result.map_err(|e| LocalError::Run(format!("{}: {e}", self.path)))?;
        let (reply, finished) = result?;
        Ok(Generation {
            text: self.vocab.decode(&reply),
            prompt_tokens: prompt.len(),
            cached_tokens,
            completion_tokens: reply.len(),
            finished,
            prompt_secs,
            generate_secs: start.elapsed().as_secs_f64() - prompt_secs,
        })
    }

    /// Samples the reply's tokens after the prompt's `logits`, and whether
    /// it ended by itself.
    fn generate(
        &self,
        state: &mut State,
        logits: &mut Vec<f32>,
        prompt_len: usize,
        request: &Request,
        mut matcher: Option<&mut Matcher>,
    ) -> Result<(Vec<u32>, bool), LocalError> {
        let mut sampler = Sampler::new(request.sampling);
        let mut reply = Vec::new();
        let budget = request.max_tokens.min(self.context - prompt_len - 1);
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
                        sampler.sample(logits, |t| mask.is_allowed(t) && Some(rank(t)) == best)
                    } else {
                        sampler.sample(logits, |t| mask.is_allowed(t))
                    }
                }
                None => sampler.sample(logits, |_| true),
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
            *logits = self
                .network
                .next(state, token)
                .map_err(|e| LocalError::Run(format!("{}: {e}", self.path)))?;
        }
        Ok((reply, finished))
    }
}

/// The key-value caches of the last few conversations, least recently
/// used dropped first.
struct Conversations {
    /// Each state with the request count when it was last used.
    slots: Vec<(State, u64)>,
    capacity: usize,
    requests: u64,
}

impl Conversations {
    fn new(capacity: usize) -> Self {
        Conversations {
            slots: Vec::new(),
            capacity: capacity.max(1),
            requests: 0,
        }
    }

    /// The state to read `prompt` from: the kept conversation sharing the
    /// longest prefix with it, taken over when the prompt shares at least
    /// half of itself with it (the same module asked again), else a copy
    /// of that prefix, so the conversation stays for its own module.
    fn take(&mut self, prompt: &[u32]) -> State {
        let best = (0..self.slots.len())
            .max_by_key(|&i| (self.slots[i].0.shared(prompt), self.slots[i].1));
        let Some(i) = best else {
            return State::default();
        };
        let shared = self.slots[i].0.shared(prompt);
        if 2 * shared >= prompt.len() || self.capacity == 1 {
            self.slots.swap_remove(i).0
        } else {
            self.slots[i].0.fork(shared)
        }
    }

    /// Drops every kept conversation.
    fn clear(&mut self) {
        self.slots.clear();
    }

    /// Keeps `state`, dropping the least recently used past capacity.
    fn put(&mut self, state: State) {
        self.requests += 1;
        self.slots.push((state, self.requests));
        if self.slots.len() > self.capacity {
            let oldest = (0..self.slots.len())
                .min_by_key(|&i| self.slots[i].1)
                .expect("slots are not empty");
            self.slots.swap_remove(oldest);
        }
    }
}
