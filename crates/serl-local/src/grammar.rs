//! Grammars without a model: whether a text is in a [`Constraint`]'s
//! language, and random texts drawn from it, over a vocabulary of the 256
//! bytes. Tests use it to hold serl's grammars to serl's parser, both
//! ways.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::error::LocalError;

/// What a reply must follow: a Lark grammar (llguidance's dialect, which
/// may inline JSON schemas with `%json`) or a JSON schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// A Lark grammar.
    Lark(String),
    /// A JSON schema; the reply is compact JSON.
    JsonSchema(serde_json::Value),
}

/// llguidance's form of `constraint`; JSON comes out compact.
pub(crate) fn top_level(constraint: &Constraint) -> TopLevelGrammar {
    match constraint {
        Constraint::Lark(g) => TopLevelGrammar::from_lark(g.clone()),
        Constraint::JsonSchema(s) => {
            let mut s = s.clone();
            if let Some(o) = s.as_object_mut() {
                // A sampler given room for whitespace can spend its
                // tokens on it.
                o.insert(
                    "x-guidance".into(),
                    serde_json::json!({"whitespace_flexible": false}),
                );
            }
            TopLevelGrammar::from_json_schema(s)
        }
    }
}

/// A matcher for `constraint` from `factory`.
pub(crate) fn matcher(
    factory: &ParserFactory,
    constraint: &Constraint,
) -> Result<Matcher, LocalError> {
    let parser = factory
        .create_parser(top_level(constraint))
        .map_err(|e| LocalError::Constraint(e.to_string()))?;
    Ok(Matcher::new(Ok(parser)))
}

/// Grammars over single bytes.
pub struct ByteGrammar {
    factory: ParserFactory,
}

const EOS: TokenId = 256;

impl ByteGrammar {
    /// A checker with the 256 bytes and an end token as its vocabulary.
    pub fn new() -> Result<ByteGrammar, LocalError> {
        let mut words: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        words.push(vec![TokTrie::SPECIAL_TOKEN_MARKER, b'$']);
        let trie = TokTrie::from(&TokRxInfo::new(words.len() as u32, EOS), &words);
        let env: TokEnv = Arc::new(Bytes(trie));
        let mut factory =
            ParserFactory::new_simple(&env).map_err(|e| LocalError::Constraint(e.to_string()))?;
        factory.quiet();
        Ok(ByteGrammar { factory })
    }

    /// Whether `text` is a complete sentence of `constraint`.
    pub fn accepts(&self, constraint: &Constraint, text: &str) -> Result<bool, LocalError> {
        let mut m = matcher(&self.factory, constraint)?;
        for &b in text.as_bytes() {
            if m.consume_token(b as TokenId).is_err() {
                return Ok(false);
            }
        }
        Ok(m.is_accepting().unwrap_or(false))
    }

    /// A random sentence of `constraint`: each byte drawn uniformly among
    /// those the grammar allows, the end among them. `None` when it is not
    /// complete after `max_bytes`.
    pub fn sample(
        &self,
        constraint: &Constraint,
        seed: u64,
        max_bytes: usize,
    ) -> Result<Option<String>, LocalError> {
        let mut m = matcher(&self.factory, constraint)?;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut out = Vec::new();
        while out.len() < max_bytes {
            if m.is_stopped() {
                return Ok(Some(String::from_utf8_lossy(&out).into_owned()));
            }
            let mask = m
                .compute_mask()
                .map_err(|e| LocalError::Constraint(e.to_string()))?;
            let allowed: Vec<TokenId> = (0..=EOS).filter(|&t| mask.is_allowed(t)).collect();
            if allowed.is_empty() {
                return Ok(None);
            }
            let t = allowed[rng.random_range(0..allowed.len())];
            if t == EOS {
                return Ok(Some(String::from_utf8_lossy(&out).into_owned()));
            }
            m.consume_token(t)
                .map_err(|e| LocalError::Constraint(e.to_string()))?;
            out.push(t as u8);
        }
        Ok(None)
    }
}

struct Bytes(TokTrie);

impl TokenizerEnv for Bytes {
    fn tok_trie(&self) -> &TokTrie {
        &self.0
    }
    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        s.iter().map(|&b| b as TokenId).collect()
    }
}
