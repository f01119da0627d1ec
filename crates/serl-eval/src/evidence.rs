//! The evidence file: every strategy's mean PA per stock and day on the
//! days a choice was made on, one row each, in one Parquet file, so that
//! any statistic of the choice can be computed again from it alone.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::NaiveDate;
use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::metrics::OrderResult;
use crate::selection::DayMatrix;

/// One strategy's PA on one stock on one day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceRow {
    /// The strategy: a candidate's key, `ppo-default`, `twap`, ...
    pub name: String,
    /// What it is: `candidate`, `plain` (the reference) or `baseline`.
    pub role: String,
    /// The session.
    pub date: NaiveDate,
    /// The stock (empty where only the day's mean was kept).
    pub symbol: String,
    /// Mean whole-order PA of its orders that stock-day, bps.
    pub pa_bps: f64,
    /// Orders behind the mean.
    pub orders: u64,
}

/// `rows` (one strategy's orders) as evidence rows: a mean per stock-day.
pub fn stock_day_rows(name: &str, role: &str, rows: &[OrderResult]) -> Vec<EvidenceRow> {
    let mut by: BTreeMap<(NaiveDate, &str), (f64, u64)> = BTreeMap::new();
    for r in rows {
        let e = by.entry((r.date, r.symbol.as_str())).or_default();
        e.0 += r.pa_bps;
        e.1 += 1;
    }
    by.into_iter()
        .map(|((date, symbol), (sum, n))| EvidenceRow {
            name: name.to_string(),
            role: role.to_string(),
            date,
            symbol: symbol.to_string(),
            pa_bps: sum / n as f64,
            orders: n,
        })
        .collect()
}

/// Each strategy's mean PA per day (its stock-days weighted by their
/// orders, so the mean of the day's orders), by name then date.
pub fn day_means(rows: &[EvidenceRow]) -> BTreeMap<String, BTreeMap<NaiveDate, f64>> {
    let mut acc: BTreeMap<String, BTreeMap<NaiveDate, (f64, u64)>> = BTreeMap::new();
    for r in rows {
        let e = acc
            .entry(r.name.clone())
            .or_default()
            .entry(r.date)
            .or_default();
        e.0 += r.pa_bps * r.orders as f64;
        e.1 += r.orders;
    }
    acc.into_iter()
        .map(|(name, days)| {
            let days = days
                .into_iter()
                .map(|(d, (s, n))| (d, s / n.max(1) as f64))
                .collect();
            (name, days)
        })
        .collect()
}

