//! The model's vocabulary, read from the GGUF metadata: the tokenizer
//! that encodes prompts (byte-level BPE, which candle builds from
//! `tokenizer.ggml.*`, or SentencePiece, [`crate::spm`]), each token's
//! bytes for decoding and for llguidance's token trie, and the tokens that
//! end a turn.

use std::collections::HashMap;
use std::sync::Arc;

use candle_core::quantized::tokenizer::TokenizerFromGguf;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::Tokenizer;

use crate::error::LocalError;
use crate::file::ModelFile;
use crate::spm::{byte_token, Spm};

/// Token texts that end an assistant's turn in the common chat formats.
const END_OF_TURN: &[&str] = &[
    "<|im_end|>",
    "<|eot_id|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
];

/// How text becomes tokens.
enum Encoder {
    /// Byte-level BPE (`gpt2`).
    Bpe(Box<Tokenizer>),
    /// SentencePiece (`llama`).
    Spm(Box<Spm>),
}

impl Encoder {
    /// `prefix`: a prompt, which SentencePiece may start with a space.
    fn encode(&self, text: &str, prefix: bool) -> Result<Vec<TokenId>, String> {
        match self {
            Encoder::Bpe(t) => t
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| e.to_string()),
            Encoder::Spm(s) => Ok(s.encode(text, prefix)),
        }
    }
}

/// A GGUF model's vocabulary.
pub struct Vocab {
    encoder: Encoder,
    /// Each token's bytes; special tokens start with
    /// [`TokTrie::SPECIAL_TOKEN_MARKER`].
    bytes: Vec<Vec<u8>>,
    /// Tokens that end the reply.
    pub stop: Vec<TokenId>,
    /// Each token's rank when the sampler steers a long reply to its end
    /// (see [`steer_rank`]).
    pub steer: Vec<u8>,
    /// The text of the beginning- and end-of-sequence tokens, for chat
    /// templates that print them.
    pub bos_text: String,
    /// See `bos_text`.
    pub eos_text: String,
}

