//! LoRA on a tiny generated model: the float network against the engine,
//! gradients against finite differences, the adapter in the engine, and
//! training that learns, stops and resumes.

mod common;
use common::{config, model_file};

use std::path::Path;

use candle_core::Tensor;
use serl_local::{BaseModel, LocalModel, LocalOptions};
use serl_tune::{train, Example, FloatModel, Lora, Objective, TuneConfig};

fn engine(path: &Path) -> LocalModel {
    LocalModel::load(
        path,
        LocalOptions {
            threads: 1,
            ..LocalOptions::default()
        },
    )
    .unwrap()
}

fn rows(t: &Tensor) -> Vec<Vec<f32>> {
    t.to_vec2::<f32>().unwrap()
}

/// The largest over rows of mean squared difference / mean square (the
/// engine's tests' measure: the engine rounds activations to 8 bits).
fn rel_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(a, b)| {
            let spread = a.iter().map(|v| v * v).sum::<f32>();
            let err = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f32>();
            err / spread.max(1e-12)
        })
        .fold(0.0, f32::max)
}

/// An adapter with every B drawn too, on the CPU.
fn nonzero_lora(model: &FloatModel, seed: u64) -> Lora {
    common::nonzero_lora(model, seed, &candle_core::Device::Cpu)
}

fn base(path: &Path) -> BaseModel {
    BaseModel {
        file: "test.gguf".into(),
        hash: serl_local::model_hash(path).unwrap(),
    }
}

fn tokens(n: usize, vocab: u32, salt: u32) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i * 37 + 11 + salt * 5) % vocab)
        .collect()
}

#[test]
fn the_float_network_computes_what_the_engine_does_and_a_new_adapter_changes_nothing() {
    for arch in ["llama", "gemma3"] {
        let dir = tempfile::tempdir().unwrap();
        let path = model_file(dir.path(), arch);
        let mut served = engine(&path);
        let float = FloatModel::read(&path, 64).unwrap();
        let t = tokens(20, served.vocab_size() as u32, 0);
        let want: Vec<Vec<f32>> = (1..=t.len())
            .map(|k| served.logits(&t[..k]).unwrap())
            .collect();
        let got = rows(&float.logits(None, &t, None).unwrap());
        // The engine rounds activations to 8 bits; the float network does not.
        assert!(
            rel_diff(&want, &got) < 1e-3,
            "{arch}: {}",
            rel_diff(&want, &got)
        );
        let fresh = Lora::new(float.shape(), config(4), 1).unwrap();
        assert_eq!(
            rows(&float.logits(Some(&fresh), &t, None).unwrap()),
            got,
            "{arch}"
        );
        // The engine with that adapter: exactly its base.
        served
            .set_adapter(Some(fresh.to_adapter(base(&path)).unwrap()))
            .unwrap();
        let again: Vec<Vec<f32>> = (1..=t.len())
            .map(|k| served.logits(&t[..k]).unwrap())
            .collect();
        assert_eq!(again, want, "{arch}");
    }
}

