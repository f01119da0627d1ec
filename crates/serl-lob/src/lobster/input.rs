//! Opening a day's input: a LOBSTER sample zip, or a message CSV with its
//! order-book CSV beside it.

use std::io::Read;
use std::path::Path;

use super::ReplayError;

/// A message file and its order-book file, in memory, ready for
/// [`crate::replay`] or [`crate::parse_messages`].
pub struct LobsterInput {
    /// The message file's name for errors and reports: its path, or
    /// `zip:entry` inside a zip.
    pub message_name: String,
    /// The order-book file's name, the same way.
    pub orderbook_name: String,
    /// The message file's bytes (CSV: time, type, id, size, price,
    /// direction).
    pub messages: Vec<u8>,
    /// The order-book file's bytes (CSV: ask price, ask size, bid price,
    /// bid size, for each of *L* levels).
    pub orderbook: Vec<u8>,
}

fn read(path: &Path) -> Result<Vec<u8>, ReplayError> {
    std::fs::read(path).map_err(|source| ReplayError::Io {
        path: path.to_path_buf(),
        source,
    })
}

impl LobsterInput {
    /// Opens a LOBSTER sample zip, or a message CSV with its order-book CSV
    /// (found beside it by name when not given).
    pub fn open(path: &Path, orderbook: Option<&Path>) -> Result<Self, ReplayError> {
        let is_zip = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("zip"));
        if is_zip {
            return Self::open_zip(path);
        }
        let ob_path = match orderbook {
            Some(p) => p.to_path_buf(),
            None => {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if !name.contains("message") {
                    return Err(ReplayError::MissingFile {
                        path: path.to_path_buf(),
                        what: "orderbook",
                    });
                }
                path.with_file_name(name.replace("message", "orderbook"))
            }
        };
        if !ob_path.exists() {
            return Err(ReplayError::Io {
                path: ob_path,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "order-book file not found; pass it as the second argument",
                ),
            });
        }
        Ok(LobsterInput {
            message_name: path.display().to_string(),
            orderbook_name: ob_path.display().to_string(),
            messages: read(path)?,
            orderbook: read(&ob_path)?,
        })
    }

    fn open_zip(path: &Path) -> Result<Self, ReplayError> {
        let f = std::fs::File::open(path).map_err(|source| ReplayError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let zip_err = |e: zip::result::ZipError| ReplayError::Zip {
            path: path.to_path_buf(),
            message: e.to_string(),
        };
        let mut zip = zip::ZipArchive::new(f).map_err(zip_err)?;
        let mut find = |what: &'static str| -> Result<(String, Vec<u8>), ReplayError> {
            let needle = format!("_{what}_");
            let name = zip
                .file_names()
                .filter_map(|n| n.ok().map(|n| n.into_owned()))
                .find(|n| n.contains(&needle))
                .ok_or(ReplayError::MissingFile {
                    path: path.to_path_buf(),
                    what,
                })?;
            let mut entry = zip.by_name(&name).map_err(zip_err)?;
            let mut out = Vec::with_capacity(entry.size() as usize);
            entry.read_to_end(&mut out).map_err(|e| ReplayError::Zip {
                path: path.to_path_buf(),
                message: format!("{name}: {e}"),
            })?;
            Ok((format!("{}:{name}", path.display()), out))
        };
        let (message_name, messages) = find("message")?;
        let (orderbook_name, orderbook) = find("orderbook")?;
        Ok(LobsterInput {
            message_name,
            orderbook_name,
            messages,
            orderbook,
        })
    }
}
