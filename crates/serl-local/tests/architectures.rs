//! Every architecture the backend runs, on a tiny random model written by
//! the test (its own metadata keys and tensor names, the tokenizer its
//! real models have): `LocalModel`'s logits against candle-transformers'
//! model built directly from the same file, and a reply constrained by a
//! Lark grammar that stays inside it.

mod common;

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::models::{
    quantized_llama, quantized_phi3, quantized_qwen2, quantized_qwen3,
};
use serl_local::{
    write_test_model, ChatMessage, Constraint, LocalModel, LocalOptions, Request, Sampling,
    TestModelSpec, ARCHITECTURES,
};

const CORPUS: &str = "Write a reward for an execution agent. x = 12 + ab ";

fn spec(arch: &str) -> TestModelSpec {
    TestModelSpec {
        corpus: CORPUS.repeat(4),
        merges: 30,
        layers: 2,
        embedding: 64,
        sliding_window: 8,
        ..TestModelSpec::for_architecture(arch)
    }
}

fn model_file(dir: &Path, arch: &str) -> PathBuf {
    let path = dir.join(format!("{arch}.gguf"));
    write_test_model(&path, &spec(arch)).unwrap();
    path
}

fn load(path: &Path) -> LocalModel {
    LocalModel::load(
        path,
        LocalOptions {
            threads: 1,
            ..LocalOptions::default()
        },
    )
    .unwrap()
}

fn content(path: &Path) -> (Content, BufReader<File>) {
    let mut reader = BufReader::new(File::open(path).unwrap());
    (Content::read(&mut reader).unwrap(), reader)
}

