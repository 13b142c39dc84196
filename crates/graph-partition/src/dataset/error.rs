//! Errors from reading, caching and writing datasets. Every message names the file at fault
//! and, for content errors, the 1-based line.

use std::io;
use std::path::PathBuf;

use crate::csr::CsrError;

/// What is wrong with a NumPy array ([`super::npy`]).
#[derive(Debug, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy array (no \\x93NUMPY magic)")]
    BadMagic,
    #[error(".npy format version {0}.{1} is not supported (1.0, 2.0 and 3.0 are)")]
    Version(u8, u8),
    #[error("malformed .npy header: {0}")]
    Header(String),
    #[error("unsupported dtype `{0}` (supported, little-endian: bool, uint8, int32, int64, float32, float64)")]
    Dtype(String),
    #[error("Fortran-order arrays are not supported; save a C-order copy (numpy.ascontiguousarray)")]
    FortranOrder,
    #[error("shape {0} holds more elements than this machine can address")]
    TooLarge(String),
    #[error("ends after {read} of its {expected} elements (truncated)")]
    Truncated { read: u64, expected: u64 },
    #[error("has shape {found}, expected {expected}")]
    Shape { found: String, expected: String },
    #[error("has dtype {found}; node ids need an integer dtype")]
    NotInteger { found: &'static str },
    #[error("read failed: {0}")]
    Io(#[from] io::Error),
}

/// What is wrong with one line of a text file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    #[error("malformed {expected} `{token}`")]
    MalformedNumber { token: String, expected: &'static str },
    #[error("expected {expected} columns, found {found}")]
    RaggedRow { expected: usize, found: usize },
    #[error("node id {id} is out of range (the graph has {num_nodes} nodes)")]
    NodeOutOfRange { id: u64, num_nodes: usize },
    #[error("invalid class label `{token}` (expected a non-negative integer, or nan for unlabelled)")]
    InvalidLabel { token: String },
    #[error("empty line")]
    EmptyLine,
    #[error("not valid UTF-8 text")]
    NotUtf8,
    #[error("column {column}: `{token}` is not a finite 32-bit float (NaN, infinite, or beyond ±3.4e38)")]
    NonFinite { token: String, column: usize },
    #[error(
        "`{token}` is not 0 or 1: {columns} label columns are multi-label 0/1 targets (or nan), unless meta.json's \
         `task` says \"multi-label\"; single-label classes take one column, without the node id"
    )]
    NotMultiLabel { token: String, columns: usize },
    #[error("node {id} has no label (nan in {labels})")]
    Unlabelled { id: u32, labels: String },
    #[error("node {id} is already in the {split} split")]
    InTwoSplits { id: u32, split: &'static str },
    #[error("`{value}` is not a finite 32-bit float (NaN, infinite, or beyond ±3.4e38)")]
    NonFiniteValue { value: String },
    #[error("class {class} is out of range (--num-classes is {num_classes})")]
    LabelOutOfRange { class: u64, num_classes: usize },
}

impl ParseErrorKind {
    /// A `MalformedNumber` quoting at most a short prefix of the offending token.
    pub(crate) fn malformed(token: &str, expected: &'static str) -> Self {
        Self::MalformedNumber { token: shorten(token), expected }
    }

    pub(crate) fn invalid_label(token: &str) -> Self {
        Self::InvalidLabel { token: shorten(token) }
    }

    /// A `NonFinite` value at 1-based `column`.
    pub(crate) fn non_finite(token: &str, column: usize) -> Self {
        Self::NonFinite { token: shorten(token.trim()), column }
    }
}

fn shorten(token: &str) -> String {
    const MAX: usize = 40;
    match token.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &token[..cut]),
        None => token.to_string(),
    }
}

