//! Each statistic against a value found another way: a closed form, a
//! published table or example, or a brute-force enumeration.

use super::*;

fn matrix(rows: &[&[f64]]) -> DayMatrix {
    DayMatrix {
        designs: (0..rows.len()).map(|k| format!("d{k}")).collect(),
        diffs: rows.iter().map(|r| r.to_vec()).collect(),
    }
}

#[test]
fn the_expected_maximum_of_normals_matches_its_closed_forms_and_tables() {
    let pi = std::f64::consts::PI;
    assert_eq!(expected_max_of_normals(1), 0.0);
    // E[max of 2] = 1/√π, E[max of 3] = 3/(2√π).
    assert!((expected_max_of_normals(2) - 1.0 / pi.sqrt()).abs() < 1e-9);
    assert!((expected_max_of_normals(3) - 1.5 / pi.sqrt()).abs() < 1e-9);
    // Tables of normal order statistics (Harter 1961): 1.16296 for 5,
    // 1.53875 for 10, 2.24907 for 50.
    assert!((expected_max_of_normals(5) - 1.16296).abs() < 1e-5);
    assert!((expected_max_of_normals(10) - 1.53875).abs() < 1e-5);
    assert!((expected_max_of_normals(50) - 2.24907).abs() < 1e-5);
}

#[test]
fn the_noise_edge_and_the_detectable_edge_are_the_issues_figures() {
    // Fifty designs, six days, σ_d = 3.6 bps: noise alone gives the best
    // about +3.3 bps (0.92 σ_d).
    let e = noise_edge(3.6, 50, 6);
    assert!((e - 2.24907 * 3.6 / 6f64.sqrt()).abs() < 1e-4, "{e}");
    // t(0.975, 5) = 2.570582 and t(0.8, 5) = 0.919544 from the tables:
    // 1.425 σ_d on 6 days; t(0.975, 28) = 2.048407, t(0.8, 28) = 0.854679:
    // 0.539 σ_d on 29.
    let six = min_detectable_edge(1.0, 6, 0.05, 0.8).unwrap();
    assert!(
        (six - (2.570582 + 0.919544) / 6f64.sqrt()).abs() < 1e-5,
        "{six}"
    );
    let many = min_detectable_edge(1.0, 29, 0.05, 0.8).unwrap();
    assert!(
        (many - (2.048407 + 0.854679) / 29f64.sqrt()).abs() < 1e-5,
        "{many}"
    );
    assert!(min_detectable_edge(1.0, 1, 0.05, 0.8).is_none());
}

#[test]
fn the_mean_interval_uses_the_t_quantile() {
    // Mean 2, sd 1 over 4 values: t(0.975, 3) = 3.182446, so ±1.591223.
    let (m, lo, hi) = mean_interval(&[1.0, 2.0, 3.0, 2.0], 0.95).unwrap();
    let half = 3.182446 * (2.0f64 / 3.0).sqrt() / 2.0;
    assert!(
        (m - 2.0).abs() < 1e-12 && (hi - m - half).abs() < 1e-5,
        "{lo} {hi}"
    );
    assert!(mean_interval(&[1.0], 0.95).is_none());
}

#[test]
fn sigma_d_is_the_median_of_the_designs_daily_spreads() {
    let m = matrix(&[&[1.0, -1.0], &[2.0, -2.0], &[0.0, 6.0]]);
    // sds: √2, 2√2, 3√2.
    assert!((m.sigma_d().unwrap() - 2.0 * 2f64.sqrt()).abs() < 1e-12);
    assert!(matrix(&[&[1.0]]).sigma_d().is_none());
}

#[test]
fn pbo_is_zero_for_a_design_best_on_every_day_and_one_when_the_lead_always_turns() {
    let steady = matrix(&[&[1.0, 1.0, 1.0, 1.0], &[0.0, 0.0, 0.0, 0.0]]);
    let p = pbo_cscv(&steady, 4).unwrap();
    assert_eq!((p.pbo, p.halvings), (0.0, 6));
    let turning = matrix(&[&[1.0, 0.0], &[0.0, 1.0]]);
    assert_eq!(pbo_cscv(&turning, 2).unwrap().pbo, 1.0);
    assert!(pbo_cscv(&steady, 3).is_none(), "odd blocks");
    assert!(pbo_cscv(&matrix(&[&[1.0, 2.0]]), 2).is_none(), "one design");
}

