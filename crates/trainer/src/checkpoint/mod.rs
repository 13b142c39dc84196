//! Checkpoints and exact resumption (`--checkpoint-dir D --checkpoint-every N`, `--resume D`).
//!
//! A checkpoint after epoch `e` is what the next epoch depends on: the parameters, Adam's
//! moments and step count, the epochs so far and the best validation epoch (with the
//! parameters of that epoch, for `--save-model`), and a method's own state blob
//! ([`crate::train_loop::Strategy::checkpoint_state`]). Every random draw of training is keyed
//! by (seed, epoch, ...), so the epoch is the only RNG counter there is, and a resumed run
//! repeats the uninterrupted one bit for bit.
//!
//! Every rank writes its own shard ([`shard`]), then the ranks agree that all shards are on
//! disk (a `checkpoint` all-reduce that also carries their sizes) and rank 0 commits the set
//! with the manifest ([`store`]). Resuming takes the newest checkpoint whose manifest was
//! committed, and refuses, naming what differs, a different configuration (keys other than
//! `epochs`, `patience`, `eval-every`, `report`, `threads`, `[reliability]`, `[memory]` and `backend`), world size,
//! method, partition (each shard keeps a fingerprint of its rank's data) or a truncated or
//! corrupt file.
//!
//! Covered: `single` (CPU, and the device path, whose parameters and moments are downloaded into
//! the CPU layout) and every cut method: `distributed::worker::Worker` fills the method blob with
//! the exchange's state and its controller's (`Controller::save_state` / `restore_state`), and
//! under parameter servers a server rank's shard holds its slice's Adam moments. The mini-batch
//! runners save the model and Adam, and for data-parallel workers the method's
//! `WorkerHooks::save_state` / `restore_state` (featpart's fetch plan and trial estimates).

pub mod shard;
pub mod store;
#[cfg(test)]
mod tests;

pub use shard::Moments;

use std::path::{Path, PathBuf};
use std::time::Duration;

use comm_hierarchy::Communicator;
use comm_hierarchy::fault::Fault;
use comm_hierarchy::point::Point;
use gnn_core::{Learner, Optim, State};
use graph_partition::fs::write_atomic;
use serde_json::Value;

use crate::config::TrainConfig;
use crate::error::CheckpointError;
use crate::report::{Best, EpochRecord};
use shard::Shard;
use store::Manifest;

/// One worker's state in a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerState {
    pub params: Vec<f32>,
    pub optimizer: Moments,
    /// The method's own state (a controller's settings, caches, ...); empty when it has none.
    pub method: Vec<u8>,
}

impl WorkerState {
    /// The state of a worker that trains `model` with `optimizer` and keeps `method` besides
    /// (a device model's downloaded into the CPU model's flat layout).
    pub fn of<L: Learner>(model: &L, optimizer: &Optim, method: Vec<u8>) -> Result<Self, String> {
        let State { params, m, v, t } =
            model.state(optimizer).map_err(|e| format!("reading the model's state: {e}"))?;
        Ok(Self { params, optimizer: Moments { m, v, t }, method })
    }

    /// Puts the parameters and the optimizer's state back into `model` and `optimizer`;
    /// returns the method blob.
    pub fn restore<L: Learner>(self, model: &mut L, optimizer: &mut Optim) -> Result<Vec<u8>, String> {
        let Moments { m, v, t } = self.optimizer;
        model.restore(optimizer, State { params: self.params, m, v, t }).map_err(|e| e.to_string())?;
        Ok(self.method)
    }
}

/// How the ranks agree that a checkpoint's shards are all written.
pub enum Agreement<'a> {
    /// One process: nothing to agree on; a `checkpoint` fault fires here.
    Alone { fault: Option<Fault>, hang_for: Duration },
    /// A `checkpoint` all-reduce over the job's communicator.
    Cluster(&'a dyn Communicator),
}

/// Who this rank is and what it trains on, for writing and checking checkpoints.
pub struct RunIdentity<'a> {
    pub method: &'a str,
    pub config: &'a TrainConfig,
    pub rank: usize,
    pub world: usize,
    /// Hash of the data this rank trains on ([`fingerprint_part`], or the graph's).
    pub fingerprint: u64,
}