/// The names of `role`'s rows, sorted, each once.
pub fn names_with_role(rows: &[EvidenceRow], role: &str) -> Vec<String> {
    let mut names: Vec<String> = rows
        .iter()
        .filter(|r| r.role == role)
        .map(|r| r.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The name of the first of `role`'s rows (a reference's, whose rows all
/// share one name), if any.
pub fn name_with_role(rows: &[EvidenceRow], role: &str) -> Option<String> {
    rows.iter().find(|r| r.role == role).map(|r| r.name.clone())
}

/// The days × designs matrix of `designs`' daily differences from
/// `reference`, on the days every one of them and the reference have, in
/// date order. `None` when a name has no rows.
pub fn day_matrix(rows: &[EvidenceRow], designs: &[String], reference: &str) -> Option<DayMatrix> {
    dated_day_matrix(rows, designs, reference).map(|(_, m)| m)
}

/// [`day_matrix`] with the date of each of its days.
pub fn dated_day_matrix(
    rows: &[EvidenceRow],
    designs: &[String],
    reference: &str,
) -> Option<(Vec<NaiveDate>, DayMatrix)> {
    let means = day_means(rows);
    let plain = means.get(reference)?;
    let mut days: Vec<NaiveDate> = plain.keys().copied().collect();
    for d in designs {
        let m = means.get(d)?;
        days.retain(|day| m.contains_key(day));
    }
    let diffs = designs
        .iter()
        .map(|d| days.iter().map(|day| means[d][day] - plain[day]).collect())
        .collect();
    Some((
        days,
        DayMatrix {
            designs: designs.to_vec(),
            diffs,
        },
    ))
}

/// Writes `rows` to `path` as Parquet (columns `name`, `role`, `date`,
/// `symbol`, `pa_bps`, `orders`).
pub fn write_evidence(path: &Path, rows: &[EvidenceRow]) -> std::io::Result<()> {
    let s = |f: &dyn Fn(&EvidenceRow) -> String| rows.iter().map(f).collect::<Vec<String>>();
    let df = DataFrame::new_infer_height(vec![
        Column::new("name".into(), s(&|r| r.name.clone())),
        Column::new("role".into(), s(&|r| r.role.clone())),
        Column::new("date".into(), s(&|r| r.date.to_string())),
        Column::new("symbol".into(), s(&|r| r.symbol.clone())),
        Column::new(
            "pa_bps".into(),
            rows.iter().map(|r| r.pa_bps).collect::<Vec<f64>>(),
        ),
        Column::new(
            "orders".into(),
            rows.iter().map(|r| r.orders).collect::<Vec<u64>>(),
        ),
    ]);
    let mut df = df.map_err(std::io::Error::other)?;
    // Written whole to a temporary file, then renamed: a killed run never
    // leaves half a file.
    let tmp = path.with_extension("parquet.tmp");
    let file = std::fs::File::create(&tmp)?;
    ParquetWriter::new(file)
        .finish(&mut df)
        .map_err(std::io::Error::other)?;
    std::fs::rename(&tmp, path)
}

/// Reads an evidence file written by [`write_evidence`]; the error names
/// the file and the column or row at fault.
pub fn read_evidence(path: &Path) -> Result<Vec<EvidenceRow>, String> {
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(|e| at(&e))?;
    let df = ParquetReader::new(file)
        .finish()
        .map_err(|e| at(&format!("not a readable Parquet file: {e}")))?;
    let col = |name: &str| {
        df.column(name)
            .map_err(|_| at(&format!("no column `{name}`")))
    };
    let text = |name: &str| -> Result<Vec<String>, String> {
        let c = col(name)?;
        let c = c
            .str()
            .map_err(|_| at(&format!("column `{name}` is not text")))?;
        Ok(c.iter().map(|v| v.unwrap_or("").to_string()).collect())
    };
    let (name, role, date, symbol) = (text("name")?, text("role")?, text("date")?, text("symbol")?);
    let pa = col("pa_bps")?
        .f64()
        .map_err(|_| at(&"column `pa_bps` is not a float"))?
        .iter()
        .collect::<Vec<_>>();
    let orders = col("orders")?
        .u64()
        .map_err(|_| at(&"column `orders` is not an unsigned integer"))?
        .iter()
        .collect::<Vec<_>>();
    (0..df.height())
        .map(|i| {
            let bad = |what: &str| at(&format!("row {i}: {what}"));
            Ok(EvidenceRow {
                name: name[i].clone(),
                role: role[i].clone(),
                date: date[i]
                    .parse()
                    .map_err(|_| bad(&format!("date `{}` is not YYYY-MM-DD", date[i])))?,
                symbol: symbol[i].clone(),
                pa_bps: pa[i].ok_or_else(|| bad("no pa_bps"))?,
                orders: orders[i].ok_or_else(|| bad("no orders"))?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, day: u32, symbol: &str, pa: f64, orders: u64) -> EvidenceRow {
        EvidenceRow {
            name: name.into(),
            role: "candidate".into(),
            date: NaiveDate::from_ymd_opt(2024, 3, day).unwrap(),
            symbol: symbol.into(),
            pa_bps: pa,
            orders,
        }
    }

    #[test]
    fn a_day_is_the_mean_of_its_orders_and_designs_pair_on_shared_days() {
        let rows = vec![
            row("plain", 1, "A", 1.0, 1),
            row("plain", 1, "B", 4.0, 3),
            row("plain", 2, "A", 0.0, 2),
            row("x", 1, "A", 2.0, 2),
            row("x", 1, "B", 5.0, 2),
            row("x", 2, "A", 1.0, 1),
            row("x", 3, "A", 9.0, 1),
        ];
        let m = day_matrix(&rows, &["x".into()], "plain").unwrap();
        // Day 1: plain (1 + 12) / 4 = 3.25, x (4 + 10) / 4 = 3.5.
        assert_eq!(m.diffs, vec![vec![0.25, 1.0]]);
        assert!(day_matrix(&rows, &["y".into()], "plain").is_none());
    }

    #[test]
    fn the_file_reads_back_as_written_and_a_broken_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("evidence.parquet");
        let rows = vec![row("a", 1, "SPY", -1.25, 3), row("b", 2, "", 0.5, 7)];
        write_evidence(&path, &rows).unwrap();
        assert_eq!(read_evidence(&path).unwrap(), rows);
        std::fs::write(&path, b"not parquet").unwrap();
        let e = read_evidence(&path).unwrap_err();
        assert!(
            e.contains("evidence.parquet") && e.contains("Parquet"),
            "{e}"
        );
    }
}