impl Vocab {
    /// Reads the vocabulary of `file`.
    pub fn read(file: &ModelFile) -> Result<Vocab, LocalError> {
        let sentencepiece = file.string("tokenizer.ggml.model")? == "llama";
        let texts: Vec<String> = file
            .value("tokenizer.ggml.tokens")?
            .to_vec()
            .map_err(|_| file.unsupported("`tokenizer.ggml.tokens` is not an array".into()))?
            .iter()
            .map(|v| v.to_string().cloned().unwrap_or_default())
            .collect();
        let types: Vec<u32> = match file.content.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map(|a| {
                    // A token type of any integer width; normal (1) when
                    // unreadable.
                    a.iter()
                        .map(|t| crate::file::integer(t).map_or(1, |x| x as u32))
                        .collect()
                })
                .unwrap_or_default(),
            None => Vec::new(),
        };
        let encoder = if sentencepiece {
            Encoder::Spm(Box::new(spm(file, &texts, &types)?))
        } else {
            Encoder::Bpe(Box::new(bpe(file)?))
        };
        let chars = byte_level_chars();
        let chars = (!sentencepiece).then_some(&chars);
        let bytes: Vec<Vec<u8>> = texts
            .iter()
            .enumerate()
            .map(|(id, text)| {
                let kind = types.get(id).copied().unwrap_or(1);
                token_bytes(text, kind, chars)
            })
            .collect();
        let text_of = |key: &str| {
            file.integer(key)
                .and_then(|id| texts.get(id as usize))
                .cloned()
                .unwrap_or_default()
        };
        // Only control tokens end a turn: a normal token that happens to
        // read `</s>` is text.
        let mut stop: Vec<TokenId> = texts
            .iter()
            .enumerate()
            .filter(|(id, t)| END_OF_TURN.contains(&t.as_str()) && types.get(*id) == Some(&3))
            .map(|(id, _)| id as TokenId)
            .collect();
        if let Some(eos) = file.integer("tokenizer.ggml.eos_token_id") {
            if (eos as usize) < texts.len() {
                stop.push(eos as TokenId);
            }
        }
        stop.sort_unstable();
        stop.dedup();
        if stop.is_empty() {
            return Err(file.unsupported("no end-of-sequence token in the vocabulary".into()));
        }
        let steer = (0..bytes.len())
            .map(|t| steer_rank(&bytes[t], stop.contains(&(t as TokenId))))
            .collect();
        Ok(Vocab {
            encoder,
            bytes,
            stop,
            steer,
            bos_text: text_of("tokenizer.ggml.bos_token_id"),
            eos_text: text_of("tokenizer.ggml.eos_token_id"),
        })
    }

    /// The tokens of `text`; special tokens written out (`<|im_start|>`)
    /// become their ids.
    pub fn encode(&self, text: &str) -> Result<Vec<TokenId>, LocalError> {
        self.encoder
            .encode(text, true)
            .map_err(|e| LocalError::Run(format!("tokenizer: {e}")))
    }

    /// The text of `tokens`, special tokens left out.
    pub fn decode(&self, tokens: &[TokenId]) -> String {
        let mut out = Vec::new();
        for &t in tokens {
            if let Some(b) = self.bytes.get(t as usize) {
                if b.first() != Some(&TokTrie::SPECIAL_TOKEN_MARKER) {
                    out.extend_from_slice(b);
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// llguidance's view of the vocabulary, padded to the model's output
    /// width `n_vocab` (models often have a few more logits than tokens).
    pub fn tok_env(self: &Arc<Self>, n_vocab: usize) -> TokEnv {
        let mut words = self.bytes.clone();
        while words.len() < n_vocab {
            let mut pad = format!(".<[{}]>", words.len()).into_bytes();
            pad[0] = TokTrie::SPECIAL_TOKEN_MARKER;
            words.push(pad);
        }
        let info = TokRxInfo::new(words.len() as u32, self.stop[0]);
        let trie = TokTrie::from(&info, &words).with_eos_tokens(&self.stop);
        Arc::new(TrieEnv {
            vocab: self.clone(),
            trie,
        })
    }
}

/// How directly a token leads a structured reply to its end: 0 ends the
/// turn or is only closing characters (`)`, `]`, `}`, `"`); 3 holds an
/// opening bracket or a space (serl's grammars start every binary operator
/// and every separator that continues a list with a space); 2 is only
/// digits; 1 is the rest (a comma, a name, a decimal point). Past the
/// steering point the sampler draws from the lowest rank the grammar
/// allows, so a reply that runs long closes what it opened instead of
/// growing until the token budget cuts it (digits rank below a comma so
/// that a number ends).
pub fn steer_rank(bytes: &[u8], stops: bool) -> u8 {
    if stops || (!bytes.is_empty() && bytes.iter().all(|b| b")]}\"".contains(b))) {
        0
    } else if bytes.iter().any(|b| b"([{ ".contains(b)) {
        3
    } else if !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit) {
        2
    } else {
        1
    }
}

/// The byte-level BPE tokenizer of `file`.
fn bpe(file: &ModelFile) -> Result<Tokenizer, LocalError> {
    let mut tokenizer = Tokenizer::from_gguf(&file.content)
        .map_err(|e| file.unsupported(format!("tokenizer: {e}")))?;
    let pre = file.string("tokenizer.ggml.pre").unwrap_or_default();
    if !matches!(pre.as_str(), "qwen2" | "smaug-bpe" | "lfm2" | "llama3") {
        // candle's GPT-2 default adds a space before every text
        // segment; chat models (SmolLM2 among them) do not, and the
        // grammar's forced bytes must tokenize as written.
        tokenizer.with_pre_tokenizer(Some(ByteLevel::default().add_prefix_space(false)));
    }
    Ok(tokenizer)
}

/// The SentencePiece tokenizer of `file`: its scores, and whether it
/// starts a text with a space (`tokenizer.ggml.add_space_prefix`, true
/// unless the file says otherwise, as llama.cpp reads it).
fn spm(file: &ModelFile, texts: &[String], types: &[u32]) -> Result<Spm, LocalError> {
    let scores: Vec<f32> = file
        .value("tokenizer.ggml.scores")?
        .to_vec()
        .map_err(|_| file.unsupported("`tokenizer.ggml.scores` is not an array".into()))?
        .iter()
        .map(|v| v.to_f32().unwrap_or(0.0))
        .collect();
    if scores.len() != texts.len() {
        return Err(file.unsupported(format!(
            "{} scores for {} tokens",
            scores.len(),
            texts.len()
        )));
    }
    let prefix = match file.content.metadata.get("tokenizer.ggml.add_space_prefix") {
        Some(v) => v.to_bool().unwrap_or(true),
        None => true,
    };
    Ok(Spm::new(texts, scores, types, prefix))
}

/// The bytes a token stands for. Control and unused tokens are special;
/// the others are byte-level BPE text (GPT-2's byte-to-character map,
/// `chars`) or, without it, SentencePiece text (`▁` a space, `<0xAB>` a
/// byte).
fn token_bytes(text: &str, token_type: u32, chars: Option<&HashMap<char, u8>>) -> Vec<u8> {
    // GGUF token types: 1 normal, 2 unknown, 3 control, 4 user-defined,
    // 5 unused, 6 byte.
    if matches!(token_type, 2 | 3 | 5) {
        let mut b = vec![TokTrie::SPECIAL_TOKEN_MARKER];
        b.extend_from_slice(text.as_bytes());
        return b;
    }
    let Some(chars) = chars else {
        if token_type == 6 {
            if let Some(b) = byte_token(text) {
                return vec![b];
            }
        }
        return text.replace('\u{2581}', " ").into_bytes();
    };
    let mapped: Option<Vec<u8>> = text.chars().map(|c| chars.get(&c).copied()).collect();
    mapped.unwrap_or_else(|| text.as_bytes().to_vec())
}

/// GPT-2's map from the printable characters of byte-level BPE back to
/// bytes: printable Latin-1 stands for itself, the other bytes were
/// shifted to U+0100 and up.
pub(crate) fn byte_level_chars() -> HashMap<char, u8> {
    let mut map = HashMap::new();
    let mut next = 0x100u32;
    for byte in 0..=255u8 {
        let c = byte as char;
        if matches!(c, '!'..='~' | '\u{A1}'..='\u{AC}' | '\u{AE}'..='\u{FF}') {
            map.insert(c, byte);
        } else {
            map.insert(char::from_u32(next).unwrap_or('?'), byte);
            next += 1;
        }
    }
    map
}

struct TrieEnv {
    vocab: Arc<Vocab>,
    trie: TokTrie,
}

impl TokenizerEnv for TrieEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        self.trie.tokenize_with_greedy_fallback(s, |s| {
            self.vocab.encoder.encode(s, false).unwrap_or_default()
        })
    }
}
