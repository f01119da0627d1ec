//! What runs give the designer to learn from (`serl llm pairs`): the
//! preference pairs of each kind and the SFT examples, per module.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use serl_report::Table;

use crate::pairs::{Pair, PairKind, SftExample};

/// One module's counts (or all modules').
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Count {
    /// Pairs of each kind of [`PairKind::ALL`], in its order.
    kinds: [usize; PairKind::ALL.len()],
    /// SFT examples.
    sft: usize,
}

impl Count {
    fn pairs(&self) -> usize {
        self.kinds.iter().sum()
    }

    /// Every kind, their sum (`pairs`) and the SFT examples (`sft`): the
    /// table's columns, the same names.
    fn json(&self) -> Value {
        let mut r: Map<String, Value> = PairKind::ALL
            .iter()
            .zip(self.kinds)
            .map(|(kind, n)| (kind.name().to_string(), n.into()))
            .collect();
        r.insert("pairs".into(), self.pairs().into());
        r.insert("sft".into(), self.sft.into());
        Value::Object(r)
    }

    fn cells(&self, name: &str) -> Vec<String> {
        let mut cells = vec![name.to_string()];
        cells.extend(self.kinds.iter().map(usize::to_string));
        cells.extend([self.pairs().to_string(), self.sft.to_string()]);
        cells
    }
}

/// Pairs and SFT examples per module, over the runs added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PairCounts {
    modules: BTreeMap<&'static str, Count>,
    total: Count,
}

impl PairCounts {
    /// Counts one run's pairs and examples ([`crate::read_run_pairs`]).
    pub fn add(&mut self, pairs: &[Pair], sft: &[SftExample]) {
        for p in pairs {
            let k = PairKind::ALL.iter().position(|&k| k == p.kind).unwrap_or(0);
            self.modules.entry(p.module.name()).or_default().kinds[k] += 1;
            self.total.kinds[k] += 1;
        }
        for s in sft {
            self.modules.entry(s.module.name()).or_default().sft += 1;
            self.total.sft += 1;
        }
    }

    /// `{"modules": {module: counts}, "total": counts}`.
    pub fn json(&self) -> Value {
        let modules: Map<String, Value> = self
            .modules
            .iter()
            .map(|(m, c)| (m.to_string(), c.json()))
            .collect();
        serde_json::json!({"modules": modules, "total": self.total.json()})
    }

    /// A row per module and one for all of them.
    pub fn table(&self) -> Table {
        let mut t = Table::new(
            ["module"]
                .into_iter()
                .chain(PairKind::ALL.map(PairKind::name))
                .chain(["pairs", "SFT examples"]),
        );
        for (m, c) in &self.modules {
            t.row(c.cells(m));
        }
        t.row(self.total.cells("all"));
        t
    }
}
