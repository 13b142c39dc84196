//! The error of writing checkpoints and resuming from them.

use std::path::{Path, PathBuf};

use comm_hierarchy::CommError;
use graph_partition::fs::WriteError;

/// Why a checkpoint could not be written or resumed from.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("cannot {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file is truncated, corrupt or of another format.
    #[error("{}: {detail}", path.display())]
    Corrupt { path: PathBuf, detail: String },
    #[error("--resume {}: no complete checkpoint there (a directory epoch-N holding manifest.json)", dir.display())]
    NoCheckpoint { dir: PathBuf },
    /// The checkpoint was written by a different run.
    #[error("--resume {}: {what}", path.display())]
    Mismatch { path: PathBuf, what: String },
    #[error("checkpoints do not cover method `{method}` yet: {detail}")]
    Unsupported { method: String, detail: String },
    /// The ranks could not agree that every shard is written.
    #[error("checkpoint: {0}")]
    Comm(#[from] CommError),
}

impl CheckpointError {
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        CheckpointError::Io { action, path: path.to_path_buf(), source }
    }
}

impl From<WriteError> for CheckpointError {
    fn from(WriteError { action, path, source }: WriteError) -> Self {
        CheckpointError::Io { action, path, source }
    }
}
