//! Output files: checked before any work starts, written whole or not at all.
//!
//! A long run that fails at its very end because the report's directory is missing loses
//! everything, so [`check_writable`] runs before the work. [`write_atomically`] writes through a
//! file beside the target and a rename, so a reader (a script polling the report, or a run
//! interrupted mid-write) never sees half a file. [`refuse_clashes`] stops a command whose
//! outputs would write over each other, or over one of its inputs.

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};
use graph_partition::fs::{WriteError, write_atomic};
pub use trainer::progress::bytes;

/// Checks that `path` can be written: it is not a directory, its directory exists, and a file
/// can be created there (creating one is the only portable test of permission). `flag` names
/// where the path came from in errors (e.g. `--report`).
pub fn check_writable(path: &Path, flag: &str) -> anyhow::Result<()> {
    if path.is_dir() {
        bail!("{flag} {}: is a directory", path.display());
    }
    let dir = directory_of(path);
    if !dir.is_dir() {
        bail!("{flag} {}: directory {} does not exist", path.display(), dir.display());
    }
    let probe = probe_file(path);
    std::fs::File::create_new(&probe)
        .and_then(|_| std::fs::remove_file(&probe))
        .with_context(|| format!("{flag} {}: cannot create files in {}", path.display(), dir.display()))
}

/// Replaces `path` with `text` ([`write_atomic`]); errors name `flag`.
pub fn write_atomically(path: &Path, text: &str, flag: &str) -> anyhow::Result<()> {
    write_atomic(path, |tmp| std::fs::write(tmp, text)).map_err(|e| flag_error(e, path, flag))
}

/// An atomic write's error as `cannot <action> <flag> <path>: <cause>`.
pub fn flag_error(e: WriteError, path: &Path, flag: &str) -> anyhow::Error {
    anyhow::Error::new(e.source).context(format!("cannot {} {flag} {}", e.action, path.display()))
}

/// A path a command reads or writes, named as its user gave it.
#[derive(Debug, Clone)]
pub struct Place {
    /// How errors name it: `--report`, `--save-model's sidecar`, ...
    pub name: String,
    pub path: PathBuf,
    /// A folder the command writes files into (`--checkpoint-dir`), rather than one file.
    pub folder: bool,
    /// Written by the command; an input is only read.
    pub written: bool,
}

impl Place {
    /// A file the command writes.
    pub fn output(name: impl Into<String>, path: &Path) -> Self {
        Self { name: name.into(), path: path.to_path_buf(), folder: false, written: true }
    }

    /// A folder the command writes into.
    pub fn output_folder(name: impl Into<String>, path: &Path) -> Self {
        Self { folder: true, ..Self::output(name, path) }
    }

    /// A file the command reads.
    pub fn input(name: impl Into<String>, path: &Path) -> Self {
        Self { written: false, ..Self::output(name, path) }
    }
}

/// Refuses, before any work, two places of which one is written and the other is the same
/// file, or lies inside (or holds) a folder written into: the later write would replace the
/// other output, or the input. The error names both.
pub fn refuse_clashes(places: &[Place]) -> anyhow::Result<()> {
    let resolved: Vec<PathBuf> = places.iter().map(|p| normalized(&p.path)).collect();
    for (i, a) in places.iter().enumerate() {
        for (j, b) in places.iter().enumerate().skip(i + 1) {
            if !(a.written || b.written) {
                continue;
            }
            let (pa, pb) = (&resolved[i], &resolved[j]);
            let clash = pa == pb || (a.folder && pb.starts_with(pa)) || (b.folder && pa.starts_with(pb));
            if clash {
                let how = if pa == pb {
                    "the same path"
                } else if pb.starts_with(pa) {
                    "a folder and a path inside it"
                } else {
                    "a path and the folder that holds it"
                };
                bail!(
                    "{} {} and {} {} are {how}: one would write over the other; give them separate paths",
                    a.name,
                    a.path.display(),
                    b.name,
                    b.path.display()
                );
            }
        }
    }
    Ok(())
}