/// CSCV written the slow way: every bitmask of blocks with half of them
/// set, ranks by sorting.
fn brute_pbo(m: &DayMatrix, s: usize) -> f64 {
    let cut = day_blocks(m.days(), s);
    let n = m.designs.len();
    let (mut overfit, mut total) = (0, 0);
    for mask in 0u32..(1 << s) {
        if mask.count_ones() as usize != s / 2 {
            continue;
        }
        total += 1;
        let avg = |k: usize, inside: bool| {
            let v: Vec<f64> = (0..s)
                .filter(|b| (mask >> b & 1 == 1) == inside)
                .flat_map(|b| cut[b].clone().map(|t| m.diffs[k][t]))
                .collect();
            v.iter().sum::<f64>() / v.len() as f64
        };
        let mut best = 0;
        for k in 1..n {
            if avg(k, true) > avg(best, true) {
                best = k;
            }
        }
        let mut oos: Vec<f64> = (0..n).map(|k| avg(k, false)).collect();
        let mine = oos[best];
        oos.sort_by(f64::total_cmp);
        // No ties in the random matrix: its place in the sorted list.
        let rank = oos.iter().position(|&v| v == mine).unwrap() as f64 + 1.0;
        if rank / (n as f64 + 1.0) <= 0.5 {
            overfit += 1;
        }
    }
    overfit as f64 / total as f64
}

#[test]
fn pbo_matches_a_brute_force_count_on_random_matrices() {
    let mut rng = SmallRng::seed_from_u64(7);
    for (designs, days, s) in [(5, 8, 8), (4, 13, 6), (9, 6, 6), (3, 10, 4)] {
        let rows: Vec<Vec<f64>> = (0..designs)
            .map(|_| (0..days).map(|_| rng.random::<f64>() - 0.5).collect())
            .collect();
        let m = DayMatrix {
            designs: (0..designs).map(|k| k.to_string()).collect(),
            diffs: rows,
        };
        let p = pbo_cscv(&m, s).unwrap();
        assert!((p.pbo - brute_pbo(&m, s)).abs() < 1e-12, "{designs}×{days}");
    }
    assert_eq!(cscv_blocks(6, 16), Some(6));
    assert_eq!(cscv_blocks(29, 16), Some(16));
    assert_eq!(cscv_blocks(7, 16), Some(6));
    assert_eq!(cscv_blocks(1, 16), None);
    let b = day_blocks(7, 3);
    assert_eq!(b, vec![0..3, 3..5, 5..7]);
}

#[test]
fn the_deflated_sharpe_ratio_reproduces_the_papers_example() {
    // Bailey and López de Prado (2014), section 4: SR 2.5 a year over
    // 1,250 days, skewness −3, kurtosis 10, 100 trials whose Sharpe ratios
    // vary by 0.5 a year: DSR 0.9004. Per day over 250 days a year.
    let sr = 2.5 / 250f64.sqrt();
    let dsr = deflated_sharpe(sr, 1250, (-3.0, 10.0), 100, 0.5 / 250.0).unwrap();
    assert!((dsr - 0.9004).abs() < 2e-3, "{dsr}");
    // One trial, normal days: the probabilistic Sharpe ratio against 0.
    let one = deflated_sharpe(0.0, 10, (0.0, 3.0), 1, 0.0).unwrap();
    assert!((one - 0.5).abs() < 1e-12);
    let (sr, skew, kurt) = sharpe_moments(&[1.0, 2.0, 3.0]).unwrap();
    assert!((sr - 2.0).abs() < 1e-12 && skew.abs() < 1e-12);
    assert!((kurt - 1.5).abs() < 1e-12, "{kurt}");
}

/// Every stationary-bootstrap resample of `n` days with its probability:
/// the first day uniform, each next day the following one with
/// probability 1 − q or a uniform day with probability q.
fn every_resample(n: usize, q: f64) -> Vec<(Vec<usize>, f64)> {
    let mut out = vec![];
    for code in 0..n.pow(n as u32) {
        let idx: Vec<usize> = (0..n).map(|t| code / n.pow(t as u32) % n).collect();
        let mut p = 1.0 / n as f64;
        for w in idx.windows(2) {
            let follow = if w[1] == (w[0] + 1) % n { 1.0 - q } else { 0.0 };
            p *= follow + q / n as f64;
        }
        out.push((idx, p));
    }
    out
}

fn sample_sd(x: &[f64]) -> f64 {
    let m = x.iter().sum::<f64>() / x.len() as f64;
    (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64).sqrt()
}