/// Why a dataset could not be loaded, cached or written. Each message is complete on its own:
/// an underlying error is quoted in it, not chained as a `source()`, so that printing the chain
/// shows each cause once.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error(
        "{path}: no such dataset directory (`cargo xtask download <ogb-name>` downloads OGB datasets into datasets/)",
        path = .path.display()
    )]
    NoDataset { path: PathBuf },
    #[error("{path}: missing {what}", path = .path.display())]
    MissingFile { path: PathBuf, what: String },
    #[error("{path}: {error}", path = .path.display())]
    Io { path: PathBuf, error: std::io::Error },
    #[error("{path}: file is empty", path = .path.display())]
    EmptyFile { path: PathBuf },
    #[error("{path}:{line}: {kind}", path = .path.display())]
    Parse { path: PathBuf, line: u64, kind: ParseErrorKind },
    #[error("{path}: has {found} {unit}, expected {expected} ({why})", path = .path.display())]
    CountMismatch { path: PathBuf, unit: &'static str, found: u64, expected: u64, why: String },
    #[error("{path}: no split found; expected split/<name>/{{train,valid,test}}.csv.gz", path = .path.display())]
    NoSplit { path: PathBuf },
    #[error(
        "{path}: several splits ({}); choose one with --split NAME",
        .choices.join(", "),
        path = .path.display()
    )]
    AmbiguousSplit { path: PathBuf, choices: Vec<String> },
    #[error(
        "{path}: no split named `{name}` (available: {})",
        .available.join(", "),
        path = .path.display()
    )]
    UnknownSplit { path: PathBuf, name: String, available: Vec<String> },
    #[error("{path}: {message}", path = .path.display())]
    InvalidMeta { path: PathBuf, message: String },
    #[error("{path}: invalid graph: {error}", path = .path.display())]
    Graph { path: PathBuf, error: CsrError },
    #[error("dataset `{name}` is inconsistent: {message}")]
    Inconsistent { name: String, message: String },
    /// A NumPy array that cannot be read; `array` names the member of an `.npz`.
    #[error("{}: {error}", located(.path, .array))]
    Npy { path: PathBuf, array: Option<String>, error: Box<NpyError> },
    /// A bad element of a NumPy array; `place` names the member of an `.npz` and the index,
    /// e.g. ``array `x` at [3, 1]``.
    #[error("{path}: {place}: {kind}", path = .path.display())]
    Element { path: PathBuf, place: String, kind: ParseErrorKind },
    #[error("{path}: cannot import: {message}", path = .path.display())]
    Import { path: PathBuf, message: String },
}

/// `FILE` or `FILE: array `KEY``.
fn located(path: &std::path::Path, array: &Option<String>) -> String {
    match array {
        Some(key) => format!("{}: array `{key}`", path.display()),
        None => path.display().to_string(),
    }
}

impl DatasetError {
    pub(crate) fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        Self::Io { path: path.into(), error }
    }

    /// The file or directory the error is about, when it names one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            Self::NoDataset { path }
            | Self::MissingFile { path, .. }
            | Self::Io { path, .. }
            | Self::EmptyFile { path }
            | Self::Parse { path, .. }
            | Self::CountMismatch { path, .. }
            | Self::NoSplit { path }
            | Self::AmbiguousSplit { path, .. }
            | Self::UnknownSplit { path, .. }
            | Self::InvalidMeta { path, .. }
            | Self::Graph { path, .. }
            | Self::Npy { path, .. }
            | Self::Element { path, .. }
            | Self::Import { path, .. } => Some(path),
            Self::Inconsistent { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_file_and_line() {
        let err = DatasetError::Parse {
            path: PathBuf::from("d/raw/node-feat.csv.gz"),
            line: 7,
            kind: ParseErrorKind::RaggedRow { expected: 3, found: 2 },
        };
        assert_eq!(err.to_string(), "d/raw/node-feat.csv.gz:7: expected 3 columns, found 2");
        let long = "x".repeat(100);
        let kind = ParseErrorKind::malformed(&long, "float");
        assert_eq!(kind.to_string(), format!("malformed float `{}...`", "x".repeat(40)));
    }
}
