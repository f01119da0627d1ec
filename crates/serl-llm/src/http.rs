//! HTTP backends: OpenAI-compatible chat completions (OpenAI, vLLM,
//! llama.cpp server, LM Studio, Ollama's `/v1`) and Ollama's native
//! `/api/chat`, with timeouts, retries with exponential backoff and jitter
//! on every transient failure (429, 5xx, timeouts, and connections refused,
//! reset or closed without an answer), and a concurrency limit.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::backend::{Backend, ChatRequest, ChatResponse, LlmError};

/// Which wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavor {
    /// `POST {base_url}/chat/completions`.
    OpenAi,
    /// `POST {base_url}/api/chat`.
    Ollama,
}

/// How to reach a chat server (`[llm]` in configs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// The wire format.
    pub flavor: Flavor,
    /// e.g. `https://api.openai.com/v1`, `http://localhost:8080/v1`,
    /// `http://localhost:11434` (Ollama native); unset, the flavor's usual
    /// local address ([`HttpConfig::base_url`]).
    pub base_url: Option<String>,
    /// The model name sent with each request.
    pub model: String,
    /// The environment variable holding the API key (never the key itself).
    pub api_key_env: Option<String>,
    /// Per-request timeout, seconds.
    pub timeout_secs: f64,
    /// Retries after the first attempt, on timeouts, connection errors,
    /// 429 and 5xx.
    pub max_retries: u32,
    /// First backoff; doubled each retry, with ±50% jitter.
    pub backoff_ms: u64,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// How the OpenAI wire format carries a module's schema:
    /// `json_schema` (OpenAI structured outputs, vLLM, llama.cpp's
    /// `llama-server`, LM Studio) or `json_object` (`{"type":
    /// "json_object", "schema": ...}`: llama-cpp-python's server, Anyscale,
    /// Together).
    pub schema_format: SchemaFormat,
}

/// See [`HttpConfig::schema_format`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaFormat {
    /// `{"type": "json_schema", "json_schema": {"name", "schema"}}`.
    #[default]
    JsonSchema,
    /// `{"type": "json_object", "schema": ...}`.
    JsonObject,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            flavor: Flavor::OpenAi,
            base_url: None,
            model: "default".into(),
            api_key_env: Some("OPENAI_API_KEY".into()),
            timeout_secs: 120.0,
            max_retries: 4,
            backoff_ms: 1000,
            concurrency: 4,
            schema_format: SchemaFormat::JsonSchema,
        }
    }
}

impl HttpConfig {
    /// The endpoint: `base_url` as configured, or else the flavor's usual
    /// local server: llama.cpp's `http://localhost:8080/v1` for OpenAI's
    /// wire format, Ollama's own `http://localhost:11434`.
    pub fn base_url(&self) -> &str {
        self.base_url.as_deref().unwrap_or(match self.flavor {
            Flavor::OpenAi => "http://localhost:8080/v1",
            Flavor::Ollama => "http://localhost:11434",
        })
    }
}

/// A chat model behind HTTP ([`HttpConfig`]); blocking calls over its own
/// single-threaded runtime, with at most `concurrency` requests in flight.
pub struct HttpBackend {
    cfg: HttpConfig,
    key: Option<String>,
    client: reqwest::Client,
    rt: tokio::runtime::Runtime,
    permits: Arc<tokio::sync::Semaphore>,
}

