//! candle's Gemma 3 as the reference for serl's, on any Gemma 3 file.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use candle_core::quantized::gguf_file::Content;
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::gemma3;

/// candle's logits after each of `prompts`, each read afresh, from its
/// unquantized Gemma 3 (which applies GELU and the sliding window; its
/// quantized model has SiLU and no window once the prompt is read). The
/// weights are the file's, dequantized, renamed as Hugging Face names
/// them, the norms less the 1 GGUF adds to them. Its prompt mask lets a
/// token see `sliding_window` positions back, one more than llama.cpp's
/// window, hence `window − 1`; its rotating cache sees one fewer: so each
/// prompt is read in one pass.
pub fn gemma_reference(path: &Path, prompts: &[&[u32]]) -> Vec<Vec<f32>> {
    let mut reader = BufReader::new(File::open(path).unwrap());
    let content = Content::read(&mut reader).unwrap();
    let dev = &Device::Cpu;
    let mut weights = HashMap::new();
    for name in content.tensor_infos.keys() {
        let t = content.tensor(&mut reader, name, dev).unwrap();
        let t = t.dequantize(dev).unwrap();
        let (hf, norm) = hf_name(name);
        let t = if norm { (t - 1.0).unwrap() } else { t };
        weights.insert(hf, t);
    }
    let vocab = weights["model.embed_tokens.weight"].dims()[0];
    let md = |k: &str| content.metadata[&format!("gemma3.{k}")].clone();
    let int = |k: &str| md(k).to_u32().unwrap() as usize;
    let float = |k: &str| md(k).to_f32().unwrap() as f64;
    let longest = prompts.iter().map(|p| p.len()).max().unwrap_or(1);
    let cfg: gemma3::Config = serde_json::from_value(serde_json::json!({
        "attention_bias": false,
        "head_dim": int("attention.key_length"),
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": int("embedding_length"),
        "intermediate_size": int("feed_forward_length"),
        "num_attention_heads": int("attention.head_count"),
        "num_hidden_layers": int("block_count"),
        "num_key_value_heads": int("attention.head_count_kv"),
        "rms_norm_eps": float("attention.layer_norm_rms_epsilon"),
        "rope_theta": content
            .metadata
            .get("gemma3.rope.freq_base")
            .map_or(1e6, |v| v.to_f32().unwrap() as f64),
        "rope_local_base_freq": 1e4,
        "vocab_size": vocab,
        "final_logit_softcapping": null,
        "attn_logit_softcapping": null,
        "query_pre_attn_scalar": int("attention.key_length"),
        "sliding_window": int("attention.sliding_window") - 1,
        "sliding_window_pattern": 6,
        "max_position_embeddings": longest + 1
    }))
    .unwrap();
    let vb = candle_nn::VarBuilder::from_tensors(weights, DType::F32, dev);
    let mut model = gemma3::Model::new(false, &cfg, vb).unwrap();
    prompts
        .iter()
        .map(|p| {
            model.clear_kv_cache();
            let x = Tensor::new(*p, dev).unwrap().unsqueeze(0).unwrap();
            let l = model.forward(&x, 0).unwrap();
            l.flatten_all().unwrap().to_vec1().unwrap()
        })
        .collect()
}

/// Hugging Face's name of a GGUF Gemma 3 tensor, and whether it is a norm.
fn hf_name(gguf: &str) -> (String, bool) {
    match gguf {
        "token_embd.weight" => return ("model.embed_tokens.weight".into(), false),
        "output_norm.weight" => return ("model.norm.weight".into(), true),
        _ => {}
    }
    let rest = gguf.strip_prefix("blk.").unwrap();
    let (layer, rest) = rest.split_once('.').unwrap();
    let (hf, norm) = match rest.strip_suffix(".weight").unwrap() {
        "attn_q" => ("self_attn.q_proj", false),
        "attn_k" => ("self_attn.k_proj", false),
        "attn_v" => ("self_attn.v_proj", false),
        "attn_output" => ("self_attn.o_proj", false),
        "attn_q_norm" => ("self_attn.q_norm", true),
        "attn_k_norm" => ("self_attn.k_norm", true),
        "attn_norm" => ("input_layernorm", true),
        "post_attention_norm" => ("post_attention_layernorm", true),
        "ffn_norm" => ("pre_feedforward_layernorm", true),
        "post_ffw_norm" => ("post_feedforward_layernorm", true),
        "ffn_gate" => ("mlp.gate_proj", false),
        "ffn_up" => ("mlp.up_proj", false),
        "ffn_down" => ("mlp.down_proj", false),
        other => panic!("unexpected tensor {other}"),
    };
    (format!("model.layers.{layer}.{hf}.weight"), norm)
}

/// Mean squared difference under `tolerance` of the reference's mean
/// square, at every step.
pub fn assert_close(what: &str, reference: &[Vec<f32>], own: &[Vec<f32>], tolerance: f32) {
    assert_eq!(reference.len(), own.len());
    for (step, (a, b)) in reference.iter().zip(own).enumerate() {
        assert_eq!(a.len(), b.len(), "{what}: logits' width");
        let spread = a.iter().map(|v| v * v).sum::<f32>() / a.len() as f32;
        let err = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f32>() / a.len() as f32;
        assert!(
            err <= tolerance * spread,
            "{what}, step {step}: mean squared difference {err}, logits' mean square {spread}"
        );
    }
}
