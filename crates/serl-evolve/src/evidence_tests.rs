//! The recommendation follows the evidence: a real edge among many
//! designs is recommended, the best of many designs of noise is not, and
//! one day recommends nothing but plain PPO.

use chrono::NaiveDate;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

/// Rows for plain PPO and `designs` designs over `days` days of two
/// stocks: every design's daily difference is noise of sd 1, plus `edge`
/// bps for design `d0`.
fn run_rows(designs: usize, days: u32, edge: f64, seed: u64) -> Vec<EvidenceRow> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut rows = Vec::new();
    let date = |t: u32| NaiveDate::from_ymd_opt(2018, 5, 1 + t).unwrap();
    let row = |name: String, role: &str, t: u32, sym: &str, pa: f64| EvidenceRow {
        name,
        role: role.into(),
        date: date(t),
        symbol: sym.into(),
        pa_bps: pa,
        orders: 10,
    };
    for t in 0..days {
        let market = rng.random::<f64>() * 8.0 - 4.0;
        for sym in ["AAA", "BBB"] {
            rows.push(row("plain".into(), PLAIN_ROLE, t, sym, market));
            for k in 0..designs {
                let noise = (rng.random::<f64>() - 0.5) * 12f64.sqrt();
                let lift = if k == 0 { edge } else { 0.0 };
                rows.push(row(
                    format!("d{k}"),
                    "candidate",
                    t,
                    sym,
                    market + lift + noise,
                ));
            }
        }
        rows.push(row("twap".into(), "baseline", t, "AAA", market - 0.5));
    }
    rows
}

fn assessed(rows: &[EvidenceRow], chosen: &str) -> SelectionEvidence {
    let settings = SelectConfig::default();
    assess(
        rows,
        &Assessing {
            chosen,
            settings: &settings,
            seed: 9,
            plain_final: "ppo-default",
            best_final: "serl-best",
        },
    )
}

#[test]
fn a_strong_edge_is_recommended_and_the_best_of_noise_is_not() {
    let strong = assessed(&run_rows(20, 20, 3.0, 1), "d0");
    assert!(strong.recommendation.is_design(), "{strong:#?}");
    assert_eq!(strong.recommendation.recommended, "serl-best");
    assert_eq!((strong.designs, strong.days), (20, 20));
    // No edge: the chosen design is the luckiest of twenty.
    let noise = run_rows(20, 20, 0.0, 2);
    let m = day_matrix(
        &noise,
        &(0..20).map(|k| format!("d{k}")).collect::<Vec<_>>(),
        "plain",
    )
    .unwrap();
    let means = m.means();
    let luckiest = (0..20)
        .max_by(|&a, &b| means[a].total_cmp(&means[b]))
        .unwrap();
    let e = assessed(&noise, &format!("d{luckiest}"));
    assert!(!e.recommendation.is_design(), "{e:#?}");
    assert_eq!(e.recommendation.recommended, "ppo-default");
    assert!(
        e.recommendation.reason.contains("Reality Check p ="),
        "{}",
        e.recommendation.reason
    );
    // Its lead is about what noise alone gives the best of twenty.
    let (lead, noise_edge) = (e.chosen_edge.unwrap(), e.noise_edge.unwrap());
    assert!(
        lead > 0.0 && lead < 3.0 * noise_edge,
        "{lead} vs {noise_edge}"
    );
    assert!(e.pbo.is_some() && e.deflated_sharpe.is_some());
}

#[test]
fn one_validation_day_recommends_plain_ppo_and_says_why() {
    let e = assessed(&run_rows(5, 1, 10.0, 3), "d0");
    assert!(!e.recommendation.is_design());
    assert!(
        e.recommendation
            .reason
            .contains("1 validation day cannot tell"),
        "{}",
        e.recommendation.reason
    );
    assert!(e.sigma_d.is_none() && e.spa.is_none() && e.pbo.is_none());
}

#[test]
fn the_evidence_file_gives_the_same_figures_again() {
    let dir = tempfile::tempdir().unwrap();
    let rows = run_rows(8, 10, 1.0, 4);
    let e = assessed(&rows, "d3");
    std::fs::create_dir_all(dir.path().join("final/ppo-default")).unwrap();
    write(dir.path(), &rows, &e).unwrap();
    let (again, read) = recompute(dir.path()).unwrap();
    assert_eq!(read, rows);
    assert_eq!(again, e);
    let link = std::fs::read_link(dir.path().join("final/recommended")).unwrap();
    assert_eq!(link, std::path::Path::new(&e.recommendation.recommended));
    // Written twice (a resumed run), the link is replaced, not an error.
    write(dir.path(), &rows, &e).unwrap();
    let missing = recompute(&dir.path().join("nowhere"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("evidence.json"), "{missing}");
}

#[test]
fn settings_out_of_range_are_named() {
    let bad = SelectConfig {
        alpha: 1.5,
        ..SelectConfig::default()
    };
    assert!(bad.validate().unwrap_err().contains("alpha"));
    let bad = SelectConfig {
        reps: 0,
        ..SelectConfig::default()
    };
    assert!(bad.validate().unwrap_err().contains("reps"));
    SelectConfig::default().validate().unwrap();
}

#[test]
fn a_lead_that_does_not_survive_a_fresh_seed_is_not_recommended() {
    let mut rows = run_rows(20, 20, 3.0, 1);
    // d0 retrained from a fresh seed: plain PPO's days, a little below.
    let again: Vec<EvidenceRow> = rows
        .iter()
        .filter(|r| r.role == PLAIN_ROLE)
        .map(|r| EvidenceRow {
            name: format!("{RESCORE_PREFIX}d0"),
            role: RESCORED_ROLE.into(),
            pa_bps: r.pa_bps - 0.25,
            ..r.clone()
        })
        .collect();
    rows.extend(again);
    let e = assessed(&rows, "d0");
    assert_eq!(
        e.designs, 20,
        "a re-scored finalist is no design of its own"
    );
    assert_eq!(e.finalists.len(), 1);
    let f = &e.finalists[0];
    assert!((f.rescored_edge + 0.25).abs() < 1e-9, "{f:?}");
    let curse = e.winners_curse().unwrap();
    assert!((curse - (f.selection_edge + 0.25)).abs() < 1e-9);
    assert!(!e.recommendation.is_design());
    assert!(
        e.recommendation.reason.contains("did not survive"),
        "{}",
        e.recommendation.reason
    );
}
