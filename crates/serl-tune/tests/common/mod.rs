//! The tiny generated model and adapters the LoRA tests share.

use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use serl_local::{write_test_model, AdapterConfig, Target, TestModelSpec};
use serl_tune::{FloatModel, Lora};

/// A tiny model of `arch` (`llama`, `gemma3`) written into `dir`.
pub fn model_file(dir: &Path, arch: &str) -> PathBuf {
    let path = dir.join(format!("{arch}.gguf"));
    let spec = TestModelSpec {
        corpus: "Write a reward for an execution agent. x = 12 + ab ".repeat(4),
        merges: 30,
        layers: 2,
        embedding: 64,
        sliding_window: 8,
        ..TestModelSpec::for_architecture(arch)
    };
    write_test_model(&path, &spec).unwrap();
    path
}

/// Every projection adapted at `rank`, alpha twice the rank.
pub fn config(rank: usize) -> AdapterConfig {
    AdapterConfig {
        rank,
        alpha: 2.0 * rank as f32,
        targets: Target::ALL.to_vec(),
    }
}

/// A rank-4 adapter on `device` with every B drawn too (a fresh one
/// computes the base), the same numbers on every device.
pub fn nonzero_lora(model: &FloatModel, seed: u64, device: &Device) -> Lora {
    let lora = Lora::new_on(model.shape(), config(4), seed, device).unwrap();
    for (i, (name, var)) in lora.vars().into_iter().enumerate() {
        if name.ends_with("lora_b") {
            let (r, c) = var.as_tensor().dims2().unwrap();
            let v: Vec<f32> = (0..r * c)
                .map(|k| (((k * 7 + i * 13) % 17) as f32 - 8.0) * 0.01)
                .collect();
            var.set(&Tensor::from_vec(v, (r, c), device).unwrap())
                .unwrap();
        }
    }
    lora
}