#[test]
fn the_p_values_match_the_exact_bootstrap_distribution_on_a_tiny_case() {
    let m = matrix(&[&[1.5, 0.2, 0.9, -0.4], &[0.3, -0.8, 1.1, 0.1]]);
    let (block, reps) = (2.0, 40_000);
    let spa = spa_test(&m, block, reps, 11).unwrap();
    // The same statistics, written out, over every resample with its
    // probability.
    let (q, n) = (1.0 / block, 4f64);
    let stats: Vec<(f64, f64)> = m
        .diffs
        .iter()
        .map(|r| (r.iter().sum::<f64>() / n, sample_sd(r)))
        .collect();
    let t = stats
        .iter()
        .map(|(d, s)| n.sqrt() * d / s)
        .fold(0.0, f64::max);
    let rc = stats.iter().map(|(d, _)| n.sqrt() * d).fold(0.0, f64::max);
    assert!((spa.statistic - t).abs() < 1e-12);
    assert!((spa.reality_check - rc).abs() < 1e-12);
    let thresh = -(2.0 * n.ln().ln()).sqrt();
    let widen = (n / (n - 1.0)).sqrt();
    let mut exact = [0.0; 3];
    for (idx, p) in every_resample(4, q) {
        let (mut c, mut l, mut w) = (0f64, 0f64, 0f64);
        for (k, (d, s)) in stats.iter().enumerate() {
            let days: Vec<f64> = idx.iter().map(|&i| m.diffs[k][i]).collect();
            let star = days.iter().sum::<f64>() / n;
            let s_star = sample_sd(&days);
            let tee = |centre: f64| match (s_star > 1e-12, star > centre) {
                (true, _) => n.sqrt() * (star - centre) / s_star,
                (false, true) => f64::INFINITY,
                (false, false) => 0.0,
            };
            let centre = if n.sqrt() * d / s >= thresh { *d } else { 0.0 };
            c = c.max(tee(centre));
            l = l.max(tee(d.max(0.0)));
            w = w.max(n.sqrt() * (star - d) * widen);
        }
        exact[0] += p * f64::from(u8::from(c >= t));
        exact[1] += p * f64::from(u8::from(l >= t));
        exact[2] += p * f64::from(u8::from(w >= rc));
    }
    // 40,000 resamples: a standard error under 0.0025.
    let got = [spa.p_consistent, spa.p_lower, spa.p_reality_check];
    for (g, e) in got.iter().zip(exact) {
        assert!((g - e).abs() < 0.01, "{got:?} vs {exact:?}");
    }
    assert_eq!(spa.p_value(), spa.p_reality_check);
    assert_eq!(spa.best.as_deref(), Some("d0"));
}

/// `designs` designs of noise with σ = 1 on `days` days, the first
/// lifted by `edge`.
fn searched(rng: &mut SmallRng, designs: usize, days: usize, edge: f64) -> DayMatrix {
    let mut m = DayMatrix {
        designs: (0..designs).map(|k| k.to_string()).collect(),
        diffs: (0..designs)
            .map(|_| {
                (0..days)
                    .map(|_| (rng.random::<f64>() * 2.0 - 1.0) * 3f64.sqrt())
                    .collect()
            })
            .collect(),
    };
    m.diffs[0].iter_mut().for_each(|v| *v += edge);
    m
}

/// The share of `trials` searches in which the Reality Check rejects at 5%.
fn rejection_rate(designs: usize, days: usize, edge: f64, trials: u64) -> f64 {
    let mut rng = SmallRng::seed_from_u64(designs as u64 * 1000 + days as u64);
    let rejected = (0..trials)
        .filter(|&s| {
            let m = searched(&mut rng, designs, days, edge);
            spa_test(&m, 1.0, 400, s).unwrap().p_value() < 0.05
        })
        .count();
    rejected as f64 / trials as f64
}

#[test]
fn the_reality_check_holds_its_level_on_the_best_of_many_and_finds_a_real_edge() {
    // Pure noise: the best always leads; the test rejects in about 5% of
    // searches (300 each: a standard error of 1.3 points).
    for (designs, days) in [(30, 6), (10, 12), (15, 23)] {
        let rate = rejection_rate(designs, days, 0.0, 300);
        assert!(rate <= 0.08, "{designs} designs on {days} days: {rate}");
    }
    // A one-σ edge among thirty designs: found on 23 days nearly always,
    // on 6 days a fair share of the time.
    assert!(rejection_rate(30, 23, 1.0, 100) > 0.8);
    assert!(rejection_rate(30, 6, 1.0, 200) > 0.15);
    // The same seed gives the same numbers.
    let mut rng = SmallRng::seed_from_u64(5);
    let m = searched(&mut rng, 30, 20, 1.0);
    assert_eq!(spa_test(&m, 1.0, 500, 1), spa_test(&m, 1.0, 500, 1));
    // A design with no spread over the days is left out of the studentized
    // statistics, not divided by 0.
    let flat = matrix(&[&[0.0, 0.0, 0.0], &[1.0, -1.0, 0.5]]);
    assert_eq!(spa_test(&flat, 2.0, 100, 1).unwrap().flat, 1);
}

