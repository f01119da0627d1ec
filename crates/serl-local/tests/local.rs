//! The embedded backend on a tiny model written by the test itself:
//! loading, the chat template, seeded sampling, grammar masks, and the
//! errors for files it cannot run.

use std::path::{Path, PathBuf};

use serl_local::{
    write_test_model, ChatMessage, Constraint, LocalError, LocalModel, LocalOptions, Request,
    Sampling, TestModelSpec,
};

fn model_file(dir: &Path, spec: TestModelSpec) -> PathBuf {
    let path = dir.join("tiny.gguf");
    write_test_model(&path, &spec).unwrap();
    path
}

fn load(path: &Path) -> Result<LocalModel, LocalError> {
    LocalModel::load(
        path,
        LocalOptions {
            threads: 1,
            ..LocalOptions::default()
        },
    )
}

fn ask(model: &mut LocalModel, seed: u64, constraint: Option<&Constraint>) -> String {
    let messages = [ChatMessage {
        role: "user".into(),
        content: "Write a reward for an execution agent.".into(),
    }];
    let g = model
        .chat(&Request {
            messages: &messages,
            max_tokens: 200,
            sampling: Sampling {
                temperature: 1.0,
                top_p: 1.0,
                seed,
            },
            constraint,
            steer_after: 150,
        })
        .unwrap();
    assert!(g.prompt_tokens > 0);
    g.text
}

#[test]
fn a_tiny_model_loads_renders_its_template_and_samples_reproducibly() {
    let dir = tempfile::tempdir().unwrap();
    let spec = TestModelSpec {
        corpus: "Write a reward for an execution agent. ".repeat(4),
        merges: 20,
        ..TestModelSpec::default()
    };
    let mut model = load(&model_file(dir.path(), spec)).unwrap();
    assert_eq!(model.context_length(), 4096);
    let a = ask(&mut model, 1, None);
    assert_eq!(a, ask(&mut model, 1, None), "same seed, same reply");
    assert_ne!(a, ask(&mut model, 2, None), "another seed, another reply");
}

/// Conversations are kept one per prompt: asking A, B, then A again reads
/// A's prompt from A's cache (all of it but the last token), and B's from
/// what it shares with A; with one slot, B's conversation replaced A's.
/// Replies do not depend on what was kept.
#[test]
fn each_conversation_keeps_its_cache_and_replies_do_not_depend_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let spec = TestModelSpec {
        corpus: "Write a reward for an execution agent. Design the state features. ".repeat(4),
        merges: 40,
        ..TestModelSpec::default()
    };
    let path = model_file(dir.path(), spec);
    let chat = |model: &mut LocalModel, text: &str| {
        let messages = [ChatMessage {
            role: "user".into(),
            content: text.into(),
        }];
        model
            .chat(&Request {
                messages: &messages,
                max_tokens: 20,
                sampling: Sampling {
                    temperature: 1.0,
                    top_p: 1.0,
                    seed: 3,
                },
                constraint: None,
                steer_after: usize::MAX,
            })
            .unwrap()
    };
    let (a, b) = (
        "Write a reward for an execution agent.",
        "Design the state features.",
    );
    let mut kept = load(&path).unwrap();
    let first = chat(&mut kept, a);
    assert_eq!(first.cached_tokens, 0);
    let other = chat(&mut kept, b);
    assert!(other.cached_tokens > 0, "the template's opening is shared");
    assert!(other.cached_tokens < other.prompt_tokens / 2);
    let again = chat(&mut kept, a);
    assert_eq!(again.cached_tokens, again.prompt_tokens - 1);
    assert_eq!(again.text, first.text);

    let mut one = LocalModel::load(
        &path,
        LocalOptions {
            threads: 1,
            cache_slots: 1,
            ..LocalOptions::default()
        },
    )
    .unwrap();
    chat(&mut one, a);
    chat(&mut one, b);
    let again_one = chat(&mut one, a);
    assert_eq!(again_one.cached_tokens, other.cached_tokens);
    assert_eq!(again_one.text, first.text);
}

#[test]
fn with_a_grammar_every_reply_is_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = load(&model_file(dir.path(), TestModelSpec::default())).unwrap();
    let lark = Constraint::Lark(r#"start: "x = " /[0-9]{1,3}/ (" + " /[a-z]{1,4}/){0,2}"#.into());
    let re = regex_lite(r"x = [0-9]{1,3}( \+ [a-z]{1,4}){0,2}");
    let schema = Constraint::JsonSchema(serde_json::json!({
        "type": "object",
        "properties": {"width": {"type": "integer", "minimum": 1, "maximum": 512},
                       "kind": {"enum": ["dense", "gru"]}},
        "required": ["width", "kind"],
        "additionalProperties": false
    }));
    for seed in 0..20 {
        let text = ask(&mut model, seed, Some(&lark));
        assert!(re(&text), "{text:?} is outside the grammar");
        let json: serde_json::Value =
            serde_json::from_str(&ask(&mut model, seed, Some(&schema))).expect("the reply is JSON");
        let w = json["width"].as_i64().unwrap();
        assert!((1..=512).contains(&w));
        assert!(["dense", "gru"].contains(&json["kind"].as_str().unwrap()));
    }
    let broken = Constraint::Lark("start: (".into());
    assert!(matches!(
        model.check(&broken),
        Err(LocalError::Constraint(_))
    ));
}

/// A matcher for the tiny regex above, without a regex dependency.
fn regex_lite(_: &str) -> impl Fn(&str) -> bool {
    |s: &str| {
        let Some(rest) = s.strip_prefix("x = ") else {
            return false;
        };
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if !(1..=3).contains(&digits) {
            return false;
        }
        let mut terms = 0;
        let mut rest = &rest[digits..];
        while let Some(r) = rest.strip_prefix(" + ") {
            let letters = r.chars().take_while(char::is_ascii_lowercase).count();
            if !(1..=4).contains(&letters) {
                return false;
            }
            rest = &r[letters..];
            terms += 1;
        }
        rest.is_empty() && terms <= 2
    }
}

#[test]
fn files_it_cannot_run_are_named_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let err = |p: &Path| load(p).err().expect("must fail").to_string();

    let missing = dir.path().join("absent.gguf");
    let e = err(&missing);
    assert!(
        e.contains("absent.gguf") && e.contains("cannot read"),
        "{e}"
    );

    let junk = dir.path().join("junk.gguf");
    std::fs::write(&junk, b"this is not a model").unwrap();
    let e = err(&junk);
    assert!(e.contains("junk.gguf") && e.contains("not a GGUF"), "{e}");

    let good = model_file(dir.path(), TestModelSpec::default());
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path().join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() - 1000]).unwrap();
    let e = err(&cut);
    assert!(e.contains("cut.gguf") && e.contains("truncated"), "{e}");

    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let mamba = model_file(
        &other,
        TestModelSpec {
            architecture: "mamba".into(),
            ..TestModelSpec::default()
        },
    );
    let e = err(&mamba);
    assert!(e.contains("unsupported") && e.contains("`mamba`"), "{e}");
    // The message lists what runs.
    for arch in serl_local::ARCHITECTURES {
        assert!(e.contains(arch), "{e}");
    }
}
