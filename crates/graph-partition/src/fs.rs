//! Files written whole or not at all. Halo's one atomic write lives here, in the lowest crate
//! that writes files (the dataset cache); reports, checkpoints, exported models and plots use it.
//!
//! [`write_atomic`] and the [`Pending`] file it is built on are the only place under `crates/`
//! that renames a file into place: the caller fills a temporary file beside the target, which
//! is fsynced, renamed onto the target and its directory fsynced; on an error the temporary
//! file is removed and the target untouched. The dataset cache, reports, experiment tables,
//! checkpoints, exported models and plots all write through it, and part folders' row files
//! through [`Pending`]. Partition books (`book::io`) and datasets written in the OGB layout
//! (`dataset::writer`) are written in place; an import (`dataset::import`) writes a temporary
//! folder and renames the folder into place.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A step of an atomic write that failed, with the file or directory it failed on.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}", path.display())]
pub struct WriteError {
    /// What failed: `write`, `rename into place` or `sync`.
    pub action: &'static str,
    /// The target file (or, for `sync`, its directory).
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

impl WriteError {
    fn new(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Self {
        move |source| WriteError { action, path: path.to_path_buf(), source }
    }
}

/// Replaces `path` so that it holds either its old contents or all of the new ones, across
/// crashes: `fill` writes a temporary file beside `path` (it is given that file's path), which
/// is then fsynced, renamed onto `path`, and the directory fsynced. On an error before the
/// rename the temporary file is removed and `path` is untouched.
///
/// The temporary file's name ends with `path`'s file name, so its extension is the target's (a
/// writer that picks a format by extension, like plotters' bitmap backend, sees the real one).
pub fn write_atomic(path: &Path, fill: impl FnOnce(&Path) -> io::Result<()>) -> Result<(), WriteError> {
    let pending = Pending::new(path);
    fill(pending.tmp()).map_err(WriteError::new("write", path))?;
    pending.commit()
}

/// A file written beside its target and put in place whole by [`Pending::commit`] (fsynced,
/// renamed onto the target, the directory fsynced), for writers that fill several files at once;
/// dropped without a commit, its temporary file is removed and the target left untouched.
#[derive(Debug)]
pub struct Pending {
    tmp: PathBuf,
    path: PathBuf,
}

impl Pending {
    /// A pending replacement of `path`; nothing is created until the caller writes [`Pending::tmp`].
    pub fn new(path: &Path) -> Self {
        Self { tmp: temporary_beside(path), path: path.to_path_buf() }
    }

    /// The temporary file to fill.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// Fsyncs the temporary file, renames it onto the target and fsyncs the directory.
    pub fn commit(self) -> Result<(), WriteError> {
        OpenOptions::new()
            .write(true)
            .open(&self.tmp)
            .and_then(|f| f.sync_all())
            .map_err(WriteError::new("write", &self.path))?;
        std::fs::rename(&self.tmp, &self.path).map_err(WriteError::new("rename into place", &self.path))?;
        sync_dir(directory_of(&self.path))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Best effort, and a no-op after a commit (the file was renamed away): a leftover
        // would only be clutter.
        let _ = std::fs::remove_file(&self.tmp);
    }
}

/// Makes a directory's entries (a rename, a new file or folder) durable. A no-op off Unix,
/// where directories cannot be opened for syncing.
pub fn sync_dir(dir: &Path) -> Result<(), WriteError> {
    #[cfg(unix)]
    File::open(dir).and_then(|d| d.sync_all()).map_err(WriteError::new("sync", dir))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// The directory `path` lies in (`.` for a bare file name).
fn directory_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// A hidden file beside `path`, unique to this process and call.
fn temporary_beside(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".halo-tmp-{}-{n}-{name}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    }

    #[test]
    fn the_content_lands_and_no_temporary_file_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        write_atomic(&path, |tmp| std::fs::write(tmp, "{}\n")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}\n");
        assert_eq!(entries(dir.path()), ["report.json"]);
    }

    #[test]
    fn an_existing_file_is_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.bin");
        std::fs::write(&path, vec![7u8; 4096]).unwrap();
        write_atomic(&path, |tmp| std::fs::write(tmp, b"short")).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"short");
        assert_eq!(entries(dir.path()), ["model.bin"]);
    }

    #[test]
    fn a_writer_error_leaves_the_old_file_and_no_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plot.png");
        std::fs::write(&path, "old").unwrap();
        let err = write_atomic(&path, |tmp| {
            std::fs::write(tmp, "half")?;
            Err(io::Error::other("disk full"))
        })
        .unwrap_err();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(entries(dir.path()), ["plot.png"]);
        assert_eq!(err.action, "write");
        assert_eq!(err.source.to_string(), "disk full");
    }

    #[test]
    fn an_error_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("report.json");
        let err = write_atomic(&path, |tmp| std::fs::write(tmp, "x")).unwrap_err();
        assert_eq!(err.to_string(), format!("cannot write {}", path.display()));
        // A directory in the way of the rename is named too.
        let path = dir.path().join("taken");
        std::fs::create_dir_all(path.join("inside")).unwrap();
        let err = write_atomic(&path, |tmp| std::fs::write(tmp, "x")).unwrap_err();
        assert_eq!(err.to_string(), format!("cannot rename into place {}", path.display()));
        assert_eq!(entries(dir.path()), ["taken"]);
    }

    #[test]
    fn the_temporary_file_keeps_the_extension() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("curves.svg");
        let mut seen = PathBuf::new();
        write_atomic(&path, |tmp| {
            seen = tmp.to_path_buf();
            std::fs::write(tmp, "<svg/>")
        })
        .unwrap();
        assert_eq!(seen.parent(), Some(dir.path()));
        assert_eq!(seen.extension().and_then(|e| e.to_str()), Some("svg"));
        assert_ne!(seen, path);
    }
}
