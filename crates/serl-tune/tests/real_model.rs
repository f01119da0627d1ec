//! On a real model file (ignored: the file is a download; README, "The
//! embedded model"): `SERL_TUNE_MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
//! cargo test -p serl-tune --test real_model -- --ignored --nocapture`
//! prints the cost of a prompt's cache and of a reply's forward and
//! backward pass.

use std::path::PathBuf;
use std::time::Instant;

use serl_local::{AdapterConfig, Target};
use serl_tune::{FloatModel, Lora};

#[test]
#[ignore = "needs a model file: SERL_TUNE_MODEL"]
fn a_real_models_prompt_and_reply_costs() {
    let Some(path) = std::env::var_os("SERL_TUNE_MODEL").map(PathBuf::from) else {
        eprintln!("skipped: set SERL_TUNE_MODEL to a GGUF file");
        return;
    };
    let t = Instant::now();
    let model = FloatModel::read(&path, 2048).unwrap();
    eprintln!("read in f32: {:.2} s", t.elapsed().as_secs_f64());
    let config = AdapterConfig {
        rank: 8,
        alpha: 16.0,
        targets: Target::ALL.to_vec(),
    };
    let lora = Lora::new(model.shape(), config, 0).unwrap();
    let vocab = model.shape().vocab as u32;
    let prompt: Vec<u32> = (0..900u32).map(|i| (i * 7919 + 13) % vocab).collect();
    let reply: Vec<u32> = (0..reply_len())
        .map(|i| (i * 104_729 + 7) % vocab)
        .collect();
    let t = Instant::now();
    let cache = model.cache(Some(&lora), &prompt[..899]).unwrap();
    eprintln!(
        "prompt cache, 899 tokens, f32: {:.2} s",
        t.elapsed().as_secs_f64()
    );
    for _ in 0..3 {
        let t = Instant::now();
        let lp = model
            .reply_logprob(Some(&lora), Some(&cache), prompt[899], &reply)
            .unwrap();
        let f = t.elapsed().as_secs_f64();
        let _grads = lp.backward().unwrap();
        let all = t.elapsed().as_secs_f64();
        eprintln!(
            "reply of {} tokens: forward {f:.3} s, forward and backward {all:.3} s, {:.0} tokens/s",
            reply_len(),
            reply_len() as f64 / all
        );
    }
}

/// `SERL_TUNE_REPLY` tokens (40 by default).
fn reply_len() -> u32 {
    std::env::var("SERL_TUNE_REPLY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
}

/// DPO over a file of pairs (`SERL_TUNE_PAIRS`: JSON lines of
/// `prompt_ids`, `chosen_ids`, `rejected_ids`), one epoch, nothing held
/// out: the trainer's reply tokens per second, as PyTorch + PEFT's
/// reference script reports them (docs/llm.md).
#[test]
#[ignore = "needs a model file and pairs: SERL_TUNE_MODEL, SERL_TUNE_PAIRS"]
fn a_real_models_training_speed_on_pairs() {
    let (Some(path), Some(pairs)) = (
        std::env::var_os("SERL_TUNE_MODEL").map(PathBuf::from),
        std::env::var_os("SERL_TUNE_PAIRS").map(PathBuf::from),
    ) else {
        eprintln!("skipped: set SERL_TUNE_MODEL and SERL_TUNE_PAIRS");
        return;
    };
    let ids = |v: &serde_json::Value, k: &str| -> Vec<u32> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    let examples: Vec<serl_tune::Example> = std::fs::read_to_string(pairs)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            serl_tune::Example {
                prompt: ids(&v, "prompt_ids"),
                chosen: ids(&v, "chosen_ids"),
                rejected: Some(ids(&v, "rejected_ids")),
            }
        })
        .collect();
    let longest = examples
        .iter()
        .map(|e| e.prompt.len() + e.chosen.len().max(e.rejected.as_ref().unwrap().len()))
        .max()
        .unwrap();
    // SERL_TUNE_DEVICE=cuda: on the GPU (a test build with `--features cuda`).
    let device = match std::env::var("SERL_TUNE_DEVICE").as_deref() {
        Ok("cuda") => serl_tune::TuneDevice::Cuda,
        _ => serl_tune::TuneDevice::Cpu,
    };
    let model = FloatModel::read_on(&path, longest + 1, &device.device().unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = serl_tune::TuneConfig {
        epochs: 1,
        holdout: 0.0,
        device,
        ..serl_tune::TuneConfig::default()
    };
    let base = serl_local::BaseModel {
        file: "model".into(),
        hash: "-".into(),
    };
    let r = serl_tune::train(&model, base, &examples, &config, dir.path(), &mut |_| {}).unwrap();
    eprintln!(
        "{device:?}: {} pairs, {} reply tokens in {:.2} s of forward, backward and steps: {:.1} tokens/s; {:.1} s in all",
        examples.len(),
        r.reply_tokens,
        r.reply_secs,
        r.tokens_per_sec(),
        r.secs
    );
}
