//! `cargo xtask download`: fetch, check, unpack, verify and place one OGB dataset, leaving either a
//! complete `datasets/<name>/` or nothing (partial work lives under `datasets/.download/`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::datasets::OgbDataset;
use crate::{download, meta, unpack, verify};

/// Folder under the datasets directory for zips, `.part` files and unpacking; git ignores it
/// (it is a folder under `datasets/`) and the final rename stays on one file system.
const WORK_DIR: &str = ".download";

/// Downloads `ds` into `datasets_dir/<name>/` unless it is already there and complete. A `.part`
/// left by an interrupted run is resumed; a finished zip left by a failed unpack is reused.
pub fn download(ds: &OgbDataset, datasets_dir: &Path, agent: &ureq::Agent) -> Result<PathBuf> {
    download_from(ds, datasets_dir, agent, &ds.url())
}

/// [`download()`] from another address (tests serve a fixture on loopback).
fn download_from(ds: &OgbDataset, datasets_dir: &Path, agent: &ureq::Agent, url: &str) -> Result<PathBuf> {
    let dest = datasets_dir.join(ds.name);
    if dest.exists() {
        verify::layout(ds, &dest)
            .with_context(|| format!("{} exists but is incomplete; remove it and rerun", dest.display()))?;
        eprintln!("{}: already present and complete in {}", ds.name, dest.display());
        return Ok(dest);
    }
    let work = datasets_dir.join(WORK_DIR);
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let zip = work.join(format!("{}.zip", ds.name));
    if zip.exists() {
        eprintln!("{}: reusing {}", ds.name, zip.display());
    } else {
        eprintln!("{}: downloading {url}", ds.name);
        if let Err(e) = download::fetch(agent, url, &zip, ds.name) {
            // Keeps a `.part` with bytes in it (the next run resumes it), drops an empty folder.
            remove_work_dir_if_empty(datasets_dir);
            return Err(e);
        }
    }
    if let Err(e) = unpack::open(&zip) {
        // Opening reads only the central directory, so a failure means the file itself is bad:
        // downloading again is the only fix.
        remove_if_exists(&zip)?;
        remove_work_dir_if_empty(datasets_dir);
        return Err(e.context(format!("removed {}; rerun to download it again", zip.display())));
    }
    install_zip(ds, &zip, datasets_dir)?;
    fs::remove_file(&zip).with_context(|| format!("removing {}", zip.display()))?;
    remove_work_dir_if_empty(datasets_dir);
    Ok(dest)
}

/// Unpacks `zip` beside its final place, verifies the layout, writes `meta.json` and renames the
/// result to `datasets_dir/<name>/`. On any failure the unpacking folder is removed, so nothing
/// half-unpacked is left behind.
pub fn install_zip(ds: &OgbDataset, zip: &Path, datasets_dir: &Path) -> Result<PathBuf> {
    let dest = datasets_dir.join(ds.name);
    if dest.exists() {
        bail!("{} already exists; remove it first", dest.display());
    }
    let staging = datasets_dir.join(WORK_DIR).join(format!("{}.unpacking", ds.name));
    // A run killed mid-unpack leaves this behind.
    remove_if_exists(&staging)?;
    let outcome = unpack_into_place(ds, zip, &staging, &dest);
    let cleanup = remove_if_exists(&staging);
    remove_work_dir_if_empty(datasets_dir);
    outcome?;
    cleanup?;
    eprintln!("{}: ready in {}", ds.name, dest.display());
    if !ds.loadable() {
        eprintln!(
            "note: Halo's loader reads the CSV layout only; {} ships binary raw/data.npz and raw/node-label.npz: \
             convert it with `halo datasets import {} --out DIR`",
            ds.name,
            dest.display()
        );
    }
    Ok(dest)
}

fn unpack_into_place(ds: &OgbDataset, zip: &Path, staging: &Path, dest: &Path) -> Result<()> {
    unpack::extract(zip, staging, ds.name).with_context(|| {
        format!("unpacking failed; if {} is damaged, delete it and rerun to download it again", zip.display())
    })?;
    let root =
        unpack::payload_root(staging).with_context(|| format!("{}: unexpected archive layout", zip.display()))?;
    verify::layout(ds, &root).with_context(|| format!("{} does not hold a complete {}", zip.display(), ds.name))?;
    meta::write(ds, &root)?;
    fs::rename(&root, dest).with_context(|| format!("moving {} to {}", root.display(), dest.display()))
}

/// Removes the work folder when nothing is left in it; other downloads' files keep it in place.
fn remove_work_dir_if_empty(datasets_dir: &Path) {
    // Failure here only means the folder is still in use (or already gone).
    let _ = fs::remove_dir(datasets_dir.join(WORK_DIR));
}

