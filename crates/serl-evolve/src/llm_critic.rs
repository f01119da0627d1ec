//! A language model as the reward critic inside a training
//! ([`serl_train::RewardCritic`]): at each review it reads the reward's
//! per-term statistics, the weights in force and the learning curve by
//! review window (`prompts/reward_critic.j2`), and answers new weights as
//! JSON, constrained to a schema of exactly one weight per term within the
//! bounds. A reply that does not parse keeps the weights (the trainer logs
//! why); every answer is in the update's record, so the run replays.
//!
//! It lives here, where the LLM layer and the trainer meet: `serl-train`
//! defines the critic, `serl-llm` the chat backends, and neither knows the
//! other.

use serde_json::json;
use serl_design::{extract, ModuleKind};
use serl_llm::{Backend, ChatRequest, Prompts, Schema, Template};
use serl_train::{CriticReview, RewardCritic};

/// Makes the reward critic of a training whose config asks for a language
/// model (`[train.reward_critic] critic = "llm"`): the binary builds one
/// from its `[llm]` table. The loop's trainings that run here call it;
/// cluster tasks have none.
pub type CriticMaker = dyn Fn() -> Result<Box<dyn RewardCritic>, String> + Sync;

/// The template every prompt directory may have for the critic.
pub const TEMPLATE: Template = Template::RewardCritic;

/// An LLM reward critic.
pub struct LlmCritic {
    prompts: Prompts,
    backend: std::sync::Arc<dyn Backend>,
    temperature: f64,
    seed: u64,
    asked: u64,
}

impl LlmCritic {
    /// A critic asking `backend` with `prompts`' `reward_critic.j2`; review
    /// `n` is asked with seed `seed + n`. Critics of trainings that run at
    /// once share one backend (one HTTP client, or one loaded model).
    pub fn new(
        prompts: Prompts,
        backend: std::sync::Arc<dyn Backend>,
        temperature: f64,
        seed: u64,
    ) -> Self {
        LlmCritic {
            prompts,
            backend,
            temperature,
            seed,
            asked: 0,
        }
    }
}

/// The reply's schema: `{"weights": [k numbers within the bounds]}`.
fn schema(k: usize, (lo, hi): (f64, f64)) -> Schema {
    Schema {
        name: TEMPLATE.name().into(),
        schema: json!({
            "type": "object",
            "properties": {"weights": {
                "type": "array",
                "items": {"type": "number", "minimum": lo, "maximum": hi},
                "minItems": k,
                "maxItems": k,
            }},
            "required": ["weights"],
            "additionalProperties": false,
        }),
    }
}

/// The weights in a reply, one per term, or why there are none.
pub fn parse_weights(reply: &str, k: usize) -> Result<Vec<f64>, String> {
    let text = extract(ModuleKind::Plan, reply).ok_or("the reply holds no JSON object")?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("the reply's JSON: {e}"))?;
    let w: Vec<f64> = v["weights"]
        .as_array()
        .ok_or("the reply has no `weights` list")?
        .iter()
        .map(|x| x.as_f64().filter(|f| f.is_finite()))
        .collect::<Option<_>>()
        .ok_or("a weight is not a number")?;
    if w.len() != k {
        return Err(format!("{} weights for {k} terms", w.len()));
    }
    Ok(w)
}

impl RewardCritic for LlmCritic {
    fn name(&self) -> String {
        format!("llm ({})", self.backend.name())
    }

    fn review(&mut self, r: &CriticReview) -> Result<Vec<f64>, String> {
        let ctx = json!({
            "update": r.update + 1,
            "terms": r.terms,
            "weights": r.weights,
            // A window in which no episode finished has no PA.
            "windows": r.windows.iter().map(|(w, pa)| json!({"weights": w, "pa": (*pa > f64::MIN).then_some(*pa)})).collect::<Vec<_>>(),
            "min_weight": r.bounds.0,
            "max_weight": r.bounds.1,
        });
        let prompt = self
            .prompts
            .render(TEMPLATE.name(), &ctx)
            .map_err(|e| e.to_string())?;
        let mut req = ChatRequest::new(prompt);
        req.temperature = self.temperature;
        req.seed = Some(self.seed.wrapping_add(self.asked));
        req.max_tokens = 256;
        req.json = true;
        req.schema = Some(schema(r.weights.len(), r.bounds));
        self.asked += 1;
        let reply = self.backend.chat(&req).map_err(|e| e.to_string())?;
        parse_weights(&reply.content, r.weights.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_read_from_prose_or_json_and_a_wrong_count_is_named() {
        assert_eq!(
            parse_weights(r#"{"weights": [1, 0.5]}"#, 2).unwrap(),
            [1.0, 0.5]
        );
        assert_eq!(
            parse_weights("Here you go:\n```json\n{\"weights\": [2.0, 1.0]}\n```", 2).unwrap(),
            [2.0, 1.0]
        );
        assert!(parse_weights(r#"{"weights": [1]}"#, 2)
            .unwrap_err()
            .contains("1 weights for 2 terms"));
        assert!(parse_weights("no idea", 2).is_err());
        assert!(parse_weights(r#"{"weights": ["a", 1]}"#, 2).is_err());
    }
}