#[test]
fn the_engine_with_an_adapter_matches_the_float_network_with_it() {
    for arch in ["llama", "gemma3"] {
        let dir = tempfile::tempdir().unwrap();
        let path = model_file(dir.path(), arch);
        let mut served = engine(&path);
        let float = FloatModel::read(&path, 64).unwrap();
        let lora = nonzero_lora(&float, 3);
        let t = tokens(20, served.vocab_size() as u32, 1);
        let base_logits = rows(&float.logits(None, &t, None).unwrap());
        let want = rows(&float.logits(Some(&lora), &t, None).unwrap());
        assert!(
            rel_diff(&base_logits, &want) > 1e-2,
            "{arch}: the adapter must matter"
        );
        served
            .set_adapter(Some(lora.to_adapter(base(&path)).unwrap()))
            .unwrap();
        let got: Vec<Vec<f32>> = (1..=t.len())
            .map(|k| served.logits(&t[..k]).unwrap())
            .collect();
        let base_served: Vec<Vec<f32>> = {
            let mut plain = engine(&path);
            (1..=t.len())
                .map(|k| plain.logits(&t[..k]).unwrap())
                .collect()
        };
        // The engine's 8-bit rounding of activations: the adapter adds no
        // error of its own beyond it (Gemma's scaled embedding rounds more).
        let (noise, err) = (rel_diff(&base_logits, &base_served), rel_diff(&want, &got));
        assert!(
            err < 2e-3 && err < 1.5 * noise + 1e-4,
            "{arch}: {err} with the adapter, {noise} without"
        );
        // Read from a prompt cache, one reply: the same log-probabilities.
        let cache = float.cache(Some(&lora), &t[..12]).unwrap();
        let split = float
            .reply_logprob(Some(&lora), Some(&cache), t[12], &t[13..])
            .unwrap();
        let whole = float
            .reply_logprob(
                Some(&lora),
                Some(&float.cache(Some(&lora), &t[..1]).unwrap()),
                t[1],
                &t[2..],
            )
            .unwrap();
        let tail = float
            .reply_logprob(
                Some(&lora),
                Some(&float.cache(Some(&lora), &t[..12]).unwrap()),
                t[12],
                &t[13..],
            )
            .unwrap();
        assert_eq!(
            split.to_scalar::<f32>().unwrap(),
            tail.to_scalar::<f32>().unwrap()
        );
        assert!(whole.to_scalar::<f32>().unwrap() < split.to_scalar::<f32>().unwrap());
    }
}

#[test]
fn an_adapter_of_another_model_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = model_file(dir.path(), "llama");
    let float = FloatModel::read(&path, 64).unwrap();
    let lora = Lora::new(float.shape(), config(2), 0).unwrap();
    let other = BaseModel {
        file: "other.gguf".into(),
        hash: "0".repeat(64),
    };
    let err = engine(&path)
        .set_adapter(Some(lora.to_adapter(other).unwrap()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("other.gguf"), "{err}");
}

#[test]
fn lora_gradients_match_finite_differences() {
    let dir = tempfile::tempdir().unwrap();
    let path = model_file(dir.path(), "llama");
    let float = FloatModel::read(&path, 64).unwrap();
    let lora = nonzero_lora(&float, 5);
    let t = tokens(16, float.shape().vocab as u32, 2);
    let cache = float.cache(Some(&lora), &t[..9]).unwrap();
    let f = |l: &Lora| {
        float
            .reply_logprob(Some(l), Some(&cache), t[9], &t[10..])
            .unwrap()
    };
    let grads = f(&lora).backward().unwrap();
    let mut checked = 0;
    for (name, var) in lora.vars() {
        if !(name.starts_with("blk.1.") || name.contains(".q.") || name.contains(".down.")) {
            continue;
        }
        let g: Vec<f32> = grads
            .get(var.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let x0: Vec<f32> = var.as_tensor().flatten_all().unwrap().to_vec1().unwrap();
        let shape = var.as_tensor().shape().clone();
        // The entry with the largest gradient: f32 differences need a signal.
        let k = (0..g.len())
            .max_by(|&a, &b| g[a].abs().total_cmp(&g[b].abs()))
            .unwrap();
        let h = 1e-2f32;
        let at = |d: f32| {
            let mut x = x0.clone();
            x[k] += d;
            var.set(&Tensor::from_vec(x, shape.clone(), &candle_core::Device::Cpu).unwrap())
                .unwrap();
            f(&lora).to_scalar::<f32>().unwrap()
        };
        let numeric = (at(h) - at(-h)) / (2.0 * h);
        var.set(&Tensor::from_vec(x0, shape.clone(), &candle_core::Device::Cpu).unwrap())
            .unwrap();
        let err = (numeric - g[k]).abs() / g[k].abs().max(1e-3);
        assert!(
            err < 0.05,
            "{name}[{k}]: autograd {} vs finite difference {numeric}",
            g[k]
        );
        checked += 1;
    }
    assert!(checked >= 6, "{checked} variables checked");
}

/// Prompts of several kinds, each with a reply pattern to prefer and one
/// to avoid.
fn pairs(vocab: u32, n: usize) -> Vec<Example> {
    (0..n as u32)
        .map(|i| Example {
            prompt: tokens(8 + (i as usize % 4), vocab, i),
            chosen: vec![3 % vocab, 5 % vocab, 7 % vocab, 9 % vocab],
            rejected: Some(vec![20 % vocab, 22 % vocab, 24 % vocab, 26 % vocab]),
        })
        .collect()
}

fn tune(objective: Objective) -> TuneConfig {
    TuneConfig {
        objective,
        rank: 4,
        alpha: 8.0,
        learning_rate: 1e-2,
        epochs: 4,
        batch: 2,
        beta: 0.5,
        holdout: 0.25,
        patience: 2,
        seed: 7,
        ..TuneConfig::default()
    }
}

#[test]
fn dpo_raises_the_held_out_margin_and_sft_lowers_the_held_out_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = model_file(dir.path(), "llama");
    let float = FloatModel::read(&path, 64).unwrap();
    let data = pairs(float.shape().vocab as u32, 16);
    let dpo = train(
        &float,
        base(&path),
        &data,
        &tune(Objective::Dpo),
        &dir.path().join("dpo"),
        &mut |_| {},
    )
    .unwrap();
    let first = &dpo.epochs[0];
    let best = &dpo.epochs[dpo.best_epoch];
    assert_eq!(first.margin, Some(0.0));
    assert!(
        best.margin.unwrap() > 1.0 && best.accuracy == Some(1.0),
        "{:?}",
        dpo.epochs
    );
    let sft = train(
        &float,
        base(&path),
        &data,
        &tune(Objective::Sft),
        &dir.path().join("sft"),
        &mut |_| {},
    )
    .unwrap();
    assert!(
        sft.epochs[sft.best_epoch].nll < 0.5 * sft.epochs[0].nll,
        "{:?}",
        sft.epochs
    );
    assert!(dir.path().join("dpo/adapter.safetensors").exists());
    assert!(sft.tokens_per_sec() > 0.0);
}

