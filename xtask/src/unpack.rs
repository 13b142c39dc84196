//! Zip extraction with per-entry error messages and CRC checks (the zip reader verifies each
//! entry's CRC-32 when it is read to the end).

use std::fs::{self, File};
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use zip::ZipArchive;

use crate::progress::Progress;

/// Opens `zip_path` and reads its central directory: a truncated or non-zip file fails here.
pub fn open(zip_path: &Path) -> Result<ZipArchive<BufReader<File>>> {
    let file = File::open(zip_path).with_context(|| format!("opening {}", zip_path.display()))?;
    ZipArchive::new(BufReader::new(file))
        .with_context(|| format!("{} is not a readable zip archive", zip_path.display()))
}

/// Extracts every entry of `zip_path` under `dir` (created if missing).
pub fn extract(zip_path: &Path, dir: &Path, label: &str) -> Result<()> {
    let mut archive = open(zip_path)?;
    let total = archive.decompressed_size().and_then(|n| u64::try_from(n).ok());
    let mut progress = Progress::new(format!("{label}: unpacking"), 0, total);
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).with_context(|| format!("{}: reading entry {i}", zip_path.display()))?;
        let name = entry.name().map(|n| n.into_owned()).unwrap_or_else(|_| format!("#{i}"));
        let Some(relative) = entry.enclosed_name() else {
            bail!("{}: entry `{name}` points outside the archive's folder", zip_path.display());
        };
        let out = dir.join(relative);
        if entry.is_dir() {
            fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            continue;
        }
        if let Some(parent) = out.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let file = File::create(&out).with_context(|| format!("creating {}", out.display()))?;
        io::copy(&mut entry, &mut progress.track(file))
            .with_context(|| format!("{}: extracting `{name}` (corrupt archive?)", zip_path.display()))?;
    }
    progress.finish();
    Ok(())
}

/// The folder holding `raw/` and `split/` inside an extracted archive: `dir` itself, or the single
/// top-level folder that OGB wraps everything in (`arxiv/`, `papers100M-bin/`, ...).
pub fn payload_root(dir: &Path) -> Result<PathBuf> {
    if dir.join("raw").is_dir() {
        return Ok(dir.to_owned());
    }
    let mut folders = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        if entry.file_type()?.is_dir() {
            folders.push(entry.path());
        }
    }
    match folders.as_slice() {
        [single] => Ok(single.clone()),
        [] => bail!("the archive holds no folder (expected one containing raw/ and split/)"),
        many => bail!(
            "the archive holds {} top-level folders ({}); expected one containing raw/ and split/",
            many.len(),
            many.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy()).collect::<Vec<_>>().join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{arxiv_entries, write_zip};

    #[test]
    fn extracts_an_ogb_shaped_zip_and_finds_its_root() {
        let tmp = tempfile::tempdir().unwrap();
        let zip = tmp.path().join("arxiv.zip");
        write_zip(&zip, &arxiv_entries(&[]));
        let out = tmp.path().join("out");
        extract(&zip, &out, "test").unwrap();
        let root = payload_root(&out).unwrap();
        assert_eq!(root, out.join("arxiv"));
        assert!(root.join("raw/edge.csv.gz").is_file());
        assert!(root.join("split/time/test.csv.gz").is_file());
        // A folder that already is the payload root is its own root.
        assert_eq!(payload_root(&root).unwrap(), root);
    }

    #[test]
    fn a_non_zip_fails_to_open_with_the_path_in_the_message() {
        let tmp = tempfile::tempdir().unwrap();
        let zip = tmp.path().join("bad.zip");
        fs::write(&zip, b"<html>not a zip</html>").unwrap();
        let err = format!("{:#}", open(&zip).unwrap_err());
        assert!(err.contains("bad.zip") && err.contains("not a readable zip"), "{err}");
    }

    #[test]
    fn a_damaged_entry_fails_extraction_naming_it() {
        let tmp = tempfile::tempdir().unwrap();
        let zip = tmp.path().join("arxiv.zip");
        // Stored (uncompressed) data is easy to find and flip; the CRC check must catch it.
        let payload = vec![b'7'; 4096];
        {
            use std::io::Write;
            let mut w = zip::ZipWriter::new(File::create(&zip).unwrap());
            let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
            w.start_file("arxiv/raw/edge.csv.gz", opts).unwrap();
            w.write_all(&payload).unwrap();
            w.finish().unwrap();
        }
        let mut bytes = fs::read(&zip).unwrap();
        let at = bytes.windows(16).position(|w| w == &payload[..16]).unwrap() + 100;
        bytes[at] = b'8';
        fs::write(&zip, bytes).unwrap();
        let err = format!("{:#}", extract(&zip, &tmp.path().join("out"), "test").unwrap_err());
        assert!(err.contains("arxiv/raw/edge.csv.gz"), "{err}");
    }

    #[test]
    fn payload_root_rejects_ambiguous_or_empty_archives() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(payload_root(tmp.path()).unwrap_err().to_string().contains("no folder"));
        fs::create_dir_all(tmp.path().join("a")).unwrap();
        fs::create_dir_all(tmp.path().join("b")).unwrap();
        let err = payload_root(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("2 top-level folders"), "{err}");
    }
}
