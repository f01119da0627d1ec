//! The forward pass against candle's quantized llama on the same file, and
//! the key-value cache's prefix reuse against a fresh start.

use std::fs::File;
use std::io::BufReader;

use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;

use super::{Llama, State};
use crate::testmodel::{write_test_model, TestModelSpec};

fn test_model(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("tiny.gguf");
    let spec = TestModelSpec {
        corpus: "the reward is the price advantage minus the impact ".repeat(8),
        merges: 40,
        layers: 3,
        embedding: 64,
        ..TestModelSpec::default()
    };
    write_test_model(&path, &spec).unwrap();
    path
}

fn candle_logits(path: &std::path::Path, tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut reader = BufReader::new(File::open(path).unwrap());
    let content = Content::read(&mut reader).unwrap();
    let mut model = ModelWeights::from_gguf(content, &mut reader, &Device::Cpu).unwrap();
    // The prompt in one pass, then one token at a time, as the backend
    // reads them.
    let (prompt, rest) = tokens.split_at(tokens.len() / 2);
    let mut out = Vec::new();
    let mut step = |input: &[u32], pos: usize| -> Vec<f32> {
        let x = Tensor::new(input, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let l = model.forward(&x, pos).unwrap();
        l.squeeze(0).unwrap().to_vec1().unwrap()
    };
    out.push(step(prompt, 0));
    for (i, &t) in rest.iter().enumerate() {
        out.push(step(&[t], prompt.len() + i));
    }
    out
}

fn own_logits(llama: &Llama, tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut state = State::default();
    let (prompt, rest) = tokens.split_at(tokens.len() / 2);
    let mut out = vec![llama.logits(&mut state, prompt)];
    for &t in rest {
        out.push(llama.next(&mut state, t));
    }
    out
}

fn read(path: &std::path::Path) -> Llama {
    let mut reader = BufReader::new(File::open(path).unwrap());
    let content = Content::read(&mut reader).unwrap();
    Llama::read(&content, &mut reader, 512).unwrap()
}

#[test]
fn the_forward_pass_agrees_with_candles_quantized_llama() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_model(dir.path());
    let llama = read(&path);
    let vocab = llama.config().vocab as u32;
    let tokens: Vec<u32> = (0..40).map(|i| (i * 37 + 11) % vocab).collect();
    let reference = candle_logits(&path, &tokens);
    let own = own_logits(&llama, &tokens);
    assert_eq!(reference.len(), own.len());
    for (step, (a, b)) in reference.iter().zip(&own).enumerate() {
        let spread = a.iter().map(|v| v * v).sum::<f32>() / a.len() as f32;
        let err = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f32>() / a.len() as f32;
        // Both round activations to 8 bits, in different places (candle
        // multiplies F32 weights in f32): the logits agree to about 1% of
        // their spread, not to the bit.
        assert!(
            err < 1e-3 * spread,
            "step {step}: mean squared difference {err}, logits' mean square {spread}"
        );
    }
}

#[test]
fn a_kept_prefix_gives_the_same_logits_as_a_fresh_start() {
    let dir = tempfile::tempdir().unwrap();
    let llama = read(&test_model(dir.path()));
    let first: Vec<u32> = (0..30).map(|i| (i * 7 + 3) % 50).collect();
    let mut second = first[..20].to_vec();
    second.extend((0..15).map(|i| (i * 5 + 1) % 50));
    let mut state = State::default();
    llama.logits(&mut state, &first);
    let reused = llama.logits(&mut state, &second);
    let fresh = llama.logits(&mut State::default(), &second);
    assert_eq!(reused, fresh);
    // The same prompt again reads only its last token.
    assert_eq!(llama.logits(&mut state, &second), fresh);
    assert_eq!(state.tokens(), &second[..]);
}

#[test]
fn one_thread_or_two_give_the_same_logits() {
    let dir = tempfile::tempdir().unwrap();
    let llama = read(&test_model(dir.path()));
    let tokens: Vec<u32> = (0..25).map(|i| (i * 13 + 2) % 50).collect();
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| own_logits(&llama, &tokens))
    };
    assert_eq!(run(1), run(2));
}
