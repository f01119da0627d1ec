//! The program database in the evolve report (`[evolve.search]`): each
//! round's operators and how many of their designs were valid, how stable
//! each round's winner was across day-blocked folds, the best design's
//! ancestry, and the lineage chart (which design came from which, by
//! operator).

use std::collections::HashMap;
use std::fmt::Write;

use serl_report::Table;

use crate::database::Database;
use crate::record::{best_of, CandidateResult, Operator};

/// The colour of each operator in the lineage chart.
fn colour(op: Operator) -> &'static str {
    match op {
        Operator::Fresh => "#1f77b4",
        Operator::Mutate => "#2ca02c",
        Operator::Crossover => "#9467bd",
        Operator::Builtin => "#ff7f0e",
        Operator::Tune => "#7f7f7f",
    }
}

/// The report's section on the database, and the lineage chart's SVG.
pub(crate) fn section(md: &mut String, db: &Database, all: &[CandidateResult]) -> Option<String> {
    let _ = writeln!(
        md,
        "## Program database\n\n{} designs in {} islands, {} migrations. Every design is scored by its daily edge over plain PPO on the validation days; the search ranks by the edge's lower bound (`search/database.json`, docs/evolve.md).\n",
        db.programs.len(),
        db.islands.len(),
        db.migrations.len()
    );
    let mut t = Table::new([
        "round",
        "operators (valid/written)",
        "winner",
        "fold winners",
        "agreement",
    ])
    .right([0, 4]);
    for r in &db.rounds {
        let ops: Vec<String> = r
            .operators
            .iter()
            .map(|(op, (n, v))| format!("{op} {v}/{n}"))
            .collect();
        let (winner, folds, agree) = match &r.stability {
            Some(s) => (
                s.winner.clone(),
                s.fold_winners.join(", "),
                format!("{:.0}%", 100.0 * s.agreement),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        t.row([r.round.to_string(), ops.join(", "), winner, folds, agree]);
    }
    md.push_str(&t.markdown());
    md.push_str("\n*Agreement*: the share of day-blocked folds on which the round's winner would also have been chosen. A low share means the round's ranking rests on a few days.\n\n");
    if let Some(best) = best_of(all) {
        let _ = writeln!(
            md,
            "Ancestry of the chosen design: {}\n",
            ancestry(db, &best.key)
        );
    }
    let svg = lineage_svg(db, all)?;
    md.push_str("![Lineage: which design came from which, by operator](lineage.svg)\n\n");
    Some(svg)
}

/// `key` ← its first parent ← … back to a design with none, with the
/// operator that made each.
fn ancestry(db: &Database, key: &str) -> String {
    let by_key: HashMap<&str, &crate::database::Program> =
        db.programs.iter().map(|p| (p.key.as_str(), p)).collect();
    let mut chain = Vec::new();
    let mut at = Some(key.to_string());
    while let Some(k) = at.take() {
        let Some(p) = by_key.get(k.as_str()) else {
            chain.push(k);
            break;
        };
        chain.push(format!("{k} ({})", p.lineage.operator.name()));
        if chain.len() < 50 {
            at = p.lineage.parents.first().cloned();
        }
    }
    chain.join(" ← ")
}

/// The lineage chart: a design per dot (its round across, its selection
/// score up; invalid designs at the bottom, hollow), a line from each
/// parent to its child, coloured by the operator that made the child.
fn lineage_svg(db: &Database, all: &[CandidateResult]) -> Option<String> {
    if db.programs.is_empty() {
        return None;
    }
    let (w, h, pad) = (760.0, 380.0, 50.0);
    let scores: Vec<f64> = db.programs.iter().filter_map(|p| p.score).collect();
    let lo = scores.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() {
        (lo, hi.max(lo + 1e-9))
    } else {
        (0.0, 1.0)
    };
    let rounds = db.programs.iter().map(|p| p.iteration).max().unwrap_or(0) + 1;
    // Designs of a round spread a little apart so that they do not overlap.
    let mut within: HashMap<usize, usize> = HashMap::new();
    let mut at: HashMap<&str, (f64, f64)> = HashMap::new();
    for p in &db.programs {
        let i = within.entry(p.iteration).or_default();
        let x = pad
            + (w - 2.0 * pad) * (p.iteration as f64 + 0.2 + 0.6 * (*i % 12) as f64 / 12.0)
                / rounds as f64;
        *i += 1;
        let y = match p.score {
            Some(s) => h - pad - (h - 2.0 * pad - 20.0) * (s - lo) / (hi - lo) - 20.0,
            None => h - pad,
        };
        at.insert(&p.key, (x, y));
    }
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        svg,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="14">Lineage: designs by round and score, lines from parent to child</text>"#,
        w / 2.0
    );
    for p in &db.programs {
        let Some(&(x, y)) = at.get(p.key.as_str()) else {
            continue;
        };
        for parent in &p.lineage.parents {
            if let Some(&(px, py)) = at.get(parent.as_str()) {
                let _ = write!(
                    svg,
                    r#"<line x1="{px:.1}" y1="{py:.1}" x2="{x:.1}" y2="{y:.1}" stroke="{}" stroke-opacity="0.6"/>"#,
                    colour(p.lineage.operator)
                );
            }
        }
    }
    for p in &db.programs {
        let Some(&(x, y)) = at.get(p.key.as_str()) else {
            continue;
        };
        let c = colour(p.lineage.operator);
        let fill = if p.valid { c } else { "white" };
        let score = all
            .iter()
            .find(|c| c.key == p.key)
            .and_then(CandidateResult::selection_score)
            .map_or("invalid".to_string(), |s| format!("{s:.3}"));
        let _ = write!(
            svg,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{fill}" stroke="{c}"><title>{} ({}): {score}</title></circle>"#,
            p.key,
            p.lineage.operator.name()
        );
    }
    for (i, op) in [
        Operator::Fresh,
        Operator::Mutate,
        Operator::Crossover,
        Operator::Builtin,
        Operator::Tune,
    ]
    .into_iter()
    .enumerate()
    {
        let x = pad + 110.0 * i as f64;
        let _ = write!(
            svg,
            r#"<circle cx="{x}" cy="{}" r="4" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            h - 12.0,
            colour(op),
            x + 8.0,
            h - 8.0,
            op.name()
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="end">round 1 … {rounds} →; score ↑ ({lo:.2} to {hi:.2}); hollow: invalid</text></svg>"#,
        w - 10.0,
        h - 8.0
    );
    Some(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Lineage;

    #[test]
    fn the_section_tabulates_rounds_and_draws_an_edge_per_parent() {
        let mut db = Database::new(1);
        let mut a = CandidateResult::invalid("i0_c0".into(), 0, 1.0);
        a.design = Some(serl_design::Design::baseline());
        a.score = Some(1.0);
        a.validation = Some(Default::default());
        let mut b = a.clone();
        b.key = "i1_c0".into();
        b.iteration = 1;
        b.score = Some(2.0);
        let all = vec![a.clone(), b.clone()];
        let train = serl_train::TrainConfig::default();
        let fresh = Lineage {
            operator: Operator::Fresh,
            parents: vec![],
            island: 0,
            module: None,
        };
        db.add(&a, fresh, &train, &all);
        let child = Lineage {
            operator: Operator::Mutate,
            parents: vec!["i0_c0".into()],
            island: 0,
            module: Some(serl_design::ModuleKind::Reward),
        };
        db.add(&b, child, &train, &all);
        let mut md = String::new();
        let svg = section(&mut md, &db, &all).unwrap();
        assert_eq!(svg.matches("<line").count(), 1, "{svg}");
        assert_eq!(
            svg.matches("<circle").count(),
            2 + 5,
            "two designs and the legend"
        );
        assert!(md.contains("i1_c0 (mutate) ← i0_c0 (fresh)"), "{md}");
    }
}
