//! The GPU path (`--features cuda`, `device = "cuda"`): the same
//! log-probabilities, gradients and training as the CPU, on a tiny
//! generated model. Prints a skip line on a machine without a GPU.
//!
//! `cargo test -p serl-tune --release --features cuda --test cuda`
#![cfg(feature = "cuda")]

mod common;
use common::model_file;

use candle_core::{Device, Tensor};
use serl_local::BaseModel;
use serl_tune::{train, Example, FloatModel, Objective, TuneConfig, TuneDevice};

fn gpu() -> Option<Device> {
    match TuneDevice::Cuda.device() {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("skipped: no CUDA GPU here ({e})");
            None
        }
    }
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

#[test]
fn the_gpu_computes_the_cpus_log_probabilities_and_gradients() {
    let Some(cuda) = gpu() else { return };
    for arch in ["llama", "gemma3"] {
        let dir = tempfile::tempdir().unwrap();
        let path = model_file(dir.path(), arch);
        let mut results = Vec::new();
        for device in [Device::Cpu, cuda.clone()] {
            let model = FloatModel::read_on(&path, 64, &device).unwrap();
            let lora = common::nonzero_lora(&model, 5, &device);
            let vocab = model.shape().vocab as u32;
            let t: Vec<u32> = (0..24u32).map(|i| (i * 37 + 11) % vocab).collect();
            let cache = model.cache(Some(&lora), &t[..14]).unwrap();
            let lp = model
                .reply_logprob(Some(&lora), Some(&cache), t[14], &t[15..])
                .unwrap();
            let grads = lp.backward().unwrap();
            let g: Vec<Vec<f32>> = lora
                .vars()
                .iter()
                .map(|(_, v)| values(grads.get(v.as_tensor()).unwrap()))
                .collect();
            results.push((lp.to_scalar::<f32>().unwrap(), g));
        }
        let ((cpu_lp, cpu_g), (gpu_lp, gpu_g)) = (&results[0], &results[1]);
        assert!(
            (cpu_lp - gpu_lp).abs() <= 1e-4 * cpu_lp.abs().max(1.0),
            "{arch}: log-probability {cpu_lp} on the CPU, {gpu_lp} on the GPU"
        );
        for (a, b) in cpu_g.iter().zip(gpu_g) {
            let scale = a.iter().fold(1e-6f32, |m, x| m.max(x.abs()));
            let worst = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
            assert!(
                worst <= 1e-3 * scale,
                "{arch}: a gradient differs by {worst} (scale {scale})"
            );
        }
    }
}

#[test]
fn training_on_the_gpu_follows_the_cpus_steps() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = model_file(dir.path(), "llama");
    let base = BaseModel {
        file: "test.gguf".into(),
        hash: serl_local::model_hash(&path).unwrap(),
    };
    let mut reports = Vec::new();
    for device in [TuneDevice::Cpu, TuneDevice::Cuda] {
        let model = FloatModel::read_on(&path, 64, &device.device().unwrap()).unwrap();
        let vocab = model.shape().vocab as u32;
        let examples: Vec<Example> = (0..8u32)
            .map(|i| Example {
                prompt: (0..8 + i % 4)
                    .map(|k| (k * 37 + 11 + i * 5) % vocab)
                    .collect(),
                chosen: vec![3 % vocab, 5 % vocab, 7 % vocab],
                rejected: Some(vec![20 % vocab, 22 % vocab, 24 % vocab]),
            })
            .collect();
        let config = TuneConfig {
            objective: Objective::Dpo,
            rank: 4,
            alpha: 8.0,
            learning_rate: 1e-2,
            epochs: 2,
            batch: 2,
            holdout: 0.25,
            seed: 7,
            device,
            ..TuneConfig::default()
        };
        let out = tempfile::tempdir().unwrap();
        reports.push(
            train(
                &model,
                base.clone(),
                &examples,
                &config,
                out.path(),
                &mut |_| {},
            )
            .unwrap(),
        );
    }
    let (cpu, gpu) = (&reports[0], &reports[1]);
    assert_eq!(cpu.steps.len(), gpu.steps.len());
    for (a, b) in cpu.steps.iter().zip(&gpu.steps) {
        assert!(
            (a.loss - b.loss).abs() <= 1e-3 * a.loss.abs().max(1.0),
            "step {}: loss {} on the CPU, {} on the GPU",
            a.step,
            a.loss,
            b.loss
        );
    }
    let (a, b) = (cpu.epochs.last().unwrap(), gpu.epochs.last().unwrap());
    assert!(
        (a.loss - b.loss).abs() <= 1e-3,
        "held-out loss {} vs {}",
        a.loss,
        b.loss
    );
    eprintln!(
        "{} steps; held-out loss {:.5} (CPU) and {:.5} (GPU)",
        cpu.steps.len(),
        a.loss,
        b.loss
    );
}
