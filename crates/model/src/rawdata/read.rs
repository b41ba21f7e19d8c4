//! Reading raw data back, bounded and forgiving where a killed run leaves a torn last line;
//! every error names the file, the line and the fix.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Why a raw-data file could not be read; each names the file (and the line) and the fix.
#[derive(Debug, thiserror::Error)]
pub enum RawDataError {
    /// A line other than the last is not a record.
    #[error(
        "{path}:{line}: not a valid record ({reason}); the line is damaged before the end of the file: fix or delete that line and re-run `viewerfleet report`"
    )]
    DamagedLine {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    /// The folder that should hold the file is a file.
    #[error(
        "{folder} is a file, not a folder: a run folder keeps its raw data in raw/*.jsonl; restore raw/ from a copy of the run folder"
    )]
    FolderIsAFile { folder: PathBuf },
    /// The path is a folder, a device, a FIFO or a socket.
    #[error("{path} is {kind}, not a raw-data file; restore it from a copy of the run folder")]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("{path}: cannot read: {source}")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What kind of thing a path is, for messages ("a folder", "a FIFO (named pipe)", …).
pub(crate) fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        "a file"
    } else if t.is_dir() {
        "a folder"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Reads a regular file, refusing devices, FIFOs and folders (which would never end or
/// never start) and files above `max_bytes`. `NotFound` stays `NotFound`.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Error, ErrorKind, Read};
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("is {}, not a regular file", file_kind(&meta)),
        ));
    }
    let too_large = |size: u64| {
        Error::new(
            ErrorKind::InvalidData,
            format!("is {size} bytes, more than the {max_bytes} bytes such a file may have"),
        )
    };
    if meta.len() > max_bytes {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Largest `manifest.json` read (a real one is a few KiB).
pub(crate) const MAX_MANIFEST_BYTES: u64 = 16 * 1024 * 1024;

/// Reads `manifest.json` as text: a regular file of at most [`MAX_MANIFEST_BYTES`] of
/// UTF-8. `NotFound` stays `NotFound`, so a caller can tell "no manifest" apart.
pub fn read_manifest_text(path: &Path) -> std::io::Result<String> {
    let bytes = read_regular_file(path, MAX_MANIFEST_BYTES)?;
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("is not UTF-8 text ({e})"),
        )
    })
}

/// Reads a JSON-lines file. A last line cut short by a crash is skipped (and counted), any
/// other bad line is an error naming the file and line. A missing file has no records; a
/// folder, device or FIFO in its place, or a `raw` that is a file, is an error saying so.
pub fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> anyhow::Result<JsonlContents<T>> {
    Ok(read_records(path)?)
}

/// [`read_jsonl`] with its typed error.
pub fn read_records<T: for<'de> Deserialize<'de>>(
    path: &Path,
) -> Result<JsonlContents<T>, RawDataError> {
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if std::fs::metadata(folder).is_ok_and(|m| !m.is_dir()) {
            return Err(RawDataError::FolderIsAFile {
                folder: folder.to_path_buf(),
            });
        }
    }
    let bytes = match std::fs::metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(JsonlContents {
                records: Vec::new(),
                line_numbers: Vec::new(),
                truncated_last_line: false,
            })
        }
        Ok(meta) if !meta.is_file() => {
            return Err(RawDataError::NotAFile {
                path: path.to_path_buf(),
                kind: file_kind(&meta),
            })
        }
        _ => std::fs::read(path).map_err(|source| RawDataError::Unreadable {
            path: path.to_path_buf(),
            source,
        })?,
    };
    let mut records = Vec::new();
    let mut line_numbers = Vec::new();
    let mut truncated_last_line = false;
    let ends_with_newline = bytes.last() == Some(&b'\n');
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let count = if bytes.is_empty() {
        0
    } else {
        body.split(|&b| b == b'\n').count()
    };
    for (index, raw) in body.split(|&b| b == b'\n').enumerate().take(count) {
        let parsed = std::str::from_utf8(raw)
            .map_err(|e| format!("not UTF-8 text: {e}"))
            .and_then(|line| {
                if line.trim().is_empty() {
                    Ok(None)
                } else {
                    serde_json::from_str(line)
                        .map(Some)
                        .map_err(|e| e.to_string())
                }
            });
        match parsed {
            Ok(Some(record)) => {
                records.push(record);
                line_numbers.push(index + 1);
            }
            Ok(None) => {}
            Err(_) if index + 1 == count && !ends_with_newline => {
                truncated_last_line = true;
            }
            Err(reason) => {
                return Err(RawDataError::DamagedLine {
                    path: path.to_path_buf(),
                    line: index + 1,
                    reason,
                })
            }
        }
    }
    Ok(JsonlContents {
        records,
        line_numbers,
        truncated_last_line,
    })
}

pub struct JsonlContents<T> {
    pub records: Vec<T>,
    /// The 1-based line of each record, in the same order.
    pub line_numbers: Vec<usize>,
    /// The file ended in a partial line (the writer was killed mid-write).
    pub truncated_last_line: bool,
}