impl HttpBackend {
    /// Builds the client. The API key is read from `api_key_env` now; a
    /// missing key is an error only for an `https://` endpoint.
    pub fn new(cfg: HttpConfig) -> Result<Self, LlmError> {
        let key = match &cfg.api_key_env {
            // A local server needs no key; a missing variable is only an
            // error for a remote https endpoint.
            Some(var) => match std::env::var(var) {
                Ok(k) if !k.is_empty() => Some(k),
                _ if cfg.base_url().starts_with("https://") => {
                    return Err(LlmError::MissingKey(var.clone()))
                }
                _ => None,
            },
            None => None,
        };
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs_f64(cfg.timeout_secs.max(0.001)))
            .build()
            .map_err(|e| LlmError::Connect {
                url: cfg.base_url().to_string(),
                message: e.to_string(),
            })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| LlmError::Connect {
                url: cfg.base_url().to_string(),
                message: e.to_string(),
            })?;
        let permits = Arc::new(tokio::sync::Semaphore::new(cfg.concurrency.max(1)));
        Ok(HttpBackend {
            cfg,
            key,
            client,
            rt,
            permits,
        })
    }

    fn url(&self) -> String {
        let base = self.cfg.base_url().trim_end_matches('/');
        match self.cfg.flavor {
            Flavor::OpenAi => format!("{base}/chat/completions"),
            Flavor::Ollama => format!("{base}/api/chat"),
        }
    }

    fn body(&self, req: &ChatRequest) -> Value {
        match self.cfg.flavor {
            Flavor::OpenAi => {
                let mut b = json!({
                    "model": self.cfg.model,
                    "messages": req.messages,
                    "temperature": req.temperature,
                    "max_tokens": req.max_tokens,
                });
                if let Some(s) = req.seed {
                    b["seed"] = json!(s);
                }
                if let Some(s) = &req.schema {
                    // Not `strict`: OpenAI's strict mode wants every field
                    // required and refuses `pattern`/`prefixItems`, while
                    // the modules have defaulted fields; vLLM and
                    // llama.cpp enforce the schema either way.
                    b["response_format"] = match self.cfg.schema_format {
                        SchemaFormat::JsonSchema => json!({
                            "type": "json_schema",
                            "json_schema": {"name": s.name, "strict": false, "schema": s.schema},
                        }),
                        SchemaFormat::JsonObject => {
                            json!({"type": "json_object", "schema": s.schema})
                        }
                    };
                } else if req.json && req.grammar.is_none() {
                    // (With a grammar, a JSON response format would replace
                    // it in llama-cpp-python's server.)
                    b["response_format"] = json!({"type": "json_object"});
                }
                if let Some(g) = &req.grammar {
                    b["grammar"] = json!(g);
                }
                b
            }
            Flavor::Ollama => {
                let mut options =
                    json!({"temperature": req.temperature, "num_predict": req.max_tokens});
                if let Some(s) = req.seed {
                    options["seed"] = json!(s);
                }
                let mut b = json!({"model": self.cfg.model, "messages": req.messages, "stream": false, "options": options});
                if let Some(s) = &req.schema {
                    b["format"] = s.schema.clone();
                } else if req.json {
                    b["format"] = json!("json");
                }
                b
            }
        }
    }

    fn parse(&self, url: &str, v: &Value) -> Result<ChatResponse, LlmError> {
        let bad = |m: &str| LlmError::BadReply {
            url: url.to_string(),
            message: m.to_string(),
        };
        match self.cfg.flavor {
            Flavor::OpenAi => Ok(ChatResponse {
                content: v["choices"][0]["message"]["content"]
                    .as_str()
                    .ok_or_else(|| bad("no choices[0].message.content"))?
                    .to_string(),
                prompt_tokens: v["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
                completion_tokens: v["usage"]["completion_tokens"].as_u64().unwrap_or(0),
            }),
            Flavor::Ollama => Ok(ChatResponse {
                content: v["message"]["content"]
                    .as_str()
                    .ok_or_else(|| bad("no message.content"))?
                    .to_string(),
                prompt_tokens: v["prompt_eval_count"].as_u64().unwrap_or(0),
                completion_tokens: v["eval_count"].as_u64().unwrap_or(0),
            }),
        }
    }

    fn backoff(&self, attempt: u32, seed: u64) -> Duration {
        // Doubling, but never more than a minute between attempts.
        let base = (self.cfg.backoff_ms as f64 * 2f64.powi(attempt.min(30) as i32)).min(60_000.0);
        // Deterministic jitter in [0.5, 1.5): spreads clients without a
        // shared random source.
        let mut x = seed ^ (attempt as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        let jitter = 0.5 + (x % 1000) as f64 / 1000.0;
        Duration::from_millis((base * jitter) as u64)
    }
}

/// What one attempt came to.
enum Attempt {
    /// A chat completion.
    Done(ChatResponse),
    /// A transient failure (429, 5xx, a timeout, a connection refused,
    /// reset or closed without an answer, a body cut short): `why`, and
    /// how long to wait before the next attempt.
    Retry { why: String, wait: Duration },
    /// A failure that retrying does not fix.
    Fatal(LlmError),
}

impl HttpBackend {
    /// One POST of `body` to `url`, classified.
    async fn attempt(&self, url: &str, body: &Value, attempt: u32, seed: u64) -> Attempt {
        let mut rb = self.client.post(url).json(body);
        if let Some(k) = &self.key {
            rb = rb.bearer_auth(k);
        }
        let resp = match rb.send().await {
            Ok(resp) => resp,
            Err(e) => return self.transport_error(url, e, attempt, seed),
        };
        let status = resp.status();
        if status.is_success() {
            return match resp.text().await {
                Ok(text) => match self.completion(url, &text) {
                    Ok(r) => Attempt::Done(r),
                    Err(e) => Attempt::Fatal(e),
                },
                Err(e) => self.transport_error(url, e, attempt, seed),
            };
        }
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite());
        let code = status.as_u16();
        let text = resp.text().await.unwrap_or_default();
        if code != 429 && !status.is_server_error() {
            return Attempt::Fatal(LlmError::Status {
                url: url.to_string(),
                status: code,
                body: text.chars().take(500).collect(),
            });
        }
        let wait = match retry_after {
            Some(s) if code == 429 || code == 503 => Duration::from_secs_f64(s.clamp(0.0, 300.0)),
            _ => self.backoff(attempt, seed),
        };
        Attempt::Retry {
            why: format!(
                "HTTP {code}: {}",
                text.chars().take(200).collect::<String>()
            ),
            wait,
        }
    }

    /// A request that failed on the wire. Timeouts and every transport
    /// failure (refused, reset, closed before the answer, a body cut short)
    /// are transient; only a request the client cannot even build is not.
    fn transport_error(&self, url: &str, e: reqwest::Error, attempt: u32, seed: u64) -> Attempt {
        let why = if e.is_timeout() {
            format!("no response within {} s", self.cfg.timeout_secs)
        } else if e.is_builder() {
            return Attempt::Fatal(LlmError::Connect {
                url: url.to_string(),
                message: e.to_string(),
            });
        } else if e.is_connect() {
            format!("cannot connect: {}", error_chain(&e))
        } else {
            // Reset, closed before the answer, or a body cut short.
            format!("connection lost: {}", error_chain(&e))
        };
        Attempt::Retry {
            why,
            wait: self.backoff(attempt, seed),
        }
    }

    /// The chat completion in a successful response's body.
    fn completion(&self, url: &str, text: &str) -> Result<ChatResponse, LlmError> {
        let v: Value = serde_json::from_str(text).map_err(|e| LlmError::BadReply {
            url: url.to_string(),
            message: format!(
                "invalid JSON ({e}): {}",
                text.chars().take(200).collect::<String>()
            ),
        })?;
        self.parse(url, &v)
    }
}

