//! What the designer can learn from a run (`serl llm pairs`, `serl llm
//! finetune`, `[evolve.finetune]`): preference pairs and SFT examples
//! read from the candidates' records. Every text is the model's reply as
//! it wrote it (the format it is asked for), every prompt the module's
//! first prompt (the one user message the designer sent).
//!
//! - **better**: two designs' replies to the same prompt, the one of the
//!   design that scored higher chosen (each prompt's best against every
//!   worse one);
//! - **valid**: a reply the validator refused, against the accepted reply
//!   of the same module (the refusal's reason kept);
//! - **mutation**: a mutated design that scored higher than its parent:
//!   its reply chosen over the parent's module on the mutation's prompt
//!   (the reply that wrote it: an ancestor's, where the parent kept the
//!   module as it was).
//!
//! Scores are what the run ranks by ([`CandidateResult::selection_score`]);
//! modules a design inherited are nobody's reply to its prompt and give
//! nothing. `serl evolve` writes them to `finetune/` (`report.rs`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serl_design::ModuleKind;

use crate::error::{file_err, EvolveError};
use crate::record::{CandidateKind, CandidateResult, ModuleRecord, Operator};

/// Why a pair prefers its chosen reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairKind {
    /// The chosen reply's design scored higher on the same prompt.
    Better,
    /// The rejected reply did not validate.
    Valid,
    /// A mutation that beat its parent, over the parent's module.
    Mutation,
}

impl PairKind {
    /// Every kind, in the order tables list them.
    pub const ALL: [PairKind; 3] = [PairKind::Better, PairKind::Valid, PairKind::Mutation];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            PairKind::Better => "better",
            PairKind::Valid => "valid",
            PairKind::Mutation => "mutation",
        }
    }
}

/// A preference: on `prompt`, `chosen` rather than `rejected`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// Why.
    pub kind: PairKind,
    /// The module asked for.
    pub module: ModuleKind,
    /// The user message.
    pub prompt: String,
    /// The reply to prefer.
    pub chosen: String,
    /// The reply to avoid.
    pub rejected: String,
    /// `valid`: the validator's reason for refusing `rejected`.
    pub reason: Option<String>,
    /// The chosen reply's design's score.
    pub score_chosen: Option<f64>,
    /// The rejected reply's design's score.
    pub score_rejected: Option<f64>,
    /// The candidate(s) it comes from (`key` or `key>key`).
    pub source: String,
}

/// A reply to imitate: the best-scored accepted reply of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SftExample {
    /// The module asked for.
    pub module: ModuleKind,
    /// The user message.
    pub prompt: String,
    /// The reply.
    pub reply: String,
    /// Its design's score.
    pub score: Option<f64>,
    /// The candidate it comes from.
    pub source: String,
}

impl Pair {
    /// The record DPO and ORPO trainers read (TRL's preference format,
    /// `finetune/dpo.jsonl`): the pair without its kind, kept so that
    /// outside scripts written for earlier runs still read it.
    pub(crate) fn dpo_record(&self) -> serde_json::Value {
        serde_json::json!({
            "prompt": self.prompt,
            "chosen": self.chosen,
            "rejected": self.rejected,
            "score_chosen": self.score_chosen,
            "score_rejected": self.score_rejected,
        })
    }
}

impl SftExample {
    /// The chat record SFT trainers read (`finetune/sft.jsonl`): the
    /// user message and the reply, with its design's score.
    pub(crate) fn chat_record(&self) -> serde_json::Value {
        serde_json::json!({
            "messages": [
                {"role": "user", "content": self.prompt},
                {"role": "assistant", "content": self.reply},
            ],
            "score": self.score,
        })
    }
}

/// The accepted reply of a module the designer wrote itself.
fn accepted(m: &ModuleRecord) -> Option<&str> {
    if m.inherited_from.is_some() || m.text.is_none() {
        return None;
    }
    m.replies
        .last()
        .map(String::as_str)
        .filter(|r| !r.trim().is_empty())
}

