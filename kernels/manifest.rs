//! The PTX manifest `kernels/ptx/MANIFEST.tsv` and the kernel source listing. Shared by
//! `cargo xtask ptx` (which writes and checks it) and gnn-core's build script (which refuses
//! stale PTX); both include this file by path, so there is one definition of "current".

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// File name of the manifest inside `kernels/ptx/`.
pub const MANIFEST: &str = "MANIFEST.tsv";

/// The command that regenerates the PTX, named in every staleness error.
pub const REBUILD: &str = "cargo xtask ptx";

const HEADER: &str = "kernel\tsource_fnv1a64\tarch\ttoolkit\tptx_isa";

/// One compiled kernel file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The `.cu` file stem; its PTX is `<kernel>.ptx`.
    pub kernel: String,
    /// [`source_hash`] of the `.cu` file and every header, at compile time.
    pub source_hash: String,
    pub arch: String,
    /// e.g. `CUDA 13.0`, from the PTX header.
    pub toolkit: String,
    /// The PTX `.version`, e.g. `9.0`.
    pub ptx_isa: String,
}

/// The kernel sources in `dir`: `.cu` files and `.cuh` headers, each sorted by name.
pub fn sources(dir: &Path) -> io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let (mut cu, mut cuh) = (Vec::new(), Vec::new());
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.is_file() {
            continue;
        }
        match path.extension().and_then(OsStr::to_str) {
            Some("cu") => cu.push(path),
            Some("cuh") => cuh.push(path),
            _ => {}
        }
    }
    cu.sort();
    cuh.sort();
    Ok((cu, cuh))
}

/// FNV-1a (64-bit) over the kernel source followed by every header, as 16 hex digits. Any
/// header change marks every kernel stale: headers are few and shared by all kernels.
pub fn source_hash(cu: &[u8], headers: &[Vec<u8>]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in cu.iter().chain(headers.iter().flatten()) {
        h = (h ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Reads every header in `cuh` for [`source_hash`].
pub fn read_headers(cuh: &[PathBuf]) -> io::Result<Vec<Vec<u8>>> {
    cuh.iter().map(fs::read).collect()
}

/// The manifest text for `entries`.
pub fn render(entries: &[Entry]) -> String {
    let mut out = format!("{HEADER}\n");
    for e in entries {
        out.push_str(&format!("{}\t{}\t{}\t{}\t{}\n", e.kernel, e.source_hash, e.arch, e.toolkit, e.ptx_isa));
    }
    out
}

/// Parses manifest text; the error names the line at fault.
pub fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h == HEADER => {}
        _ => return Err(format!("line 1: expected the header `{HEADER}`")),
    }
    lines
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, line)| match line.split('\t').collect::<Vec<_>>()[..] {
            [kernel, hash, arch, toolkit, isa] => Ok(Entry {
                kernel: kernel.into(),
                source_hash: hash.into(),
                arch: arch.into(),
                toolkit: toolkit.into(),
                ptx_isa: isa.into(),
            }),
            _ => Err(format!("line {}: expected 5 tab-separated fields", i + 1)),
        })
        .collect()
}