/// The logits after `tokens[..k]` for each k from `split` on: the prompt in
/// one pass, then one token at a time, as a decoder reads them.
fn stepwise(
    mut forward: impl FnMut(&Tensor, usize) -> candle_core::Result<Tensor>,
    tokens: &[u32],
    split: usize,
) -> Vec<Vec<f32>> {
    let mut step = |input: &[u32], pos: usize| -> Vec<f32> {
        let x = Tensor::new(input, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        forward(&x, pos)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap()
    };
    let mut out = vec![step(&tokens[..split], 0)];
    for (i, &t) in tokens[split..].iter().enumerate() {
        out.push(step(&[t], split + i));
    }
    out
}

/// candle's logits for `arch`, built directly from the file.
fn reference(path: &Path, arch: &str, tokens: &[u32], split: usize) -> Vec<Vec<f32>> {
    let dev = &Device::Cpu;
    let (c, mut r) = content(path);
    match arch {
        "llama" => {
            let mut m = quantized_llama::ModelWeights::from_gguf(c, &mut r, dev).unwrap();
            stepwise(|x, p| m.forward(x, p), tokens, split)
        }
        "qwen2" => {
            let mut m = quantized_qwen2::ModelWeights::from_gguf(c, &mut r, dev).unwrap();
            stepwise(|x, p| m.forward(x, p), tokens, split)
        }
        "qwen3" => {
            let mut m = quantized_qwen3::ModelWeights::from_gguf(c, &mut r, dev).unwrap();
            stepwise(|x, p| m.forward(x, p), tokens, split)
        }
        "phi3" => {
            let mut m = quantized_phi3::ModelWeights::from_gguf(false, c, &mut r, dev).unwrap();
            stepwise(|x, p| m.forward(x, p), tokens, split)
        }
        "gemma3" => {
            let prefixes: Vec<&[u32]> = (split..=tokens.len()).map(|k| &tokens[..k]).collect();
            common::gemma_reference(path, &prefixes)
        }
        _ => panic!("no reference for {arch}"),
    }
}

/// `LocalModel`'s logits after `tokens[..k]` for each k from `split` on,
/// each read like a prompt (from the cache the last one left).
fn served(model: &mut LocalModel, tokens: &[u32], split: usize) -> Vec<Vec<f32>> {
    (split..=tokens.len())
        .map(|k| model.logits(&tokens[..k]).unwrap())
        .collect()
}

fn check_logits(arch: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = model_file(dir.path(), arch);
    let mut model = load(&path);
    let vocab = model.vocab_size() as u32;
    // Past Gemma's window of 8, prompt and steps alike.
    let tokens: Vec<u32> = (0..36).map(|i| (i * 37 + 11) % vocab).collect();
    let split = 20;
    let want = reference(&path, arch, &tokens, split);
    let got = served(&mut model, &tokens, split);
    // candle's own models: the same computation. serl's decoder rounds
    // activations to 8 bits where candle multiplies in f32: within 0.1%.
    let own = matches!(arch, "llama" | "gemma3");
    let tolerance = if own { 1e-3 } else { 1e-9 };
    common::assert_close(arch, &want, &got, tolerance);
    // A prompt that is not a continuation (the cache is cleared, or
    // trimmed) gives the same logits: one shorter than the cache, and one
    // longer that starts otherwise.
    let again = served(&mut model, &tokens[..split + 1], split);
    common::assert_close(arch, &want[..2], &again, tolerance);
    let other: Vec<u32> = (0..30).map(|i| (i * 11 + 5) % vocab).collect();
    let want_other = reference(&path, arch, &other, 29);
    common::assert_close(
        arch,
        &want_other,
        &served(&mut model, &other, 29),
        tolerance,
    );
}

#[test]
fn llamas_logits_match_candles() {
    check_logits("llama");
}

#[test]
fn gemma3s_logits_match_candles_unquantized_gemma3() {
    check_logits("gemma3");
}

#[test]
fn qwen2s_logits_match_candles() {
    check_logits("qwen2");
}

#[test]
fn qwen3s_logits_match_candles() {
    check_logits("qwen3");
}

#[test]
fn phi3s_logits_match_candles() {
    check_logits("phi3");
}

/// The sentences of `start: "x = " /[0-9]{1,3}/ (" + " /[a-z]{1,4}/){0,2}`.
fn in_grammar(s: &str) -> bool {
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

#[test]
fn every_architecture_writes_replies_inside_a_grammar() {
    let lark = Constraint::Lark(r#"start: "x = " /[0-9]{1,3}/ (" + " /[a-z]{1,4}/){0,2}"#.into());
    let messages = [ChatMessage {
        role: "user".into(),
        content: "Write a reward for an execution agent.".into(),
    }];
    for arch in ARCHITECTURES {
        let dir = tempfile::tempdir().unwrap();
        let mut model = load(&model_file(dir.path(), arch));
        let mut replies = Vec::new();
        for seed in 0..6 {
            let g = model
                .chat(&Request {
                    messages: &messages,
                    max_tokens: 60,
                    sampling: Sampling {
                        temperature: 1.0,
                        top_p: 1.0,
                        seed,
                    },
                    constraint: Some(&lark),
                    steer_after: 40,
                })
                .unwrap();
            assert!(
                in_grammar(&g.text),
                "{arch}: {:?} is outside the grammar",
                g.text
            );
            assert!(g.finished, "{arch}: {:?} did not end", g.text);
            replies.push(g.text);
        }
        replies.dedup();
        assert!(
            replies.len() > 1,
            "{arch}: every seed gave {:?}",
            replies[0]
        );
    }
}

#[test]
fn sentencepiece_prompts_use_the_templates_special_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let model = load(&model_file(dir.path(), "gemma3"));
    let tokens = model
        .encode("<bos><start_of_turn>user\nx = 12<end_of_turn>\n")
        .unwrap();
    // <bos>, <start_of_turn>, then pieces, a byte token for each newline.
    assert_eq!(&tokens[..2], &[2, 4]);
    assert!(
        tokens.contains(&5),
        "<end_of_turn> is one token: {tokens:?}"
    );
    let newline = 6 + 0x0a;
    assert_eq!(tokens.iter().filter(|&&t| t == newline).count(), 2);
    assert!(tokens.len() < 20, "merged pieces: {tokens:?}");
}