/// Writes a checkpoint every `every` epochs.
pub struct Checkpointer<'a> {
    root: PathBuf,
    every: usize,
    keep: usize,
    method: String,
    config: Value,
    rank: usize,
    world: usize,
    fingerprint: u64,
    agreement: Agreement<'a>,
    /// Checkpoints this writer started (the N of a `checkpoint` fault's `:N`).
    started: std::cell::Cell<u32>,
}

/// What a run resumes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    /// The last epoch the checkpoint includes.
    pub epoch: usize,
    pub state: WorkerState,
    pub best_params: Option<Vec<f32>>,
    pub epochs: Vec<EpochRecord>,
    pub best: Option<Best>,
    /// The shard it came from (named in errors about its contents).
    pub shard: PathBuf,
}

/// The checkpoint writer and the resumption point of a run, as its configuration says.
pub struct Checkpoints<'a> {
    pub writer: Option<Checkpointer<'a>>,
    pub resume: Option<Resume>,
}

impl<'a> Checkpoints<'a> {
    /// What `id.config`'s `[reliability]` asks for: a writer under `checkpoint-dir`, and the
    /// newest complete checkpoint under `resume`, checked against this run.
    pub fn for_run(id: &RunIdentity<'_>, agreement: Agreement<'a>) -> Result<Self, CheckpointError> {
        let rel = &id.config.reliability;
        let config = config_json(id.config);
        let resume = match &rel.resume {
            Some(root) => Some(load(root, id, &config)?),
            None => None,
        };
        let writer = rel.checkpoint_dir.as_ref().map(|root| Checkpointer {
            root: root.clone(),
            every: rel.checkpoint_every,
            keep: rel.checkpoint_keep,
            method: id.method.to_string(),
            config,
            rank: id.rank,
            world: id.world,
            fingerprint: id.fingerprint,
            agreement,
            started: std::cell::Cell::new(0),
        });
        Ok(Self { writer, resume })
    }
}

impl Checkpointer<'_> {
    /// Whether a checkpoint follows `epoch`.
    pub fn due(&self, epoch: usize) -> bool {
        epoch.is_multiple_of(self.every)
    }

    /// The refusal for a method whose strategy cannot give its state.
    pub fn unsupported(&self, detail: &str) -> CheckpointError {
        CheckpointError::Unsupported { method: self.method.clone(), detail: detail.to_string() }
    }

    /// Writes this rank's shard of the checkpoint after `epoch`; rank 0 commits the set once
    /// every rank has written its own, and deletes the checkpoints past `checkpoint-keep`.
    pub fn save(
        &self,
        epoch: usize,
        state: WorkerState,
        best_params: Option<Vec<f32>>,
        epochs: &[EpochRecord],
        best: Option<Best>,
    ) -> Result<(), CheckpointError> {
        let dir = store::epoch_dir(&self.root, epoch);
        store::create_dir(&dir)?;
        let shard = Shard {
            rank: self.rank as u32,
            world: self.world as u32,
            epoch: epoch as u64,
            fingerprint: self.fingerprint,
            params: state.params,
            best_params,
            optimizer: state.optimizer,
            method: state.method,
        };
        let bytes = shard.encode();
        write_atomic(&dir.join(store::shard_name(self.rank)), |tmp| std::fs::write(tmp, &bytes))?;
        let mut sizes = vec![0.0f64; self.world];
        sizes[self.rank] = bytes.len() as f64;
        self.started.set(self.started.get() + 1);
        match &self.agreement {
            Agreement::Alone { fault, hang_for } => {
                if let Some(fault) = fault {
                    fault.hit(self.rank, Point::Checkpoint, self.started.get(), *hang_for)?;
                }
            }
            Agreement::Cluster(comm) => comm.all_reduce_sum_f64("checkpoint", &mut sizes)?,
        }
        if self.rank != 0 {
            return Ok(());
        }
        let sizes: Vec<u64> = sizes.iter().map(|&s| s as u64).collect();
        let manifest = Manifest::new(epoch, &self.method, self.config.clone(), &sizes, epochs.to_vec(), best);
        let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serialises");
        write_atomic(&dir.join(store::MANIFEST), |tmp| std::fs::write(tmp, &json))?;
        store::prune(&self.root, epoch, self.keep)
    }
}

/// The configuration as the manifest records it. Through text, so that f32 settings keep
/// their shortest form (`0.01`, not the f64 widening `0.009999999776482582`).
fn config_json(config: &TrainConfig) -> Value {
    let text = serde_json::to_string(config).expect("a configuration serialises");
    serde_json::from_str(&text).expect("serde_json reads its own output")
}