/// Wilson's interval against values worked by hand from its formula
/// (z = 1.959964): 16 of 20 gives [0.584, 0.919]; 0 of 20 gives
/// [0, 0.161]; 20 of 20 gives [0.839, 1].
#[test]
fn the_wilson_interval_matches_its_worked_values() {
    let close = |a: (f64, f64), b: (f64, f64)| (a.0 - b.0).abs() < 1e-3 && (a.1 - b.1).abs() < 1e-3;
    assert!(
        close(wilson_interval(16, 20, 0.95), (0.5840, 0.9193)),
        "{:?}",
        wilson_interval(16, 20, 0.95)
    );
    assert!(
        close(wilson_interval(0, 20, 0.95), (0.0, 0.1611)),
        "{:?}",
        wilson_interval(0, 20, 0.95)
    );
    assert!(
        close(wilson_interval(20, 20, 0.95), (0.8389, 1.0)),
        "{:?}",
        wilson_interval(20, 20, 0.95)
    );
    assert_eq!(wilson_interval(0, 0, 0.95), (0.0, 1.0));
}

/// The clustered t against a case worked by hand: 9 days in 3 clusters,
/// mean 15/9, the clusters' summed deviations 1, 4 and −5, so the
/// standard error is √(3/2 · 42)/9 and, with 2 degrees of freedom, the
/// one-sided p-value has the closed form 1/2 − t/(2√(2 + t²)).
#[test]
fn the_clustered_t_matches_a_case_worked_by_hand() {
    let diffs = [1.0, 2.0, 3.0, 2.0, 3.0, 4.0, -1.0, 0.0, 1.0];
    let cluster = [0, 0, 0, 1, 1, 1, 2, 2, 2];
    let c = clustered_t_test(&diffs, &cluster).unwrap();
    let se = (1.5f64 * 42.0).sqrt() / 9.0;
    let t = (15.0 / 9.0) / se;
    assert!((c.mean - 15.0 / 9.0).abs() < 1e-12);
    assert!((c.se - se).abs() < 1e-12);
    assert!((c.t - t).abs() < 1e-12);
    assert_eq!(c.clusters, 3);
    let p = 0.5 - t / (2.0 * (2.0 + t * t).sqrt());
    assert!((c.p_value - p).abs() < 1e-9, "{} vs {p}", c.p_value);
    // One cluster cannot be tested; days that all agree on a gain can.
    assert!(clustered_t_test(&[1.0, 2.0], &[0, 0]).is_none());
    assert!(clustered_t_test(&[1.0, 2.0], &[0]).is_none());
    let sure = clustered_t_test(&[1.0, 1.0, 1.0, 1.0], &[0, 0, 1, 1]).unwrap();
    assert_eq!(sure.p_value, 0.0);
}

/// A standard normal draw, for the level checks.
fn normal(rng: &mut SmallRng) -> f64 {
    rng.sample(rand_distr::StandardNormal)
}

/// The folded days as the standard config makes them: 17 days in blocks
/// of 5, 6 and 6, each block's days sharing one draw of training luck
/// (σ = 1) beside the day's own noise (σ = 1), and no edge.
fn folded_noise(rng: &mut SmallRng) -> (Vec<f64>, Vec<usize>) {
    let cluster: Vec<usize> = [5, 6, 6]
        .iter()
        .enumerate()
        .flat_map(|(c, &len)| std::iter::repeat_n(c, len))
        .collect();
    let luck: Vec<f64> = (0..3).map(|_| normal(rng)).collect();
    let diffs = cluster.iter().map(|&c| luck[c] + normal(rng)).collect();
    (diffs, cluster)
}

#[test]
fn the_clustered_t_holds_its_level_where_the_block_bootstrap_does_not() {
    let mut rng = SmallRng::seed_from_u64(17);
    let trials = 2000;
    let (mut clustered, mut bootstrap) = (0, 0);
    for s in 0..trials {
        let (diffs, cluster) = folded_noise(&mut rng);
        clustered += usize::from(clustered_t_test(&diffs, &cluster).unwrap().p_value < 0.05);
        if s < 500 {
            let m = DayMatrix {
                designs: vec!["d".into()],
                diffs: vec![diffs],
            };
            let p = spa_test(&m, 17.0 / 3.0, 400, s).unwrap().p_value();
            bootstrap += usize::from(p < 0.05);
        }
    }
    let clustered = clustered as f64 / trials as f64;
    let bootstrap = bootstrap as f64 / 500.0;
    // 2,000 trials: a standard error of 0.5 points around 5%.
    assert!(
        (0.035..=0.065).contains(&clustered),
        "clustered t: {clustered}"
    );
    // The Reality Check's bootstrap of blocks of 5.7 days over these 17
    // days rejects noise far more often than 5% (measured 0.14–0.19).
    assert!(bootstrap > 0.09, "block bootstrap: {bootstrap}");
}
