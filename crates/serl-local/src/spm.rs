//! SentencePiece tokenizers as GGUF stores them (`tokenizer.ggml.model =
//! "llama"`: Gemma, Llama 2, TinyLlama, Mistral, Phi-3): token texts with
//! `▁` for a space, a score per token, byte tokens `<0x00>`…`<0xFF>` for
//! what no piece covers. The encoder is llama.cpp's (`llm_tokenizer_spm`):
//! text split into characters, then the adjacent pair whose joined text is
//! the highest-scoring token merged first (the leftmost among equals), then
//! characters no token covers spelled in byte tokens. The `tokenizers`
//! crate's BPE cannot say this: its merges need distinct ranks, and
//! SentencePiece scores tie.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// A SentencePiece vocabulary.
pub struct Spm {
    ids: HashMap<String, u32>,
    scores: Vec<f32>,
    /// The token of each byte, where the vocabulary has one.
    bytes: [Option<u32>; 256],
    /// Control, user-defined and unknown tokens, matched in the raw text
    /// before the rest is encoded (longest first), by their first byte.
    specials: Vec<Vec<(String, u32)>>,
    /// A space before the text and after each special token (Llama 2;
    /// not Gemma).
    add_space_prefix: bool,
    unknown: Option<u32>,
}

impl Spm {
    /// The vocabulary of `texts`, their `scores` and GGUF token `types`
    /// (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte).
    pub fn new(texts: &[String], scores: Vec<f32>, types: &[u32], add_space_prefix: bool) -> Spm {
        let mut ids = HashMap::with_capacity(texts.len());
        let mut bytes = [None; 256];
        let mut specials = vec![Vec::new(); 256];
        let mut unknown = None;
        for (id, text) in texts.iter().enumerate() {
            let id = id as u32;
            let kind = types.get(id as usize).copied().unwrap_or(1);
            ids.entry(text.clone()).or_insert(id);
            match kind {
                6 => {
                    if let Some(b) = byte_token(text) {
                        bytes[b as usize].get_or_insert(id);
                    }
                }
                2..=4 => {
                    if kind == 2 {
                        unknown.get_or_insert(id);
                    }
                    if let Some(&b) = text.as_bytes().first() {
                        specials[b as usize].push((text.clone(), id));
                    }
                }
                _ => {}
            }
        }
        for s in &mut specials {
            s.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        }
        Spm {
            ids,
            scores,
            bytes,
            specials,
            add_space_prefix,
            unknown,
        }
    }

    /// The tokens of `text`; special tokens written out become their ids.
    /// `prefix`: add the space prefix where the vocabulary asks for it
    /// (a prompt; not a fragment llguidance asks about, whose tokens must
    /// spell exactly its bytes).
    pub fn encode(&self, text: &str, prefix: bool) -> Vec<u32> {
        let mut out = Vec::new();
        let mut after_special = true;
        let mut rest = text;
        while !rest.is_empty() {
            let (raw, special) = self.next_special(rest);
            if !raw.is_empty() {
                let mut piece = String::with_capacity(raw.len() + 3);
                if prefix && self.add_space_prefix && after_special {
                    piece.push(' ');
                }
                piece.push_str(raw);
                self.encode_raw(&piece.replace(' ', "\u{2581}"), &mut out);
                after_special = false;
            }
            rest = &rest[raw.len()..];
            if let Some((len, id)) = special {
                out.push(id);
                rest = &rest[len..];
                after_special = true;
            }
        }
        out
    }

