//! HTTP backends: OpenAI-compatible chat completions (OpenAI, vLLM,
//! llama.cpp server, LM Studio, Ollama's `/v1`) and Ollama's native
//! `/api/chat`, with timeouts, retries with exponential backoff and jitter
//! on 429, 5xx and timeouts, and a concurrency limit.

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
    /// `http://localhost:11434` (Ollama native).
    pub base_url: String,
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
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            flavor: Flavor::OpenAi,
            base_url: "http://localhost:8080/v1".into(),
            model: "default".into(),
            api_key_env: Some("OPENAI_API_KEY".into()),
            timeout_secs: 120.0,
            max_retries: 4,
            backoff_ms: 1000,
            concurrency: 4,
        }
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
                _ if cfg.base_url.starts_with("https://") => {
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
                url: cfg.base_url.clone(),
                message: e.to_string(),
            })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| LlmError::Connect {
                url: cfg.base_url.clone(),
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
        let base = self.cfg.base_url.trim_end_matches('/');
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
                if req.json {
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
                if req.json {
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
        let base = self.cfg.backoff_ms as f64 * 2f64.powi(attempt as i32);
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

impl Backend for HttpBackend {
    fn name(&self) -> String {
        format!(
            "{:?} {} at {}",
            self.cfg.flavor, self.cfg.model, self.cfg.base_url
        )
        .to_lowercase()
    }

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
                let mut rb = self.client.post(&url).json(&body);
                if let Some(k) = &self.key {
                    rb = rb.bearer_auth(k);
                }
                let wait = match rb.send().await {
                    Ok(resp) => {
                        let status = resp.status();
                        let retry_after = resp
                            .headers()
                            .get(reqwest::header::RETRY_AFTER)
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.trim().parse::<f64>().ok());
                        if status.is_success() {
                            let text = match resp.text().await {
                                Ok(t) => t,
                                Err(e) if e.is_timeout() => {
                                    last = format!(
                                        "timed out reading the body after {} s",
                                        self.cfg.timeout_secs
                                    );
                                    tokio::time::sleep(self.backoff(attempt, seed)).await;
                                    continue;
                                }
                                Err(e) => {
                                    return Err(LlmError::BadReply {
                                        url,
                                        message: e.to_string(),
                                    })
                                }
                            };
                            let v: Value =
                                serde_json::from_str(&text).map_err(|e| LlmError::BadReply {
                                    url: url.clone(),
                                    message: format!(
                                        "invalid JSON ({e}): {}",
                                        text.chars().take(200).collect::<String>()
                                    ),
                                })?;
                            return self.parse(&url, &v);
                        }
                        let code = status.as_u16();
                        let text = resp.text().await.unwrap_or_default();
                        last = format!(
                            "HTTP {code}: {}",
                            text.chars().take(200).collect::<String>()
                        );
                        if code == 429 || status.is_server_error() {
                            match retry_after {
                                Some(s) if code == 429 => {
                                    Duration::from_secs_f64(s.clamp(0.0, 300.0))
                                }
                                _ => self.backoff(attempt, seed),
                            }
                        } else {
                            return Err(LlmError::Status {
                                url,
                                status: code,
                                body: text.chars().take(500).collect(),
                            });
                        }
                    }
                    Err(e) if e.is_timeout() => {
                        last = format!("no response within {} s", self.cfg.timeout_secs);
                        self.backoff(attempt, seed)
                    }
                    Err(e) if e.is_connect() => {
                        last = format!("cannot connect: {e}");
                        if attempt == self.cfg.max_retries {
                            return Err(LlmError::Connect {
                                url,
                                message: e.to_string(),
                            });
                        }
                        self.backoff(attempt, seed)
                    }
                    Err(e) => {
                        return Err(LlmError::Connect {
                            url,
                            message: e.to_string(),
                        })
                    }
                };
                if attempt < self.cfg.max_retries {
                    tracing::warn!("{url}: {last}; retrying in {:.2} s", wait.as_secs_f64());
                    tokio::time::sleep(wait).await;
                }
            }
            if last.starts_with("no response") {
                return Err(LlmError::Timeout {
                    url,
                    secs: self.cfg.timeout_secs,
                });
            }
            Err(LlmError::GaveUp {
                url,
                attempts: self.cfg.max_retries + 1,
                last,
            })
        })
    }
}
