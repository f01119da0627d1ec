//! The designer through the embedded backend with a tiny random model that
//! the test writes itself (no download): its vocabulary is learned from
//! the prompt templates, its weights are noise. With constrained decoding
//! (the default) every one of 200 replies per listed module parses and
//! some validate (noise within the grammar still makes valid designs);
//! without, the share that parses is printed (near 0, as expected of
//! noise). Shares print with
//! `cargo test -p serl-llm --test local -- --nocapture`.

#![cfg(feature = "local")]

use std::path::{Path, PathBuf};

use serl_design::{extract, well_formed, Module, ModuleKind};
use serl_llm::serl_local::{write_test_model, TestModelSpec};
use serl_llm::{
    Backend, ChatRequest, Designer, LlmDesigner, LocalBackend, LocalConfig, ModuleContext, Prompts,
    TaskInfo, Template,
};

const DRAWS: usize = 200;

fn prompts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../prompts")
}

fn test_model(dir: &Path) -> PathBuf {
    let mut corpus = String::new();
    for e in std::fs::read_dir(prompts_dir()).unwrap() {
        corpus.push_str(&std::fs::read_to_string(e.unwrap().path()).unwrap());
    }
    let path = dir.join("tiny.gguf");
    let spec = TestModelSpec {
        corpus,
        merges: 1500,
        ..TestModelSpec::default()
    };
    write_test_model(&path, &spec).unwrap();
    path
}

fn backend(model: &Path) -> LocalBackend {
    LocalBackend::load(&LocalConfig {
        model: Some(model.to_path_buf()),
        threads: 1,
        ..LocalConfig::default()
    })
    .unwrap()
}

fn context(kind: ModuleKind) -> ModuleContext {
    ModuleContext::new(
        kind,
        TaskInfo::default(),
        "beat TWAP robustly across stocks",
        "keep the design simple",
    )
}

/// Every module `serl prompts list` names: its prompt rendered, a reply
/// decoded under its grammar, the reply validated. A module whose grammar
/// lets through only what its validator refuses (the plan's once did:
/// `strength` with a `remaining` curve) validates none.
#[test]
fn constrained_replies_from_a_random_model_all_parse_and_some_validate() {
    let dir = tempfile::tempdir().unwrap();
    let model = test_model(dir.path());
    let prompts = Prompts::load(&prompts_dir()).unwrap();
    let mut designer = LlmDesigner::new(prompts, Box::new(backend(&model)), 7);
    designer.constrained = true;
    let listed = Template::all().into_iter().filter_map(|t| match t {
        Template::Module(kind) => Some(kind),
        _ => None,
    });
    for kind in listed {
        let ctx = context(kind);
        let (mut valid, mut tokens) = (0, 0);
        let mut refusals = Vec::new();
        let start = std::time::Instant::now();
        for _ in 0..DRAWS {
            let reply = designer.propose(kind, &ctx).unwrap();
            assert!(
                well_formed(kind, &reply.text),
                "{kind:?}: a constrained reply does not parse:\n{}",
                reply.text
            );
            tokens += reply.completion_tokens;
            let text = extract(kind, &reply.text).unwrap();
            match Module::parse(kind, &text) {
                Ok(_) => valid += 1,
                Err(e) => refusals.push(format!("{text}: {e}")),
            }
        }
        println!(
            "constrained {kind:?}: {DRAWS}/{DRAWS} parse, {valid}/{DRAWS} validate ({tokens} tokens, {:.1} s)",
            start.elapsed().as_secs_f64()
        );
        assert!(
            valid > 0,
            "{kind:?}: no reply validates; the first refused: {:?}",
            refusals.first()
        );
    }
}

#[test]
fn unconstrained_replies_from_a_random_model_are_noise() {
    let dir = tempfile::tempdir().unwrap();
    let model = test_model(dir.path());
    let local = backend(&model);
    let prompts = Prompts::load(&prompts_dir()).unwrap();
    for kind in ModuleKind::ALL {
        let prompt = prompts
            .render(kind.name(), &context(kind).to_value())
            .unwrap();
        let mut parsed = 0;
        for seed in 0..DRAWS as u64 {
            let mut req = ChatRequest::new(prompt.clone());
            req.seed = Some(seed);
            req.max_tokens = 96;
            let r = local.chat(&req).unwrap();
            assert!(r.prompt_tokens > 0);
            parsed += usize::from(well_formed(kind, &r.content));
        }
        println!("unconstrained {kind:?}: {parsed}/{DRAWS} parse");
    }
}

#[test]
fn a_missing_model_is_named() {
    let cfg = LocalConfig {
        model: Some("/nonexistent/model.gguf".into()),
        ..LocalConfig::default()
    };
    let e = LocalBackend::load(&cfg).err().unwrap().to_string();
    assert!(e.contains("/nonexistent/model.gguf"), "{e}");
    let e = LocalBackend::load(&LocalConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("[llm.local] model"), "{e}");
}
