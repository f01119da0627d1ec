//! Finding LOBSTER days on disk: a file's symbol, date and depth from its
//! name, the deepest file of each symbol in a folder, and a day read whole.

use std::path::{Path, PathBuf};

use super::{parse_messages, parse_orderbook, BookRows, LobsterInput, MessageRow, ReplayError};

fn samples(message: String) -> ReplayError {
    ReplayError::Samples { message }
}

/// Symbol, date and levels of a LOBSTER file's name: a sample zip
/// (`LOBSTER_SampleFile_SYM_DATE_L.zip`) or a message file
/// (`SYM_DATE_START_END_message_L.csv`).
pub fn lobster_name(p: &Path) -> Option<(String, String, usize)> {
    let stem = p.file_stem()?.to_str()?;
    let parts: Vec<&str> = stem.split('_').collect();
    let levels = parts.last()?.parse().ok()?;
    let at = if parts.first() == Some(&"LOBSTER") {
        2
    } else {
        0
    };
    Some((
        parts.get(at)?.to_uppercase(),
        parts.get(at + 1)?.to_string(),
        levels,
    ))
}

/// The deepest LOBSTER file of each symbol in `path` (a directory of
/// sample zips and DBN MBO files), or `path` itself (a zip, a message CSV,
/// or a DBN MBO file, which names a day per symbol it holds); only the
/// symbols of `only` when it is not empty. A DBN file's day, holding the
/// whole book, wins over a zip of the same symbol.
pub fn sample_files(path: &Path, only: &[String]) -> Result<Vec<(String, PathBuf)>, ReplayError> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut v: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| samples(format!("reading {}: {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "zip") || super::mbo::is_dbn(p))
            .collect();
        v.sort();
        v
    } else if path.exists() {
        vec![path.to_path_buf()]
    } else {
        return Err(samples(format!(
            "{}: no such LOBSTER file or directory",
            path.display()
        )));
    };
    let mut best: std::collections::BTreeMap<String, (usize, PathBuf)> = Default::default();
    for f in files {
        if super::mbo::is_dbn(&f) {
            // A DBN MBO file holds the whole book of each of its symbols.
            for symbol in super::mbo::mbo_symbols(&f)? {
                best.insert(symbol.to_uppercase(), (MBO_LEVELS + 1, f.clone()));
            }
            continue;
        }
        let Some((symbol, _, levels)) = lobster_name(&f) else {
            return Err(samples(format!(
                "{}: not named like a LOBSTER file (LOBSTER_SampleFile_SYM_DATE_LEVELS.zip or \
                 SYM_DATE_START_END_message_LEVELS.csv)",
                f.display()
            )));
        };
        if best.get(&symbol).is_none_or(|(l, _)| levels > *l) {
            best.insert(symbol, (levels, f));
        }
    }
    let wanted: Vec<String> = only.iter().map(|s| s.to_uppercase()).collect();
    if let Some(w) = wanted.iter().find(|w| !best.contains_key(*w)) {
        let have: Vec<&str> = best.keys().map(String::as_str).collect();
        return Err(samples(format!(
            "no LOBSTER sample of {w} in {}; it has {}",
            path.display(),
            have.join(", ")
        )));
    }
    let out: Vec<(String, PathBuf)> = best
        .into_iter()
        .filter(|(s, _)| wanted.is_empty() || wanted.contains(s))
        .map(|(s, (_, f))| (s, f))
        .collect();
    if out.is_empty() {
        return Err(samples(format!(
            "{}: no LOBSTER sample zip found",
            path.display()
        )));
    }
    Ok(out)
}

/// A real LOBSTER day, read whole: its messages and the book after each.
pub struct LobsterDayFiles {
    /// The symbol, as its file names it.
    pub symbol: String,
    /// The zip or message file it was read from.
    pub file: PathBuf,
    /// Its messages, in order.
    pub messages: Vec<MessageRow>,
    /// The visible book after each message.
    pub rows: BookRows,
    /// Where a DBN MBO day's book crossed, if it did (the day is read all
    /// the same; [`LobsterDayFiles::warning`] says it).
    pub crossed: Option<super::CrossedBook>,
}

/// The days of `files` (as [`sample_files`] lists them), read one at a
/// time in their order; a DBN MBO file's symbols are decoded together, in
/// one pass, when the first of them is reached, and each day's book is
/// built when it is handed out, so memory holds one day's book at a time.
pub fn read_days(
    files: Vec<(String, PathBuf)>,
) -> impl Iterator<Item = (String, PathBuf, Result<LobsterDayFiles, ReplayError>)> {
    // Each DBN file's symbols, decoded together when the first is reached.
    let mut pending: std::collections::HashMap<PathBuf, Vec<String>> = Default::default();
    for (symbol, file) in files.iter().filter(|(_, f)| super::mbo::is_dbn(f)) {
        pending
            .entry(file.clone())
            .or_default()
            .push(symbol.clone());
    }
    let mut decoded: std::collections::HashMap<(PathBuf, String), _> = Default::default();
    files.into_iter().map(move |(symbol, file)| {
        if !super::mbo::is_dbn(&file) {
            let day = LobsterDayFiles::read(symbol.clone(), file.clone());
            return (symbol, file, day);
        }
        if let Some(symbols) = pending.remove(&file) {
            match super::mbo::read_mbo_messages(&file, &symbols) {
                Ok(days) => {
                    decoded.extend(symbols.into_iter().map(|s| (file.clone(), s)).zip(days));
                }
                // Said by the symbol that asked; a later symbol of the file
                // reads it again, and hears it again.
                Err(e) => {
                    decoded.insert((file.clone(), symbol.clone()), Err(e));
                }
            }
        }
        let day = match decoded.remove(&(file.clone(), symbol.clone())) {
            Some(messages) => {
                messages.map(|m| LobsterDayFiles::of_mbo(symbol.clone(), file.clone(), m))
            }
            None => LobsterDayFiles::read(symbol.clone(), file.clone()),
        };
        (symbol, file, day)
    })
}