fn remove_if_exists(path: &Path) -> Result<()> {
    let removed = if path.is_dir() { fs::remove_dir_all(path) } else { fs::remove_file(path) };
    match removed {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e).with_context(|| format!("removing {}", path.display())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datasets::lookup;
    use crate::testutil::{Behaviour, arxiv_entries, serve, write_zip};

    fn arxiv() -> &'static OgbDataset {
        lookup("ogbn-arxiv").unwrap()
    }

    /// Everything under `dir`, as sorted relative paths: proves what was (not) left behind.
    fn tree(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack: Vec<PathBuf> = dir.exists().then(|| dir.to_owned()).into_iter().collect();
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                out.push(p.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
                if p.is_dir() {
                    stack.push(p);
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn installs_a_fixture_zip_into_the_halo_layout() {
        let tmp = tempfile::tempdir().unwrap();
        let zip = tmp.path().join("arxiv.zip");
        write_zip(&zip, &arxiv_entries(&[]));
        let datasets = tmp.path().join("datasets");
        let dest = install_zip(arxiv(), &zip, &datasets).unwrap();
        assert_eq!(dest, datasets.join("ogbn-arxiv"));
        verify::layout(arxiv(), &dest).unwrap();
        assert!(dest.join("meta.json").is_file());
        assert!(dest.join("raw/node_year.csv.gz").is_file(), "extra OGB files are kept");
        assert!(!datasets.join(WORK_DIR).exists(), "no staging left");
    }

    #[test]
    fn a_zip_missing_a_required_file_names_it_and_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let zip = tmp.path().join("arxiv.zip");
        write_zip(&zip, &arxiv_entries(&["raw/node-label.csv.gz"]));
        let datasets = tmp.path().join("datasets");
        let err = format!("{:#}", install_zip(arxiv(), &zip, &datasets).unwrap_err());
        assert!(err.contains("missing raw/node-label.csv.gz"), "{err}");
        assert_eq!(tree(&datasets), Vec::<String>::new());
    }

    #[test]
    fn a_corrupt_zip_fails_and_leaves_nothing_half_unpacked() {
        let tmp = tempfile::tempdir().unwrap();
        let zip = tmp.path().join("arxiv.zip");
        write_zip(&zip, &arxiv_entries(&[]));
        // Truncation keeps the local entries but loses the central directory.
        let bytes = fs::read(&zip).unwrap();
        fs::write(&zip, &bytes[..bytes.len() / 2]).unwrap();
        let datasets = tmp.path().join("datasets");
        let err = format!("{:#}", install_zip(arxiv(), &zip, &datasets).unwrap_err());
        assert!(err.contains("not a readable zip"), "{err}");
        assert_eq!(tree(&datasets), Vec::<String>::new());
    }

    #[test]
    fn a_leftover_staging_folder_is_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let zip = tmp.path().join("arxiv.zip");
        write_zip(&zip, &arxiv_entries(&[]));
        let datasets = tmp.path().join("datasets");
        let stale = datasets.join(WORK_DIR).join("ogbn-arxiv.unpacking/junk");
        fs::create_dir_all(&stale).unwrap();
        install_zip(arxiv(), &zip, &datasets).unwrap();
        assert!(!stale.exists());
    }

    #[test]
    fn download_over_loopback_installs_and_cleans_up_then_is_idempotent() {
        let tmp = tempfile::tempdir().unwrap();
        let zip = tmp.path().join("fixture.zip");
        write_zip(&zip, &arxiv_entries(&[]));
        let body = fs::read(&zip).unwrap();
        let datasets = tmp.path().join("datasets");
        // Half the zip is already there from an "interrupted" run.
        let work = datasets.join(WORK_DIR);
        fs::create_dir_all(&work).unwrap();
        fs::write(work.join("ogbn-arxiv.zip.part"), &body[..body.len() / 2]).unwrap();

        let server = serve(body.clone(), vec![Behaviour::Honour]);
        let ds = arxiv();
        let agent = download::agent(false);
        let dest = download_from(ds, &datasets, &agent, &server.url).unwrap();
        assert_eq!(server.ranges(), vec![Some(format!("bytes={}-", body.len() / 2))]);
        verify::layout(ds, &dest).unwrap();
        assert!(!work.exists(), "zip and work folder removed after success");

        // Second run: nothing to fetch (the server would refuse: its script is spent).
        assert_eq!(download(ds, &datasets, &agent).unwrap(), dest);
    }

    #[test]
    fn a_bad_or_refused_download_leaves_no_debris() {
        let tmp = tempfile::tempdir().unwrap();
        let datasets = tmp.path().join("datasets");
        let server = serve(b"<html>maintenance</html>".to_vec(), vec![Behaviour::Honour]);
        let err = format!("{:#}", download_from(arxiv(), &datasets, &download::agent(false), &server.url).unwrap_err());
        assert!(err.contains("rerun to download it again"), "{err}");
        assert_eq!(tree(&datasets), Vec::<String>::new());

        // A refused request leaves no empty work folder either.
        let server = serve(Vec::new(), vec![Behaviour::NotFound]);
        let err = format!("{:#}", download_from(arxiv(), &datasets, &download::agent(false), &server.url).unwrap_err());
        assert!(err.contains("HTTP 404"), "{err}");
        assert_eq!(tree(&datasets), Vec::<String>::new());
    }

    #[test]
    fn an_incomplete_existing_folder_is_reported_not_overwritten() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("ogbn-arxiv/raw");
        fs::create_dir_all(&dest).unwrap();
        let err = format!("{:#}", download(arxiv(), tmp.path(), &download::agent(false)).unwrap_err());
        assert!(err.contains("exists but is incomplete") && err.contains("missing raw/edge.csv.gz"), "{err}");
        assert!(dest.exists());
    }
}