    /// The text before the first special token of `text`, and that
    /// token's length and id.
    fn next_special<'t>(&self, text: &'t str) -> (&'t str, Option<(usize, u32)>) {
        for (at, &b) in text.as_bytes().iter().enumerate() {
            let tail = &text.as_bytes()[at..];
            let mut candidates = self.specials[b as usize].iter();
            if let Some((s, id)) = candidates.find(|(s, _)| tail.starts_with(s.as_bytes())) {
                // A token's text starts on a character boundary.
                return (&text[..at], Some((s.len(), *id)));
            }
        }
        (text, None)
    }

    fn encode_raw(&self, text: &str, out: &mut Vec<u32>) {
        // Symbols: character spans, linked left and right; a merged
        // symbol grows and its right neighbour empties.
        let mut starts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        let n = starts.len();
        starts.push(text.len());
        let mut len: Vec<usize> = (0..n).map(|i| starts[i + 1] - starts[i]).collect();
        let mut prev: Vec<Option<usize>> = (0..n).map(|i| i.checked_sub(1)).collect();
        let mut next: Vec<Option<usize>> = (0..n).map(|i| (i + 1 < n).then_some(i + 1)).collect();
        let mut queue = BinaryHeap::new();
        let bigram = |left: usize, size: usize| -> Option<Bigram> {
            let id = self.ids.get(&text[starts[left]..starts[left] + size])?;
            Some(Bigram {
                score: self.scores.get(*id as usize).copied().unwrap_or(0.0),
                left,
                size,
            })
        };
        for i in 1..n {
            queue.extend(bigram(i - 1, len[i - 1] + len[i]));
        }
        while let Some(b) = queue.pop() {
            let Some(right) = next[b.left] else { continue };
            if len[b.left] == 0 || len[right] == 0 || len[b.left] + len[right] != b.size {
                continue; // Stale: a symbol changed since it was queued.
            }
            len[b.left] += len[right];
            len[right] = 0;
            next[b.left] = next[right];
            if let Some(r) = next[right] {
                prev[r] = Some(b.left);
            }
            if let Some(p) = prev[b.left] {
                queue.extend(bigram(p, len[p] + len[b.left]));
            }
            if let Some(r) = next[b.left] {
                queue.extend(bigram(b.left, len[b.left] + len[r]));
            }
        }
        let mut at = (n > 0).then_some(0);
        while let Some(i) = at {
            let piece = &text[starts[i]..starts[i] + len[i]];
            match self.ids.get(piece) {
                Some(&id) => out.push(id),
                None => {
                    for b in piece.bytes() {
                        out.extend(self.bytes[b as usize].or(self.unknown));
                    }
                }
            }
            at = next[i];
        }
    }
}

/// The byte a `<0xAB>` token stands for.
pub fn byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

/// A candidate merge: the symbol at `left` with its right neighbour,
/// `size` bytes together, whose token scores `score`.
struct Bigram {
    score: f32,
    left: usize,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    /// The highest score first; among equals, the leftmost.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.left.cmp(&self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::Spm;

    fn vocab(add_space_prefix: bool) -> Spm {
        let mut texts: Vec<String> = vec!["<unk>".into(), "<s>".into(), "<eot>".into()];
        let mut types = vec![2, 3, 3];
        for b in 0..=255u8 {
            texts.push(format!("<0x{b:02X}>"));
            types.push(6);
        }
        let pieces = ["▁", "a", "b", "c", "ab", "bc", "abc", "▁a", "▁ab"];
        for p in pieces {
            texts.push(p.into());
            types.push(1);
        }
        // "ab" and "bc" tie; "abc" scores highest.
        let mut scores = vec![0.0; texts.len()];
        let at = |p: &str| texts.iter().position(|t| t == p).unwrap();
        scores[at("ab")] = -1.0;
        scores[at("bc")] = -1.0;
        scores[at("abc")] = 5.0;
        scores[at("▁a")] = -3.0;
        scores[at("▁ab")] = -0.5;
        for p in ["▁", "a", "b", "c"] {
            scores[at(p)] = -10.0;
        }
        Spm::new(&texts, scores, &types, add_space_prefix)
    }

    fn id(spm: &Spm, t: &str) -> u32 {
        spm.ids[t]
    }

    #[test]
    fn merges_go_by_score_then_leftmost_and_bytes_fill_the_gaps() {
        let spm = vocab(false);
        // "ab" and "bc" tie: the leftmost ("ab") merges; "abc" needs
        // "ab"+"c", which is in the vocabulary.
        assert_eq!(spm.encode("abc", true), vec![id(&spm, "abc")]);
        assert_eq!(
            spm.encode("bcab", true),
            vec![id(&spm, "bc"), id(&spm, "ab")]
        );
        // é is no piece: its two UTF-8 bytes.
        assert_eq!(
            spm.encode("aé", true),
            vec![id(&spm, "a"), id(&spm, "<0xC3>"), id(&spm, "<0xA9>")]
        );
        // Special tokens are matched in the raw text.
        assert_eq!(spm.encode("<s>ab<eot>", true), vec![1, id(&spm, "ab"), 2]);
    }

    #[test]
    fn the_space_prefix_goes_before_the_text_and_after_each_special_token() {
        let spm = vocab(true);
        let space_ab = id(&spm, "▁ab");
        assert_eq!(spm.encode("ab", true), vec![space_ab]);
        assert_eq!(spm.encode("<s>ab", true), vec![1, space_ab]);
        // Not for a fragment llguidance asks about.
        assert_eq!(spm.encode("ab", false), vec![id(&spm, "ab")]);
    }
}
