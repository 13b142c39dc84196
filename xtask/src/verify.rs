//! Checks that an unpacked dataset folder holds every file its [`OgbDataset`] requires.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use anyhow::{Result, bail};
use flate2::read::GzDecoder;

use crate::datasets::OgbDataset;

/// Succeeds when every required file under `root` exists, is non-empty and starts like its format
/// (gzip for `.csv.gz`, zip for `.npz`). The error names every missing or damaged file.
pub fn layout(ds: &OgbDataset, root: &Path) -> Result<()> {
    let mut missing = Vec::new();
    let mut damaged = Vec::new();
    for relative in ds.required_files() {
        let path = root.join(&relative);
        if !path.is_file() {
            missing.push(relative);
        } else if let Err(why) = check_content(&path) {
            damaged.push(format!("{relative} ({why})"));
        }
    }
    if missing.is_empty() && damaged.is_empty() {
        return Ok(());
    }
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("missing {}", missing.join(", ")));
    }
    if !damaged.is_empty() {
        problems.push(format!("damaged {}", damaged.join(", ")));
    }
    bail!("{}: {} in {}", ds.name, problems.join("; "), root.display())
}

/// Reads the start of one file: enough to catch an empty file or the wrong format, cheap on 50 GB.
fn check_content(path: &Path) -> Result<(), String> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut file = File::open(path).map_err(|e| e.to_string())?;
    if name.ends_with(".gz") {
        let mut probe = [0u8; 256];
        return match GzDecoder::new(file).read(&mut probe) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err("empty or truncated gzip".to_owned()),
            Err(e) => Err(format!("not gzip data: {e}")),
        };
    }
    let mut magic = [0u8; 4];
    match file.read_exact(&mut magic) {
        // `.npz` is a zip of `.npy` arrays.
        Ok(()) if name.ends_with(".npz") && &magic != b"PK\x03\x04" => Err("not an .npz (zip) archive".to_owned()),
        Ok(()) => Ok(()),
        Err(_) => Err("empty or shorter than 4 bytes".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::lookup;
    use crate::testutil::gz;
    use std::fs;

    fn write_all(root: &Path, files: &[String], content: &[u8]) {
        for f in files {
            let p = root.join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, content).unwrap();
        }
    }

    #[test]
    fn a_complete_csv_layout_passes() {
        let tmp = tempfile::tempdir().unwrap();
        let ds = lookup("ogbn-proteins").unwrap();
        write_all(tmp.path(), &ds.required_files(), &gz("1,2\n"));
        layout(ds, tmp.path()).unwrap();
    }

    #[test]
    fn missing_and_damaged_files_are_all_named() {
        let tmp = tempfile::tempdir().unwrap();
        let ds = lookup("ogbn-arxiv").unwrap();
        let mut files = ds.required_files();
        files.retain(|f| f != "raw/node-feat.csv.gz" && f != "split/time/test.csv.gz");
        write_all(tmp.path(), &files, &gz("0\n"));
        fs::write(tmp.path().join("raw/edge.csv.gz"), b"0,1\n1,2\n2,0\n3,1\n").unwrap();
        fs::write(tmp.path().join("raw/num-node-list.csv.gz"), b"").unwrap();
        let err = layout(ds, tmp.path()).unwrap_err().to_string();
        assert!(err.contains("missing raw/node-feat.csv.gz, split/time/test.csv.gz"), "{err}");
        assert!(err.contains("raw/edge.csv.gz (not gzip data"), "{err}");
        assert!(err.contains("raw/num-node-list.csv.gz (empty"), "{err}");
    }

    #[test]
    fn npz_files_must_be_zip_archives() {
        let tmp = tempfile::tempdir().unwrap();
        let ds = lookup("ogbn-papers100M").unwrap();
        write_all(tmp.path(), &ds.required_files(), &gz("0\n"));
        fs::write(tmp.path().join("raw/data.npz"), b"PK\x03\x04rest").unwrap();
        let err = layout(ds, tmp.path()).unwrap_err().to_string();
        assert!(err.contains("raw/node-label.npz (not an .npz"), "{err}");
        assert!(!err.contains("data.npz"), "{err}");
    }
}