/// Keys that may change between a run and its resumption: they do not change the bits of an
/// epoch (how long to train, where to write, how many threads, which backend moves the bytes).
const MAY_DIFFER: [&str; 8] =
    ["epochs", "patience", "eval-every", "report", "threads", "reliability", "memory", "distributed.backend"];

/// The dotted keys whose values differ between `saved` and `current`, with both values.
fn config_diff(saved: &Value, current: &Value, prefix: &str, out: &mut Vec<String>) {
    match (saved, current) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                if MAY_DIFFER.contains(&path.as_str()) {
                    continue;
                }
                let none = Value::Null;
                config_diff(a.get(key).unwrap_or(&none), b.get(key).unwrap_or(&none), &path, out);
            }
        }
        (a, b) if a != b => out.push(format!("`{prefix}` is {a} in the checkpoint, {b} now")),
        _ => {}
    }
}

/// Reads this rank's part of the newest complete checkpoint under `root`, checked against the
/// run `id` describes.
fn load(root: &Path, id: &RunIdentity<'_>, config: &Value) -> Result<Resume, CheckpointError> {
    let (dir, manifest) = store::newest_complete(root)?;
    let manifest_path = dir.join(store::MANIFEST);
    let mismatch = |what: String| CheckpointError::Mismatch { path: manifest_path.clone(), what };
    if manifest.world_size != id.world {
        return Err(mismatch(format!(
            "world size: the checkpoint was written by {} workers, this run has {}",
            manifest.world_size, id.world
        )));
    }
    if manifest.method != id.method {
        return Err(mismatch(format!(
            "method: the checkpoint is of `{}`, this run is `{}`",
            manifest.method, id.method
        )));
    }
    let mut diff = Vec::new();
    config_diff(&manifest.config, config, "", &mut diff);
    if !diff.is_empty() {
        return Err(mismatch(format!("the configuration differs: {}", diff.join("; "))));
    }
    let entry = &manifest.shards[id.rank];
    let path = dir.join(&entry.file);
    let bytes = std::fs::read(&path).map_err(|source| CheckpointError::io("read", &path, source))?;
    let corrupt = |detail: String| CheckpointError::Corrupt { path: path.clone(), detail };
    if bytes.len() as u64 != entry.bytes {
        return Err(corrupt(format!(
            "{} bytes, the manifest says {}: truncated or replaced",
            bytes.len(),
            entry.bytes
        )));
    }
    let shard = Shard::decode(&path, &bytes)?;
    if (shard.rank as usize, shard.world as usize, shard.epoch as usize) != (id.rank, id.world, manifest.epoch) {
        return Err(corrupt(format!(
            "holds rank {} of {} after epoch {}, the manifest expects rank {} of {} after epoch {}",
            shard.rank, shard.world, shard.epoch, id.rank, id.world, manifest.epoch
        )));
    }
    if shard.fingerprint != id.fingerprint {
        return Err(CheckpointError::Mismatch {
            path,
            what: format!(
                "rank {}'s data differs from the checkpoint's (another partition book, partitioner or dataset)",
                id.rank
            ),
        });
    }
    Ok(Resume {
        epoch: manifest.epoch,
        state: WorkerState { params: shard.params, optimizer: shard.optimizer, method: shard.method },
        best_params: shard.best_params,
        epochs: manifest.epochs,
        best: manifest.best,
        shard: path,
    })
}

/// A fingerprint of one worker's part: its vertices' global ids and its local structure.
pub fn fingerprint_part(part: &graph_partition::book::LocalGraph) -> u64 {
    fingerprint_ids(part.local_to_global(), part.csr().fingerprint())
}

/// A fingerprint of a subgraph whose vertex `v` is global vertex `ids[v]` and whose structure
/// has the fingerprint `structure`.
pub fn fingerprint_ids(ids: &[u32], structure: u64) -> u64 {
    let ids: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
    xxhash_rust::xxh3::xxh3_64(&ids) ^ structure.rotate_left(1)
}

/// The number of generated inputs per fuzz target of this crate: 5k, or `HALO_FUZZ_CASES`
/// (the opt-in long run sets 100k).
#[cfg(test)]
pub(crate) fn fuzz_cases() -> u32 {
    std::env::var("HALO_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(5000)
}
