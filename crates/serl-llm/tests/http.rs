//! The HTTP backends against a real server on loopback: a small HTTP/1.1
//! server in a thread that answers with a script, so every failure mode a
//! real endpoint has can be played on cue.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serl_llm::{Backend, ChatRequest, Flavor, HttpBackend, HttpConfig, LlmError};

#[derive(Clone)]
enum Answer {
    Ok(String),
    Status(u16, Option<&'static str>),
    Slow(Duration, String),
    Truncated,
    /// Reads the request, then closes the connection without a word.
    Drop,
    /// Closes the connection before reading the request, which the
    /// kernel answers with a reset (RST) when the request arrives.
    Reset,
    /// Promises a body, sends half of it and closes.
    CutShort,
}

fn completion(content: &str) -> String {
    serde_json::json!({
        "choices": [{"message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5}
    })
    .to_string()
}

/// Serves `script` in order, one answer per request; records the bodies.
struct Server {
    url: String,
    bodies: Arc<Mutex<Vec<serde_json::Value>>>,
}

fn serve(script: Vec<Answer>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let seen = bodies.clone();
    std::thread::spawn(move || {
        // One thread per connection, so that a slow answer does not hold
        // up the retry behind it.
        for answer in script {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let seen = seen.clone();
            std::thread::spawn(move || handle(stream, answer, &seen));
        }
    });
    Server { url, bodies }
}

fn handle(mut stream: TcpStream, answer: Answer, seen: &Mutex<Vec<serde_json::Value>>) {
    if matches!(answer, Answer::Reset) {
        return;
    }
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    let _ = reader.read_exact(&mut body);
    if let Ok(v) = serde_json::from_slice(&body) {
        seen.lock().unwrap().push(v);
    }
    let reply = |status: u16, extra: &str, body: &str| {
        format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n{body}", body.len())
    };
    let text = match answer {
        Answer::Drop => return,
        Answer::Reset => unreachable!("handled before reading"),
        Answer::CutShort => {
            let full = completion("step_pa");
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}", full.len(), &full[..full.len() / 2])
        }
        Answer::Ok(b) => reply(200, "", &b),
        Answer::Status(code, retry) => reply(
            code,
            &retry
                .map(|r| format!("retry-after: {r}\r\n"))
                .unwrap_or_default(),
            "{\"error\":\"busy\"}",
        ),
        Answer::Slow(d, b) => {
            std::thread::sleep(d);
            reply(200, "", &b)
        }
        Answer::Truncated => {
            let full = completion("step_pa");
            let cut = &full[..full.len() / 2];
            format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{cut}", cut.len())
        }
    };
    let _ = stream.write_all(text.as_bytes());
    let _ = stream.flush();
}

fn backend(url: &str, timeout: f64) -> HttpBackend {
    HttpBackend::new(HttpConfig {
        flavor: Flavor::OpenAi,
        base_url: Some(format!("{url}/v1")),
        model: "test-model".into(),
        api_key_env: None,
        timeout_secs: timeout,
        max_retries: 2,
        backoff_ms: 20,
        concurrency: 2,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn a_completion_comes_back_with_its_token_counts_and_the_request_carries_the_settings() {
    let s = serve(vec![Answer::Ok(completion("step_pa - remaining_inv"))]);
    let mut req = ChatRequest::new("design a reward");
    req.seed = Some(42);
    req.json = true;
    let r = backend(&s.url, 5.0).chat(&req).unwrap();
    assert_eq!(r.content, "step_pa - remaining_inv");
    assert_eq!((r.prompt_tokens, r.completion_tokens), (12, 5));
    let body = &s.bodies.lock().unwrap()[0];
    assert_eq!(body["model"], "test-model");
    assert_eq!(body["seed"], 42);
    assert_eq!(body["response_format"]["type"], "json_object");
    assert_eq!(body["messages"][0]["content"], "design a reward");
}

#[test]
fn a_429_is_retried_after_the_servers_retry_after() {
    let s = serve(vec![
        Answer::Status(429, Some("1")),
        Answer::Ok(completion("ok")),
    ]);
    let t = Instant::now();
    let r = backend(&s.url, 5.0).chat(&ChatRequest::new("x")).unwrap();
    assert_eq!(r.content, "ok");
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "waited {:?}",
        t.elapsed()
    );
}

#[test]
fn server_errors_are_retried_then_reported() {
    let s = serve(vec![
        Answer::Status(500, None),
        Answer::Ok(completion("ok")),
    ]);
    assert_eq!(
        backend(&s.url, 5.0)
            .chat(&ChatRequest::new("x"))
            .unwrap()
            .content,
        "ok"
    );
    let s = serve(vec![Answer::Status(503, None); 3]);
    let e = backend(&s.url, 5.0)
        .chat(&ChatRequest::new("x"))
        .unwrap_err();
    assert!(matches!(e, LlmError::GaveUp { attempts: 3, .. }), "{e}");
    assert!(e.to_string().contains("HTTP 503"), "{e}");
}

#[test]
fn a_client_error_is_not_retried() {
    let s = serve(vec![Answer::Status(401, None)]);
    let e = backend(&s.url, 5.0)
        .chat(&ChatRequest::new("x"))
        .unwrap_err();
    assert!(matches!(e, LlmError::Status { status: 401, .. }), "{e}");
}

#[test]
fn a_slow_server_times_out_and_the_retry_succeeds() {
    let s = serve(vec![
        Answer::Slow(Duration::from_millis(1500), completion("late")),
        Answer::Ok(completion("ok")),
    ]);
    let t = Instant::now();
    let r = backend(&s.url, 0.5).chat(&ChatRequest::new("x")).unwrap();
    assert_eq!(r.content, "ok");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn truncated_json_is_a_clear_error() {
    let s = serve(vec![Answer::Truncated]);
    let e = backend(&s.url, 5.0)
        .chat(&ChatRequest::new("x"))
        .unwrap_err();
    assert!(matches!(e, LlmError::BadReply { .. }), "{e}");
    assert!(e.to_string().contains("not a chat completion"), "{e}");
}

#[test]
fn a_refused_connection_names_the_url() {
    // Bind and drop: the port is then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let t = Instant::now();
    let e = backend(&url, 2.0).chat(&ChatRequest::new("x")).unwrap_err();
    assert!(matches!(e, LlmError::Connect { .. }), "{e}");
    assert!(
        e.to_string().contains(&url) && e.to_string().contains("is the server running"),
        "{e}"
    );
    assert!(t.elapsed() < Duration::from_secs(3));
}

#[test]
fn ollama_native_chat_is_spoken_too() {
    let body = serde_json::json!({"message": {"role": "assistant", "content": "{}"}, "prompt_eval_count": 7, "eval_count": 2}).to_string();
    let s = serve(vec![Answer::Ok(body)]);
    let b = HttpBackend::new(HttpConfig {
        flavor: Flavor::Ollama,
        base_url: Some(s.url.clone()),
        model: "llama3".into(),
        api_key_env: None,
        ..Default::default()
    })
    .unwrap();
    let mut req = ChatRequest::new("x");
    req.json = true;
    let r = b.chat(&req).unwrap();
    assert_eq!((r.content.as_str(), r.prompt_tokens), ("{}", 7));
    let sent = &s.bodies.lock().unwrap()[0];
    assert_eq!(sent["stream"], false);
    assert_eq!(sent["format"], "json");
}

#[test]
fn a_connection_closed_reset_or_cut_short_is_retried_like_a_5xx() {
    for failure in [Answer::Drop, Answer::Reset, Answer::CutShort] {
        let s = serve(vec![failure, Answer::Ok(completion("step_pa"))]);
        let r = backend(&s.url, 5.0).chat(&ChatRequest::new("x")).unwrap();
        assert_eq!(r.content, "step_pa");
    }
}

#[test]
fn a_server_that_keeps_closing_the_connection_is_an_error_naming_it_after_the_retries() {
    let s = serve(vec![Answer::Drop, Answer::Reset, Answer::Drop]);
    let e = backend(&s.url, 5.0)
        .chat(&ChatRequest::new("x"))
        .unwrap_err();
    assert!(matches!(e, LlmError::GaveUp { attempts: 3, .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&s.url) && msg.contains("connection lost"),
        "{msg}"
    );
}

#[test]
fn ollama_defaults_to_its_own_port() {
    let ollama = HttpConfig {
        flavor: Flavor::Ollama,
        ..Default::default()
    };
    assert_eq!(ollama.base_url(), "http://localhost:11434");
    assert_eq!(HttpConfig::default().base_url(), "http://localhost:8080/v1");
    let set = HttpConfig {
        flavor: Flavor::Ollama,
        base_url: Some("http://gpu-box:11434".into()),
        ..Default::default()
    };
    assert_eq!(set.base_url(), "http://gpu-box:11434");
}

#[test]
fn a_schema_is_sent_as_response_format_and_as_ollamas_format() {
    let schema = serl_llm::Schema {
        name: "reward".into(),
        schema: serde_json::json!({"type": "object", "properties": {"program": {"type": "string"}}}),
    };
    let s = serve(vec![Answer::Ok(completion("{\"program\": \"step_pa\"}"))]);
    let mut req = ChatRequest::new("x");
    req.schema = Some(schema.clone());
    backend(&s.url, 5.0).chat(&req).unwrap();
    let sent = &s.bodies.lock().unwrap()[0];
    assert_eq!(sent["response_format"]["type"], "json_schema");
    assert_eq!(sent["response_format"]["json_schema"]["name"], "reward");
    assert_eq!(
        sent["response_format"]["json_schema"]["schema"],
        schema.schema
    );

    let body = serde_json::json!({"message": {"role": "assistant", "content": "{}"}}).to_string();
    let s = serve(vec![Answer::Ok(body)]);
    let b = HttpBackend::new(HttpConfig {
        flavor: Flavor::Ollama,
        base_url: Some(s.url.clone()),
        api_key_env: None,
        ..Default::default()
    })
    .unwrap();
    b.chat(&req).unwrap();
    assert_eq!(s.bodies.lock().unwrap()[0]["format"], schema.schema);

    // llama-cpp-python's server takes the schema inside `json_object`.
    let s = serve(vec![Answer::Ok(completion("{\"program\": \"step_pa\"}"))]);
    let b = HttpBackend::new(HttpConfig {
        base_url: Some(format!("{}/v1", s.url)),
        api_key_env: None,
        schema_format: serl_llm::SchemaFormat::JsonObject,
        ..Default::default()
    })
    .unwrap();
    b.chat(&req).unwrap();
    let sent = &s.bodies.lock().unwrap()[0];
    assert_eq!(sent["response_format"]["type"], "json_object");
    assert_eq!(sent["response_format"]["schema"], schema.schema);
}

/// With `[llm] gbnf = true`, every module request carries the module's
/// GBNF reply grammar in `grammar` and no `response_format` (llama.cpp
/// refuses both at once; llama-cpp-python lets a response format win),
/// and the prompt asks for the JSON the grammar describes.
#[test]
fn with_gbnf_every_module_request_carries_its_grammar_and_no_schema() {
    use serl_design::ModuleKind;
    use serl_llm::{Designer, LlmDesigner, ModuleContext, Prompts, TaskInfo};

    let replies = [
        r#"{"program": "step_pa"}"#,
        r#"{"features": [{"name": "m5", "program": "mean(ret_1, 5)"}]}"#,
        r#"{"blocks": [{"kind": "dense", "width": 8}]}"#,
        r#"{"scenarios": [{"volatility_mult": 1, "drift_bps": 0, "liquidity_mult": 1}]}"#,
        r#"{"market": {}}"#,
        r#"{"broadcast": [{"name": "left", "program": "inventory_left"}], "aggregate": "mean"}"#,
        r#"{"shape": "u_shaped", "strength": 0.5}"#,
    ];
    let s = serve(replies.iter().map(|r| Answer::Ok(completion(r))).collect());
    let prompts =
        Prompts::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompts"))
            .unwrap();
    let mut designer = LlmDesigner::new(prompts, Box::new(backend(&s.url, 5.0)), 0);
    designer.constrained = true;
    designer.gbnf = true;
    for kind in ModuleKind::ALL {
        let ctx = ModuleContext::new(kind, TaskInfo::default(), "beat TWAP", "keep it simple");
        designer.propose(kind, &ctx).unwrap();
    }
    let bodies = s.bodies.lock().unwrap();
    assert_eq!(bodies.len(), ModuleKind::ALL.len());
    for (kind, body) in ModuleKind::ALL.iter().zip(bodies.iter()) {
        assert_eq!(
            body["grammar"].as_str(),
            Some(serl_design::module_gbnf(*kind).as_str()),
            "{kind:?}"
        );
        assert!(body.get("response_format").is_none(), "{kind:?}: {body}");
        let prompt = body["messages"][0]["content"].as_str().unwrap_or_default();
        if *kind == ModuleKind::Reward {
            assert!(prompt.contains(r#"{"program": "#), "{prompt}");
        }
    }
}