/// The book levels a DBN MBO day is shown at (its records hold the whole
/// book; ten is the deepest LOBSTER sample's depth).
pub const MBO_LEVELS: usize = 10;

impl LobsterDayFiles {
    /// `symbol`'s day of the DBN MBO `file`, its messages read (`day`),
    /// with the engine's book after each at [`MBO_LEVELS`].
    fn of_mbo(symbol: String, file: PathBuf, day: super::MboMessages) -> Self {
        let (rows, crossed) = day.book(MBO_LEVELS);
        LobsterDayFiles {
            rows,
            symbol,
            file,
            messages: day.messages,
            crossed,
        }
    }

    /// What a reader of the day should hear before using it: where its
    /// book crossed, with the file and the record.
    pub fn warning(&self) -> Option<String> {
        self.crossed.as_ref().map(|c| {
            format!(
                "{}: {}: {c} (orders the file never removes, as in a day cut to a few levels; an auction's crossed book; or a fault of the feed)",
                self.file.display(),
                self.symbol
            )
        })
    }

    /// Reads the day in `file` (a sample zip or a message CSV beside its
    /// order-book file, the two with a row per message; or `symbol`'s day
    /// of a DBN MBO file).
    pub fn read(symbol: String, file: PathBuf) -> Result<LobsterDayFiles, ReplayError> {
        if super::mbo::is_dbn(&file) {
            let day = super::mbo::read_mbo_day(&file, &symbol)?;
            return Ok(Self::of_mbo(symbol, file, day));
        }
        let input = LobsterInput::open(&file, None)?;
        let messages = parse_messages(&input.message_name, &input.messages)?;
        let rows = parse_orderbook(&input.orderbook_name, &input.orderbook)?;
        if rows.len() != messages.len() {
            return Err(samples(format!(
                "{}: {} messages but {} order-book rows",
                file.display(),
                messages.len(),
                rows.len()
            )));
        }
        Ok(LobsterDayFiles {
            symbol,
            file,
            messages,
            rows,
            crossed: None,
        })
    }

    /// The day cut at `seconds` after midnight: the messages before it
    /// (with their book rows), and those at or after it. Taking the day by
    /// value keeps a caller that calibrates on the first part from reading
    /// the second by mistake. Where the day's book first crossed stays with
    /// the part that holds that message (its index counted in that part).
    pub fn split_at(self, seconds: f64) -> (LobsterDayFiles, LobsterDayFiles) {
        let cut = self.messages.partition_point(|m| m.time < seconds);
        let part = |messages: Vec<MessageRow>, rows: BookRows, first: bool| LobsterDayFiles {
            symbol: self.symbol.clone(),
            file: self.file.clone(),
            messages,
            rows,
            crossed: self
                .crossed
                .clone()
                .filter(|c| (c.message < cut) == first)
                .map(|c| super::CrossedBook {
                    message: if first { c.message } else { c.message - cut },
                    ..c
                }),
        };
        let before = part(self.messages[..cut].to_vec(), self.rows.slice(0..cut), true);
        let after = part(
            self.messages[cut..].to_vec(),
            self.rows.slice(cut..self.rows.len()),
            false,
        );
        (before, after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_split_at_a_time_keeps_each_message_with_its_book_row() {
        let message = |time: f64, id: u64| MessageRow {
            time,
            kind: crate::LobsterEvent::Submit,
            id,
            size: 100,
            price: 1_000_000,
            direction: 1,
        };
        let times = [34_200.5, 40_000.0, 45_899.9, 45_900.0, 50_000.0];
        let day = LobsterDayFiles {
            symbol: "X".into(),
            file: PathBuf::from("x.zip"),
            messages: times
                .iter()
                .enumerate()
                .map(|(i, &t)| message(t, i as u64))
                .collect(),
            rows: BookRows::from_values(1, (0..20).collect()),
            crossed: None,
        };
        let (before, after) = day.split_at(45_900.0);
        assert_eq!(before.messages.len(), 3);
        assert_eq!(after.messages.len(), 2);
        assert!(before.messages.iter().all(|m| m.time < 45_900.0));
        assert!(after.messages.iter().all(|m| m.time >= 45_900.0));
        assert_eq!(before.rows.len(), 3);
        assert_eq!(after.rows.row(0), &[12, 13, 14, 15]);
        assert_eq!(after.messages[0].id, 3);
    }

    #[test]
    fn names_of_sample_zips_and_message_files_give_symbol_date_and_depth() {
        let zip = Path::new("LOBSTER_SampleFile_AAPL_2012-06-21_10.zip");
        assert_eq!(
            lobster_name(zip),
            Some(("AAPL".into(), "2012-06-21".into(), 10))
        );
        let csv = Path::new("msft_2012-06-21_34200000_57600000_message_5.csv");
        assert_eq!(
            lobster_name(csv),
            Some(("MSFT".into(), "2012-06-21".into(), 5))
        );
        assert_eq!(lobster_name(Path::new("notes.txt")), None);
    }
}
