//! `serl lob export`: a day as Databento DBN MBO, so that other tools
//! read serl's markets: a LOBSTER day as it is, or a day of a fitted
//! queue-reactive flow simulated whole (every order recorded, as MBO
//! holds the whole book). Either is read back and its book compared with
//! the day's after every message ([`serl_lob::export_mbo`]); on request
//! the day's book is also written as MBP and checked against the book
//! replayed from the MBO file ([`serl_lob::check_mbp`]).

use std::ops::Range;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serl_lob::{
    check_mbp, export_mbo, lobster_name, write_mbp, BookRows, LobsterDayFiles, LobsterRecorder,
    MboExport, MbpCheck, MessageRow, ReplayError, MBO_LEVELS,
};
use serl_market::QueueReactive;

use crate::error::{Context, Result, StudyError};
use crate::realism::{clock, minute_seconds};

/// The day to export.
pub enum ExportSource {
    /// A LOBSTER day: a sample zip, or a message CSV beside its order-book
    /// CSV.
    Lobster(PathBuf),
    /// A day of a queue-reactive model file, from its own opening book.
    QueueReactive {
        /// The model file (`serl simulate calibrate` wrote it).
        model: PathBuf,
        /// The session's minutes to simulate (0: 09:30).
        minutes: Range<usize>,
        /// The opening mid, dollars.
        mid: f64,
        /// Seed of the flow.
        seed: u64,
    },
}

/// What `serl lob export` is asked.
pub struct ExportRequest {
    /// The day.
    pub source: ExportSource,
    /// The DBN file to write.
    pub dbn: PathBuf,
    /// The symbol the file maps (default: the one in the LOBSTER file's
    /// name, or the model's file stem).
    pub symbol: Option<String>,
    /// The day's date (default: the one in the LOBSTER file's name, or in
    /// the file the model was fitted to).
    pub date: Option<NaiveDate>,
    /// Also the day's book as DBN MBP at this path, with this many levels
    /// (1: `mbp-1`, else `mbp-10`), checked against the book replayed
    /// from the MBO file.
    pub mbp: Option<(PathBuf, usize)>,
}

/// What was exported, under which name and date.
pub struct Exported {
    /// The symbol the file maps.
    pub symbol: String,
    /// The day's date.
    pub date: NaiveDate,
    /// What was written and how it read back.
    pub report: MboExport,
    /// The MBP file's check against the MBO file's book, when asked.
    pub mbp: Option<MbpCheck>,
}

impl Exported {
    /// What `serl lob export` says: the day exported from `what`, the
    /// MBO file written at `dbn` and how it read back, and the MBP file's
    /// check (written at `mbp`) when there is one.
    pub fn text(&self, what: &Path, dbn: &Path, mbp: Option<&Path>) -> String {
        let r = &self.report;
        let mut text = format!(
            "exported   {} ({}, {})\nwrote      {}: {} MBO records for {} messages ({} hidden executions, crosses and halts have none)\n{r}",
            what.display(),
            self.symbol,
            self.date,
            dbn.display(),
            r.records,
            r.messages,
            r.left_out
        );
        if let (Some(check), Some(path)) = (&self.mbp, mbp) {
            let path = path.display();
            text.push_str(&format!(
                "wrote      {path}: {} MBP records\n{check}",
                check.records
            ));
        }
        text
    }

    /// Whether the day read back exactly (a day that adds every order it
    /// touches must), its MBP file too.
    pub fn as_expected(&self) -> bool {
        self.report.as_expected() && self.mbp.as_ref().is_none_or(|c| c.as_expected())
    }
}

