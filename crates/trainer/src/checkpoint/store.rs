//! The checkpoint directory: one subdirectory per checkpoint, `epoch-<N>/`, holding one shard
//! per rank (`rank-<r>.bin`) and, once every shard is on disk, the manifest (`manifest.json`)
//! that commits the set. Files are written atomically ([`graph_partition::fs::write_atomic`]: a
//! temporary file, fsync, rename, fsync of the directory). A checkpoint without its manifest is torn and never read; a temporary
//! file is never read.

use std::fs;
use std::path::{Path, PathBuf};

use graph_partition::fs::sync_dir;

use serde::{Deserialize, Serialize};

use crate::error::CheckpointError;
use crate::report::{Best, EpochRecord};

/// The manifest's name inside a checkpoint directory.
pub const MANIFEST: &str = "manifest.json";
/// The `format` field of every manifest.
const FORMAT: &str = "halo-checkpoint";

/// What the manifest records: the set of shards and the loop's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: String,
    pub version: u32,
    /// The last epoch the checkpoint includes.
    pub epoch: usize,
    pub world_size: usize,
    pub method: String,
    /// The run's configuration (`TrainConfig` as JSON).
    pub config: serde_json::Value,
    /// One entry per rank, in rank order.
    pub shards: Vec<ShardEntry>,
    /// The epochs run so far.
    pub epochs: Vec<EpochRecord>,
    /// The best validation epoch so far.
    pub best: Option<Best>,
}

/// One shard of a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardEntry {
    pub file: String,
    pub bytes: u64,
}

impl Manifest {
    pub fn new(
        epoch: usize,
        method: &str,
        config: serde_json::Value,
        shard_bytes: &[u64],
        epochs: Vec<EpochRecord>,
        best: Option<Best>,
    ) -> Self {
        let shards =
            shard_bytes.iter().enumerate().map(|(rank, &bytes)| ShardEntry { file: shard_name(rank), bytes }).collect();
        Self {
            format: FORMAT.to_string(),
            version: super::shard::VERSION,
            epoch,
            world_size: shard_bytes.len(),
            method: method.to_string(),
            config,
            shards,
            epochs,
            best,
        }
    }

    /// Reads and checks the manifest at `path`.
    pub fn read(path: &Path) -> Result<Self, CheckpointError> {
        let bytes = fs::read(path).map_err(|source| CheckpointError::io("read", path, source))?;
        let corrupt = |detail: String| CheckpointError::Corrupt { path: path.to_path_buf(), detail };
        let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if manifest.format != FORMAT || manifest.version != super::shard::VERSION {
            return Err(corrupt(format!(
                "format `{}` version {}; this build reads `{FORMAT}` version {}",
                manifest.format,
                manifest.version,
                super::shard::VERSION
            )));
        }
        if manifest.shards.len() != manifest.world_size
            || manifest.shards.iter().enumerate().any(|(rank, s)| s.file != shard_name(rank))
        {
            return Err(corrupt(format!("the shard list does not name rank-0000.. for {} ranks", manifest.world_size)));
        }
        Ok(manifest)
    }
}

/// The file of `rank`'s shard inside a checkpoint directory.
pub fn shard_name(rank: usize) -> String {
    format!("rank-{rank:04}.bin")
}

/// The directory of the checkpoint after `epoch` under `root`.
pub fn epoch_dir(root: &Path, epoch: usize) -> PathBuf {
    root.join(format!("epoch-{epoch:06}"))
}

/// The epochs of the checkpoint directories under `root` (complete or not), newest first.
fn epochs_under(root: &Path) -> Result<Vec<usize>, CheckpointError> {
    let entries = fs::read_dir(root).map_err(|source| CheckpointError::io("list", root, source))?;
    let mut epochs: Vec<usize> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("epoch-")?.parse().ok())
        .collect();
    epochs.sort_unstable_by(|a, b| b.cmp(a));
    Ok(epochs)
}

/// The newest complete checkpoint under `root` (one whose manifest was committed): its
/// directory and manifest.
pub fn newest_complete(root: &Path) -> Result<(PathBuf, Manifest), CheckpointError> {
    for epoch in epochs_under(root)? {
        let dir = epoch_dir(root, epoch);
        let manifest = dir.join(MANIFEST);
        if manifest.is_file() {
            return Ok((dir, Manifest::read(&manifest)?));
        }
    }
    Err(CheckpointError::NoCheckpoint { dir: root.to_path_buf() })
}

/// Deletes the checkpoints under `root` older than `newest`, keeping the `keep - 1` newest
/// complete ones among them; torn ones older than `newest` go too.
pub fn prune(root: &Path, newest: usize, keep: usize) -> Result<(), CheckpointError> {
    let mut kept = 1;
    for epoch in epochs_under(root)?.into_iter().filter(|&e| e < newest) {
        let dir = epoch_dir(root, epoch);
        if kept < keep && dir.join(MANIFEST).is_file() {
            kept += 1;
            continue;
        }
        fs::remove_dir_all(&dir).map_err(|source| CheckpointError::io("delete", &dir, source))?;
    }
    Ok(())
}

/// Creates `dir` (and its parents) durably.
pub fn create_dir(dir: &Path) -> Result<(), CheckpointError> {
    fs::create_dir_all(dir).map_err(|source| CheckpointError::io("create", dir, source))?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        sync_dir(parent)?;
    }
    Ok(())
}