/// `path` absolute, without `.` and `..`, through the real location of its directory where it
/// exists (a symbolic link to a folder names the folder).
fn normalized(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut lexical = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                lexical.pop();
            }
            other => lexical.push(other),
        }
    }
    match (lexical.parent().and_then(|dir| dir.canonicalize().ok()), lexical.file_name()) {
        (Some(dir), Some(name)) => dir.join(name),
        _ => lexical,
    }
}

/// Seconds to three significant figures: epochs of a small graph take a fraction of a
/// millisecond of modeled communication, those of a large one minutes.
pub fn seconds(s: f64) -> String {
    let decimals = if s > 0.0 { (2.0 - s.log10().floor()).clamp(0.0, 9.0) as usize } else { 0 };
    format!("{s:.decimals$} s")
}

/// The directory `path` lies in (`.` for a bare file name).
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// A hidden file next to `path`, unique to this process, for a write probe.
fn probe_file(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    directory_of(path).join(format!(".{name}.halo-probe-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_or_a_directory_target_names_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_writable(&dir.path().join("absent/r.json"), "--report").unwrap_err().to_string();
        assert!(err.starts_with("--report ") && err.contains("absent") && err.contains("does not exist"), "{err}");
        let err = check_writable(dir.path(), "--report").unwrap_err().to_string();
        assert!(err.starts_with("--report ") && err.contains("is a directory"), "{err}");
    }

    #[test]
    fn a_check_leaves_nothing_behind_and_a_write_replaces_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        check_writable(&path, "--report").unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the probe is removed");
        std::fs::write(&path, "old, longer text").unwrap();
        write_atomically(&path, "new", "--report").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file is left");
    }

    #[test]
    fn outputs_on_one_path_or_inside_a_written_folder_clash() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        let clash = |places: &[Place]| refuse_clashes(places).unwrap_err().to_string();
        let err =
            clash(&[Place::output("--report", &d.join("x.json")), Place::output("--out", &d.join("sub/../x.json"))]);
        assert!(err.starts_with("--report ") && err.contains("--out ") && err.contains("the same path"), "{err}");
        let err = clash(&[
            Place::output_folder("--checkpoint-dir", &d.join("ck")),
            Place::output("--report", &d.join("ck/r.json")),
        ]);
        assert!(err.contains("--checkpoint-dir") && err.contains("a folder and a path inside it"), "{err}");
        let err = clash(&[Place::output("--report", &d.join("sub")), Place::output_folder("--out", d)]);
        assert!(err.contains("the folder that holds it"), "{err}");
        let err =
            clash(&[Place::input("--config", &d.join("run.toml")), Place::output("--report", &d.join("./run.toml"))]);
        assert!(err.contains("--config") && err.contains("--report"), "{err}");
        refuse_clashes(&[Place::input("a", &d.join("r.json")), Place::input("b", &d.join("r.json"))]).unwrap();
        refuse_clashes(&[Place::output("--report", &d.join("r.json")), Place::output("--out", &d.join("p.csv"))])
            .unwrap();
        refuse_clashes(&[
            Place::output("--report", &d.join("ck.json")),
            Place::output_folder("--checkpoint-dir", &d.join("ck")),
        ])
        .unwrap();
    }

    #[test]
    fn seconds_keep_three_significant_figures() {
        assert_eq!(seconds(0.0), "0 s");
        assert_eq!(seconds(0.000_312_34), "0.000312 s");
        assert_eq!(seconds(0.034_78), "0.0348 s");
        assert_eq!(seconds(2.5), "2.50 s");
        assert_eq!(seconds(85.04), "85.0 s");
        assert_eq!(seconds(1234.5), "1234 s");
    }

    #[test]
    fn a_bare_file_name_lies_in_the_working_directory() {
        assert_eq!(directory_of(Path::new("r.json")), Path::new("."));
        assert_eq!(directory_of(Path::new("out/r.json")), Path::new("out"));
    }
}
