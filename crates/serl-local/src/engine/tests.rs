//! The forward pass against candle's quantized llama on the same file
//! (Llama 3.1's rope factors included), and the key-value cache's prefix
//! reuse against a fresh start (Gemma 3's sliding window included). Gemma
//! 3, Qwen and Phi-3 against candle: `tests/architectures.rs`.

use std::fs::File;
use std::io::BufReader;

use candle_core::quantized::gguf_file::Content;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;

use super::{Decoder, State};
use crate::testmodel::{write_test_model, TestModelSpec};

fn spec() -> TestModelSpec {
    TestModelSpec {
        corpus: "the reward is the price advantage minus the impact ".repeat(8),
        merges: 40,
        layers: 3,
        embedding: 64,
        ..TestModelSpec::default()
    }
}

fn test_model(dir: &std::path::Path) -> std::path::PathBuf {
    write(dir, "tiny.gguf", &spec())
}

fn write(dir: &std::path::Path, name: &str, spec: &TestModelSpec) -> std::path::PathBuf {
    let path = dir.join(name);
    write_test_model(&path, spec).unwrap();
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

fn own_logits(llama: &Decoder, tokens: &[u32]) -> Vec<Vec<f32>> {
    let mut state = State::default();
    let (prompt, rest) = tokens.split_at(tokens.len() / 2);
    let mut out = vec![llama.logits(&mut state, prompt)];
    for &t in rest {
        out.push(llama.next(&mut state, t));
    }
    out
}

fn read(path: &std::path::Path) -> Decoder {
    let mut reader = BufReader::new(File::open(path).unwrap());
    let content = Content::read(&mut reader).unwrap();
    let arch = content.metadata["general.architecture"]
        .to_string()
        .unwrap()
        .clone();
    Decoder::read(&content, &mut reader, &arch, 512).unwrap()
}

/// Mean squared difference under 0.1% of the reference's mean square,
/// step by step.
fn assert_close(reference: &[Vec<f32>], own: &[Vec<f32>]) {
    assert_eq!(reference.len(), own.len());
    for (step, (a, b)) in reference.iter().zip(own).enumerate() {
        assert_eq!(a.len(), b.len());
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
fn the_forward_pass_agrees_with_candles_quantized_llama() {
    let dir = tempfile::tempdir().unwrap();
    let path = test_model(dir.path());
    let llama = read(&path);
    let vocab = llama.config().vocab as u32;
    let tokens: Vec<u32> = (0..40).map(|i| (i * 37 + 11) % vocab).collect();
    let reference = candle_logits(&path, &tokens);
    let own = own_logits(&llama, &tokens);
    assert_close(&reference, &own);
}

/// Llama 3.1's rope factors divide each pair's frequency. Factors
/// (B′/B)^(2i/d) on a base B turn it into base B′, which candle's llama
/// (which ignores `rope_freqs.weight`) runs from the metadata: the file
/// with factors must give what candle gives for the file with base B′.
#[test]
fn rope_factors_divide_the_frequencies_as_llama_cpp_does() {
    let dir = tempfile::tempdir().unwrap();
    let (base, target) = (10_000f32, 500f32);
    let pairs = 64 / 4 / 2;
    let factors: Vec<f32> = (0..pairs)
        .map(|i| (target / base).powf((2 * i) as f32 / (2 * pairs) as f32))
        .collect();
    let scaled = write(
        dir.path(),
        "factors.gguf",
        &TestModelSpec {
            rope_base: Some(base),
            rope_freqs: factors,
            ..spec()
        },
    );
    let plain = write(
        dir.path(),
        "plain.gguf",
        &TestModelSpec {
            rope_base: Some(target),
            ..spec()
        },
    );
    let llama = read(&scaled);
    let vocab = llama.config().vocab as u32;
    let tokens: Vec<u32> = (0..40).map(|i| (i * 37 + 11) % vocab).collect();
    assert_close(
        &candle_logits(&plain, &tokens),
        &own_logits(&llama, &tokens),
    );
    // And the factors matter: without them the logits differ.
    let unscaled = write(
        dir.path(),
        "base.gguf",
        &TestModelSpec {
            rope_base: Some(base),
            ..spec()
        },
    );
    let other = own_logits(&read(&unscaled), &tokens);
    let own = own_logits(&llama, &tokens);
    assert!(own.last() != other.last());
}

/// Linear rope scaling by s (positions times 1/s) is rope factors all
/// equal to s.
#[test]
fn linear_rope_scaling_is_a_factor_on_every_pair() {
    let dir = tempfile::tempdir().unwrap();
    let linear = write(
        dir.path(),
        "linear.gguf",
        &TestModelSpec {
            rope_scaling: Some(("linear".into(), 4.0)),
            ..spec()
        },
    );
    let factors = write(
        dir.path(),
        "factors.gguf",
        &TestModelSpec {
            rope_freqs: vec![4.0; 8],
            ..spec()
        },
    );
    let tokens: Vec<u32> = (0..30).map(|i| (i * 13 + 5) % 200).collect();
    let (a, b) = (
        own_logits(&read(&linear), &tokens),
        own_logits(&read(&factors), &tokens),
    );
    for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
        assert!((x - y).abs() < 1e-4, "{x} vs {y}");
    }
    // YaRN is refused with its name.
    let yarn = write(
        dir.path(),
        "yarn.gguf",
        &TestModelSpec {
            rope_scaling: Some(("yarn".into(), 4.0)),
            ..spec()
        },
    );
    let mut reader = BufReader::new(File::open(&yarn).unwrap());
    let content = Content::read(&mut reader).unwrap();
    let err = Decoder::read(&content, &mut reader, "llama", 64)
        .err()
        .unwrap();
    assert!(err.contains("`yarn`"), "{err}");
}

/// Gemma 3's sliding window too: a kept prefix past the window gives a
/// fresh start's logits to the bit.
#[test]
fn a_kept_prefix_past_gemmas_window_gives_the_same_logits() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "gemma.gguf",
        &TestModelSpec {
            sliding_window: 8,
            layers: 3,
            embedding: 64,
            ..TestModelSpec::for_architecture("gemma3")
        },
    );
    let gemma = read(&path);
    let first: Vec<u32> = (0..30).map(|i| (i * 7 + 3) % 250).collect();
    let mut second = first[..20].to_vec();
    second.extend((0..15).map(|i| (i * 5 + 1) % 250));
    let mut state = State::default();
    gemma.logits(&mut state, &first);
    let reused = gemma.logits(&mut state, &second);
    let fresh = gemma.logits(&mut State::default(), &second);
    assert_eq!(reused, fresh);
    let mut one_by_one = State::default();
    let mut last = gemma.logits(&mut one_by_one, &second[..1]);
    for &t in &second[1..] {
        last = gemma.next(&mut one_by_one, t);
    }
    for (x, y) in last.iter().zip(&fresh) {
        assert!((x - y).abs() < 1e-3 * (1.0 + y.abs()), "{x} vs {y}");
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
