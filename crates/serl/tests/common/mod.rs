//! Running the `serl` binary from the repository root, as a user does.

#[allow(dead_code)] // for the tests on a Slurm cluster
pub mod slurm;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join("../..")
}

/// The bundled session the simulation tests play: SPY on 2013-10-08.
#[allow(dead_code)] // not every test binary simulates it
pub const BUNDLED_DAY: [&str; 6] = [
    "--data",
    "data/lean",
    "--symbol",
    "SPY",
    "--date",
    "2013-10-08",
];

pub fn serl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_serl"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("the serl binary runs")
}

/// stdout and stderr together, for assertions and failure messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A JSON file the run wrote.
#[allow(dead_code)] // not every test file reads one
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `serl backtest` of `strategies` on the bundled sample's `split` into
/// `out`, with `extra` flags.
#[allow(dead_code)] // for the backtest tests
pub fn backtest_lean(split: &str, strategies: &[&str], out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["backtest", "--data", "data/lean", "--split", split];
    for s in strategies {
        args.extend(["--strategy", *s]);
    }
    args.extend_from_slice(extra);
    args.extend(["--out", out.to_str().unwrap()]);
    serl(&args)
}

/// `serl evolve --config cfg --out run`, asserted to succeed.
#[allow(dead_code)] // for the evolve tests
pub fn evolve_ok(cfg: &Path, run: &Path) -> Output {
    let o = serl(&[
        "evolve",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    o
}

/// The shipped evolve config `shipped` with tiny budgets (2 iterations of
/// 2 candidates, 512-step trainings) and `extra` appended, in `dir`.
#[allow(dead_code)] // for the evolve tests
pub fn tiny_config_from(dir: &Path, shipped: &str, extra: &str) -> PathBuf {
    let base = shipped_config(shipped);
    let cfg = base
        .replace("iterations = 3", "iterations = 2")
        .replace("candidates = 3", "candidates = 2")
        .replace("final_steps = 8192", "final_steps = 512")
        .replace("total_steps = 2048", "total_steps = 512")
        .replace("validation_orders = 200", "validation_orders = 16")
        .replace(
            "dynamic_validation_orders = 8",
            "dynamic_validation_orders = 2",
        )
        .replace("lambda = 2", "lambda = 1")
        + extra;
    let p = dir.join("evolve.toml");
    std::fs::write(&p, cfg).unwrap();
    p
}

/// A shipped config's text, its relative paths (taken from `configs/`)
/// made absolute, so that it can be written anywhere.
#[allow(dead_code)] // not every test binary copies a config
pub fn shipped_config(shipped: &str) -> String {
    let text = std::fs::read_to_string(repo().join(shipped)).unwrap();
    let dir = repo().join(shipped);
    let dir = dir.parent().unwrap().to_str().unwrap();
    text.replace("\"../", &format!("\"{dir}/../"))
}

/// The JSON body of one HTTP request read from `stream` (null when it is
/// cut short): what a loopback chat server answers.
#[allow(dead_code)] // for the tests that serve a chat model
pub fn read_request(stream: &std::net::TcpStream) -> serde_json::Value {
    use std::io::{BufRead, BufReader, Read};
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut len = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    let _ = reader.read_exact(&mut body);
    serde_json::from_slice(&body).unwrap_or_default()
}

/// Answers an OpenAI-style chat completion whose reply is `content`.
#[allow(dead_code)] // for the tests that serve a chat model
pub fn answer_completion(stream: &mut std::net::TcpStream, content: &str, prompt_tokens: usize) {
    use std::io::Write;
    let reply = serde_json::json!({"choices": [{"message": {"role": "assistant", "content": content}}], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 20}}).to_string();
    let _ = write!(stream, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}", reply.len());
}