#[test]
fn a_run_stopped_halfway_resumes_to_the_same_adapter() {
    let dir = tempfile::tempdir().unwrap();
    let path = model_file(dir.path(), "llama");
    let float = FloatModel::read(&path, 64).unwrap();
    let data = pairs(float.shape().vocab as u32, 12);
    let cfg = TuneConfig {
        dropout: 0.1,
        ..tune(Objective::Dpo)
    };
    let whole = dir.path().join("whole");
    train(&float, base(&path), &data, &cfg, &whole, &mut |_| {}).unwrap();
    // Stopped in the middle of the second epoch, as a kill would stop it.
    let cut = dir.path().join("cut");
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        train(&float, base(&path), &data, &cfg, &cut, &mut |p| {
            assert!(p.step < 7, "killed")
        })
    }));
    assert!(stopped.is_err());
    assert!(!cut.join("adapter.safetensors").exists());
    let resumed = train(&float, base(&path), &data, &cfg, &cut, &mut |p| {
        assert!(p.step >= 6)
    })
    .unwrap();
    let read = |d: &Path| std::fs::read(d.join("adapter.safetensors")).unwrap();
    assert_eq!(read(&whole), read(&cut));
    assert_eq!(
        resumed.steps.len(),
        resumed.steps.last().unwrap().step as usize
    );
    // Another config on the same directory is refused, naming it.
    let other = TuneConfig { rank: 2, ..cfg };
    let err = train(&float, base(&path), &data, &other, &whole, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("whole") && err.contains("other settings"),
        "{err}"
    );
}

/// `device = "cuda"` in a build without the `cuda` feature says how to get
/// one, before any work starts.
#[test]
#[cfg(not(feature = "cuda"))]
fn cuda_in_a_build_without_it_is_a_clear_error() {
    let e = serl_tune::TuneDevice::Cuda
        .device()
        .unwrap_err()
        .to_string();
    assert!(e.contains("--features cuda"), "{e}");
    let config: Result<TuneConfig, _> = serde_json::from_str(r#"{"device": "gpu"}"#);
    let e = config.unwrap_err().to_string();
    assert!(e.contains("unknown variant `gpu`"), "{e}");
}