/// Designed candidates' own modules, with their candidates, in iteration
/// and key order whatever the order of `all` (the pairs come out the same
/// from a run however its records were listed).
fn own_modules(all: &[CandidateResult]) -> impl Iterator<Item = (&CandidateResult, &ModuleRecord)> {
    let mut designed: Vec<&CandidateResult> = all
        .iter()
        .filter(|c| c.kind() == CandidateKind::Designed)
        .collect();
    designed.sort_by(|a, b| (a.iteration, &a.key).cmp(&(b.iteration, &b.key)));
    designed
        .into_iter()
        .flat_map(|c| c.modules.iter().map(move |m| (c, m)))
        .filter(|(_, m)| m.inherited_from.is_none() && !m.prompt.is_empty())
}

/// A reply with its design's score and key.
type Scored<'a> = (f64, &'a str, &'a str);

/// Scored accepted replies grouped by (module, prompt), best first.
fn by_prompt(all: &[CandidateResult]) -> Vec<((ModuleKind, &str), Vec<Scored<'_>>)> {
    let mut groups: BTreeMap<(&str, &str), (ModuleKind, Vec<Scored<'_>>)> = BTreeMap::new();
    for (c, m) in own_modules(all) {
        if let (Some(reply), Some(score)) = (accepted(m), c.selection_score()) {
            groups
                .entry((m.kind.name(), m.prompt.as_str()))
                .or_insert_with(|| (m.kind, Vec::new()))
                .1
                .push((score, reply, c.key.as_str()));
        }
    }
    groups
        .into_iter()
        .map(|((_, prompt), (kind, mut g))| {
            g.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.2.cmp(b.2)));
            ((kind, prompt), g)
        })
        .collect()
}

/// Every pair of the three kinds in `all`, in a fixed order: better
/// (by module and prompt, best first), valid, mutation.
pub fn pairs_from_candidates(all: &[CandidateResult]) -> Vec<Pair> {
    let mut out = Vec::new();
    for ((module, prompt), g) in by_prompt(all) {
        let Some(&(best, chosen, key)) = g.first() else {
            continue;
        };
        for &(score, rejected, other) in &g[1..] {
            if score < best && rejected != chosen {
                out.push(Pair {
                    kind: PairKind::Better,
                    module,
                    prompt: prompt.to_string(),
                    chosen: chosen.to_string(),
                    rejected: rejected.to_string(),
                    reason: None,
                    score_chosen: Some(best),
                    score_rejected: Some(score),
                    source: format!("{key}>{other}"),
                });
            }
        }
    }
    out.extend(refusals(all));
    out.extend(mutations(all));
    out
}

/// Each reply the validator refused against the accepted reply of the
/// same module. `generate` (serl-llm) records one reply per attempt and
/// stops at the first accepted one, so the accepted reply is the last
/// and `errors[i]` is why `replies[i]` was refused.
fn refusals(all: &[CandidateResult]) -> Vec<Pair> {
    let mut out = Vec::new();
    for (c, m) in own_modules(all) {
        let Some(chosen) = accepted(m) else { continue };
        let failed = &m.replies[..m.replies.len() - 1];
        for (reply, reason) in failed.iter().zip(&m.errors) {
            // An empty reply is a request that failed, not the model's.
            if reply.trim().is_empty() || reply == chosen {
                continue;
            }
            out.push(Pair {
                kind: PairKind::Valid,
                module: m.kind,
                prompt: m.prompt.clone(),
                chosen: chosen.to_string(),
                rejected: reply.clone(),
                reason: Some(reason.clone()),
                score_chosen: c.selection_score(),
                score_rejected: None,
                source: c.key.clone(),
            });
        }
    }
    out
}