/// An error and its causes, `: `-separated (reqwest's own message leaves
/// out why the connection failed).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

impl Backend for HttpBackend {
    fn name(&self) -> String {
        format!(
            "{:?} {} at {}",
            self.cfg.flavor,
            self.cfg.model,
            self.cfg.base_url()
        )
        .to_lowercase()
    }

    /// Sends the request, retrying transient failures with backoff up to
    /// `max_retries` times; the error after the last names the endpoint
    /// and the last failure.
    fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let url = self.url();
        let body = self.body(req);
        let seed = u64::from_str_radix(&req.key(), 16).unwrap_or(0);
        self.rt.block_on(async {
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|e| LlmError::Connect {
                    url: url.clone(),
                    message: e.to_string(),
                })?;
            let mut last = String::new();
            for attempt in 0..=self.cfg.max_retries {
                match self.attempt(&url, &body, attempt, seed).await {
                    Attempt::Done(r) => return Ok(r),
                    Attempt::Fatal(e) => return Err(e),
                    Attempt::Retry { why, wait } => {
                        if attempt < self.cfg.max_retries {
                            tracing::warn!("{url}: {why}; retrying in {:.2} s", wait.as_secs_f64());
                            tokio::time::sleep(wait).await;
                        }
                        last = why;
                    }
                }
            }
            Err(gave_up(
                url,
                self.cfg.max_retries + 1,
                last,
                self.cfg.timeout_secs,
            ))
        })
    }
}

/// The error after the last attempt: a timeout or an unreachable server
/// by name, anything else as the retries running out.
fn gave_up(url: String, attempts: u32, last: String, secs: f64) -> LlmError {
    if last.starts_with("no response") {
        LlmError::Timeout { url, secs }
    } else if let Some(message) = last.strip_prefix("cannot connect: ") {
        LlmError::Connect {
            url,
            message: format!("{message}; {attempts} attempts"),
        }
    } else {
        LlmError::GaveUp {
            url,
            attempts,
            last,
        }
    }
}