/// Writes the day as DBN MBO and checks it reads back.
pub fn export(a: &ExportRequest) -> Result<Exported> {
    match &a.source {
        ExportSource::Lobster(file) => {
            let (symbol, date) = names(file, a, None)?;
            let day = LobsterDayFiles::read(symbol.clone(), file.clone())?;
            let (report, mbp) = write_day(a, &symbol, date, &day.messages, &day.rows)
                .with_context(|| format!("exporting {}", file.display()))?;
            Ok(Exported {
                symbol,
                date,
                report,
                mbp,
            })
        }
        ExportSource::QueueReactive {
            model,
            minutes,
            mid,
            seed,
        } => {
            let flow = QueueReactive::read(model).map_err(StudyError::msg)?;
            // The file it was fitted to names the day.
            let fitted = PathBuf::from(flow.source.split(' ').next().unwrap_or_default());
            let stem = model
                .file_stem()
                .map(|s| s.to_string_lossy().to_uppercase());
            let (symbol, date) = names(&fitted, a, stem)?;
            let (report, mbp) = simulate_whole(&flow, model, minutes, *mid, *seed, |m, r| {
                write_day(a, &symbol, date, m, r)
            })?;
            Ok(Exported {
                symbol,
                date,
                report,
                mbp,
            })
        }
    }
}

/// Writes the day as MBO (read back and compared) and, when asked, its
/// book as MBP (checked against the MBO file's).
fn write_day(
    a: &ExportRequest,
    symbol: &str,
    date: NaiveDate,
    messages: &[MessageRow],
    rows: &BookRows,
) -> std::result::Result<(MboExport, Option<MbpCheck>), ReplayError> {
    let report = export_mbo(&a.dbn, symbol, date, messages, rows)?;
    let Some((path, levels)) = &a.mbp else {
        return Ok((report, None));
    };
    write_mbp(path, symbol, date, messages, rows, *levels)?;
    Ok((report, Some(check_mbp(&a.dbn, path, symbol)?)))
}

/// The symbol and date: asked, else from `named`'s LOBSTER file name
/// (the symbol else `fallback`).
fn names(named: &Path, a: &ExportRequest, fallback: Option<String>) -> Result<(String, NaiveDate)> {
    let parsed = lobster_name(named);
    let symbol = a
        .symbol
        .clone()
        .or_else(|| parsed.as_ref().map(|n| n.0.clone()))
        .or(fallback)
        .ok_or_else(|| {
            StudyError::msg(format!(
                "{}: no symbol in its name; pass --symbol",
                named.display()
            ))
        })?;
    let date = match a.date {
        Some(d) => d,
        None => parsed.and_then(|n| n.1.parse().ok()).ok_or_else(|| {
            StudyError::msg(format!(
                "{}: no YYYY-MM-DD date in its name; pass --date",
                named.display()
            ))
        })?,
    };
    Ok((symbol, date))
}

/// Plays `flow` over `minutes` from its own opening book around `mid`
/// dollars, every message recorded, and hands the day to `write`.
fn simulate_whole(
    flow: &QueueReactive,
    model: &Path,
    minutes: &Range<usize>,
    mid: f64,
    seed: u64,
    write: impl FnOnce(
        &[MessageRow],
        &BookRows,
    ) -> std::result::Result<(MboExport, Option<MbpCheck>), ReplayError>,
) -> Result<(MboExport, Option<MbpCheck>)> {
    if !(mid.is_finite() && mid > 0.0) {
        return Err(StudyError::msg(format!(
            "--mid {mid}: give a positive price"
        )));
    }
    if minutes.end <= minutes.start {
        return Err(StudyError::msg("--until must be after --from"));
    }
    let (open, end) = (minute_seconds(minutes.start), minute_seconds(minutes.end));
    let mid_ticks = mid * 10_000.0 / flow.tick as f64;
    let rec = LobsterRecorder::new(MBO_LEVELS, flow.tick).whole();
    let (messages, rows) = flow
        .simulate_into((open, end - open), &[], mid_ticks, rec, seed)
        .into_rows();
    if messages.is_empty() {
        return Err(StudyError::msg(format!(
            "{}: the flow sent no order between {} and {}",
            model.display(),
            clock(minutes.start),
            clock(minutes.end)
        )));
    }
    Ok(write(&messages, &rows)?)
}