/// Mutations that scored higher than their parent, over the parent's
/// module of the kind the mutation rewrote.
fn mutations(all: &[CandidateResult]) -> Vec<Pair> {
    let by_key: BTreeMap<&str, &CandidateResult> =
        all.iter().map(|c| (c.key.as_str(), c)).collect();
    let mut out = Vec::new();
    for (c, m) in own_modules(all) {
        let Some(l) = c
            .lineage
            .as_ref()
            .filter(|l| l.operator == Operator::Mutate)
        else {
            continue;
        };
        let (Some(chosen), Some(score)) = (accepted(m), c.selection_score()) else {
            continue;
        };
        let Some(parent) = l.parents.first().and_then(|k| by_key.get(k.as_str())) else {
            continue;
        };
        let Some(parent_score) = parent.selection_score().filter(|&p| p < score) else {
            continue;
        };
        let rejected = written_reply(&by_key, parent, m.kind).filter(|r| *r != chosen);
        if let Some(rejected) = rejected {
            out.push(Pair {
                kind: PairKind::Mutation,
                module: m.kind,
                prompt: m.prompt.clone(),
                chosen: chosen.to_string(),
                rejected: rejected.to_string(),
                reason: None,
                score_chosen: Some(score),
                score_rejected: Some(parent_score),
                source: format!("{}>{}", c.key, parent.key),
            });
        }
    }
    out
}

/// The reply that wrote `c`'s module of `kind`: its own or, where `c`
/// took the module as it was from a parent (the modules a mutation did
/// not rewrite), the ancestor's that wrote it, so that a mutation of a
/// mutation is still compared with what the model wrote. The walk stops
/// after as many steps as there are candidates (no cycle runs forever).
fn written_reply<'a>(
    by_key: &BTreeMap<&str, &'a CandidateResult>,
    mut c: &'a CandidateResult,
    kind: ModuleKind,
) -> Option<&'a str> {
    for _ in 0..=by_key.len() {
        let m = c.modules.iter().find(|m| m.kind == kind)?;
        match &m.inherited_from {
            None => return accepted(m),
            Some(from) => c = by_key.get(from.as_str())?,
        }
    }
    None
}

/// Each prompt's best-scored accepted reply.
pub fn sft_from_candidates(all: &[CandidateResult]) -> Vec<SftExample> {
    by_prompt(all)
        .into_iter()
        .filter_map(|((module, prompt), g)| {
            let &(score, reply, key) = g.first()?;
            Some(SftExample {
                module,
                prompt: prompt.to_string(),
                reply: reply.to_string(),
                score: Some(score),
                source: key.to_string(),
            })
        })
        .collect()
}

/// The pairs and SFT examples of the run in `run_dir` (its
/// `candidates/*.json`, the records `--resume` reads), sources prefixed
/// with the directory so that pairs of several runs stay traceable.
pub fn read_run_pairs(run_dir: &Path) -> Result<(Vec<Pair>, Vec<SftExample>), EvolveError> {
    let all = read_candidates(run_dir)?;
    let tag = run_dir.display().to_string();
    let mut pairs = pairs_from_candidates(&all);
    for p in &mut pairs {
        p.source = format!("{tag}:{}", p.source);
    }
    let mut sft = sft_from_candidates(&all);
    for s in &mut sft {
        s.source = format!("{tag}:{}", s.source);
    }
    Ok((pairs, sft))
}

/// Every candidate record of the run in `run_dir`, in iteration and key
/// order; none at all is an error, since a directory without them is not
/// an evolve run (or one that designed nothing yet).
fn read_candidates(run_dir: &Path) -> Result<Vec<CandidateResult>, EvolveError> {
    let dir = run_dir.join("candidates");
    let not_a_run = |why: String| EvolveError::File {
        path: dir.display().to_string(),
        message: format!("{why}; give the directory of an evolve run"),
    };
    let entries =
        std::fs::read_dir(&dir).map_err(|e| not_a_run(format!("no candidate records ({e})")))?;
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    if paths.is_empty() {
        return Err(not_a_run("no candidate records (`<key>.json`)".into()));
    }
    paths.sort();
    let mut all = Vec::with_capacity(paths.len());
    for p in paths {
        let text = std::fs::read_to_string(&p).map_err(|e| file_err(&p, e))?;
        all.push(serde_json::from_str::<CandidateResult>(&text).map_err(|e| file_err(&p, e))?);
    }
    all.sort_by(|a, b| a.iteration.cmp(&b.iteration).then(a.key.cmp(&b.key)));
    Ok(all)
}

#[cfg(test)]
#[path = "pairs_tests.rs"]
mod tests;
