//! Real models, when their files are in the repository's `models/`
//! (ignored: `cargo test -p serl-local --test real_models -- --ignored
//! --nocapture`). Gemma 3 270M (`gemma-3-270m-q4_k_m.gguf`, see
//! docs/llm.md): its SentencePiece prompts against the `tokenizers`
//! crate's BPE built from the same scores, serl's logits against candle's
//! unquantized Gemma 3, and a reply constrained by a grammar.

mod common;

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::quantized::gguf_file::Content;
use serl_local::{ChatMessage, Constraint, LocalModel, LocalOptions, Request, Sampling};
use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::replace::Replace;
use tokenizers::{AddedToken, Tokenizer};

fn models() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models")
}

/// The `tokenizers` crate's BPE from a SentencePiece GGUF vocabulary:
/// every split of a normal token into two tokens is a merge, ranked by
/// the joined token's score; byte fallback; spaces as `▁`; control and
/// user-defined tokens matched first. Gemma 3's scores are distinct, so
/// the ranks are llama.cpp's order.
fn tokenizers_bpe(content: &Content) -> Tokenizer {
    let strings = |k: &str| -> Vec<String> {
        content.metadata[k]
            .to_vec()
            .unwrap()
            .iter()
            .map(|v| v.to_string().unwrap().clone())
            .collect()
    };
    let numbers = |k: &str| -> Vec<f32> {
        content.metadata[k]
            .to_vec()
            .unwrap()
            .iter()
            .map(|v| v.to_f32().unwrap_or_else(|_| v.to_i32().unwrap() as f32))
            .collect()
    };
    let tokens = strings("tokenizer.ggml.tokens");
    let scores = numbers("tokenizer.ggml.scores");
    let types = numbers("tokenizer.ggml.token_type");
    let mut vocab = tokenizers::models::bpe::Vocab::new();
    for (i, t) in tokens.iter().enumerate() {
        vocab.entry(t.clone()).or_insert(i as u32);
    }
    let mut merges = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if types[i] != 1.0 {
            continue;
        }
        for (at, _) in t.char_indices().skip(1) {
            let (l, r) = t.split_at(at);
            if vocab.contains_key(l) && vocab.contains_key(r) {
                merges.push((scores[i], i, l.to_string(), r.to_string()));
            }
        }
    }
    merges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let merges = merges.into_iter().map(|(_, _, l, r)| (l, r)).collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .byte_fallback(true)
        .build()
        .unwrap();
    let mut tokenizer = Tokenizer::new(bpe);
    tokenizer
        .with_normalizer(Some(Replace::new(" ", "\u{2581}").unwrap()))
        .unwrap();
    let specials: Vec<AddedToken> = tokens
        .iter()
        .zip(&types)
        .filter(|(_, &t)| (2.0..=4.0).contains(&t))
        .map(|(s, _)| AddedToken::from(s.clone(), true))
        .collect();
    tokenizer.add_special_tokens(specials).unwrap();
    tokenizer
}

const TEXTS: &[&str] = &[
    "The reward is the price advantage minus the market impact.",
    "def reward(state):\n    return -abs(state.remaining) * 0.5  # urgency\n\n\n",
    "{\"features\": [{\"name\": \"ret_1\", \"program\": \"lag(mid, 1)\"}]}",
    "  leading spaces,\ttabs, and trailing   ",
    "naïve café, Ünïcödé, 中文字符, emoji 🙂 and ∑ symbols",
    "<start_of_turn>user\nWrite a reward.<end_of_turn>\n<start_of_turn>model\n",
];

#[test]
#[ignore]
fn gemma3_270m_tokenizes_computes_and_replies_as_it_should() {
    let src = models().join("gemma-3-270m-q4_k_m.gguf");
    if !src.exists() {
        eprintln!("{} is not there: skipped", src.display());
        return;
    }
    // The base model has no chat template: it is asked in Gemma's
    // instruct format (serl_local's GEMMA_TEMPLATE).
    let mut model = LocalModel::load(
        &src,
        LocalOptions {
            threads: 2,
            ..LocalOptions::default()
        },
    )
    .unwrap();

    let mut reader = BufReader::new(File::open(&src).unwrap());
    let bpe = tokenizers_bpe(&Content::read(&mut reader).unwrap());
    for text in TEXTS {
        let want = bpe.encode(*text, false).unwrap().get_ids().to_vec();
        assert_eq!(model.encode(text).unwrap(), want, "{text:?}");
    }

    let prompt = model
        .encode("<bos><start_of_turn>user\nWrite a reward for an execution agent.<end_of_turn>\n<start_of_turn>model\n")
        .unwrap();
    let prefixes = [&prompt[..prompt.len() - 3], &prompt[..]];
    let want = common::gemma_reference(&src, &prefixes);
    let got: Vec<Vec<f32>> = prefixes.iter().map(|p| model.logits(p).unwrap()).collect();
    let argmax = |l: &[f32]| (0..l.len()).max_by(|&a, &b| l[a].total_cmp(&l[b])).unwrap();
    for (w, g) in want.iter().zip(&got) {
        eprintln!("top token: candle {} serl {}", argmax(w), argmax(g));
    }
    common::assert_close("gemma3 270M", &want, &got, 2e-2);

    let messages = [ChatMessage {
        role: "user".into(),
        content: "Write a reward for an order-execution agent as one expression.".into(),
    }];
    let lark = Constraint::Lark(
        r#"start: "reward = " expr
expr: term (" " ("+" | "-") " " term){0,3}
term: /[0-9]{1,3}(\.[0-9]{1,2})?/ | "remaining" | "price_advantage" | "impact""#
            .into(),
    );
    let start = Instant::now();
    let g = model
        .chat(&Request {
            messages: &messages,
            max_tokens: 64,
            sampling: Sampling {
                temperature: 0.7,
                top_p: 0.95,
                seed: 1,
            },
            constraint: Some(&lark),
            steer_after: 48,
        })
        .unwrap();
    eprintln!(
        "reply {:?}: {} prompt tokens in {:.2} s, {} generated in {:.2} s ({:.1} tokens/s), {:.1} s in all",
        g.text,
        g.prompt_tokens,
        g.prompt_secs,
        g.completion_tokens,
        g.generate_secs,
        g.completion_tokens as f64 / g.generate_secs,
        start.elapsed().as_secs_f64()
    );
    assert!(g.text.starts_with("reward = "), "{:?}", g.text);
}
