//! Writing raw data as it arrives: an append-only JSON-lines writer, and atomic files.

use serde::Serialize;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
/// Appends records to one JSON-lines file, flushing after every record so nothing is lost
/// when the process dies. Samples arrive every few seconds, so a flush per line is cheap.
pub struct JsonlWriter {
    path: PathBuf,
    out: BufWriter<std::fs::File>,
}

impl JsonlWriter {
    pub fn append(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
        })
    }

    pub fn write<T: Serialize>(&mut self, record: &T) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, record)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and puts what was written on disk (fsync).
    pub fn sync(&mut self) -> std::io::Result<()> {
        self.out.flush()?;
        self.out.get_ref().sync_all()
    }
}
/// Writes a file atomically (temp file + rename) so a reader never sees half of it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    // On disk before it replaces the old file, and the rename on disk before we go on: a
    // crash leaves the old manifest or the new one, never an empty one.
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}
