//! Setting a job up: rank 0 partitions the dataset, then cuts one [`WorkerShare`] per worker
//! and sends it before cutting the next (a streamed scatter), or every rank reads its own share
//! from a part folder ([`PartFolder`], written by `halo partition --out`; the same share, bit
//! for bit); every worker then holds only its part of the graph (its primaries and
//! their halo vertices or mirrors) and the rows of those vertices. Input features travel only
//! for the rows a worker computes: an edge-cut worker pulls its halo rows from their owners at
//! every layer, so it never needs their features, unless the method caches them
//! ([`crate::method::HaloFeatures::Cached`]): then every worker fetches its halo rows' features
//! from their owners once ([`WorkerShare::fetch_halo_features`]). Rank 0 drops the whole dataset
//! once the shares are sent (when it owns it).
//!
//! `SharePlan` streams the scatter: rank 0 cuts, sends and drops one share before the next, so it
//! never holds every share at once. The halo-feature fetch is one `all_to_all_v` under
//! `setup/halo-features`, before the memory check and outside every epoch. The wire form of a
//! share is `WireShare`, bincode-encoded.

use comm_hierarchy::wire::{self, Element};
use comm_hierarchy::{CommError, Communicator};
use std::path::PathBuf;

use graph_partition::book::{BookError, LocalGraph, MANIFEST, PartRows, PartitionBook, PartsManifest, split_rows};
use graph_partition::metrics::{PartitionMetrics, measure};
use graph_partition::partition::{PartitionConfig, partition_graph};
use graph_partition::{Dataset, Labels};
use ndarray::{Array2, Axis, s};

use graph_partition::book::CutKind;

use crate::config::{DistributedConfig, TrainConfig};
use crate::data::{DataError, Source, resolve_dataset_dir};
use crate::error::{DistError, TrainError};
use crate::harness::CommClock;
use crate::harness::Described;
use crate::report::{GraphSize, PartitionSummary, SplitSizes};

/// Ledger phase of the setup traffic (outside every epoch's counts).
const PHASE: &str = "setup";

/// Ledger phase of the one fetch of the halo rows' input features (outside every epoch's counts).
pub(crate) const HALO_FEATURES: &str = "setup/halo-features";

/// What one worker holds.
#[derive(Debug)]
pub(crate) struct WorkerShare {
    /// Its part of the graph: local ids, edges, exchange lists, global degrees.
    pub part: LocalGraph,
    /// Input features of the local vertices it computes (local ids `0..features.nrows()`: its
    /// primaries under edge-cut, every local vertex under vertex-cut), and of its halo vertices
    /// once [`WorkerShare::fetch_halo_features`] ran.
    pub features: Array2<f32>,
    /// Labels of its local vertices, one entry (row) per local id.
    pub labels: Labels,
    /// Classes (single-label) or label columns (multi-label).
    pub num_classes: usize,
    /// Local ids of its primaries in the training, validation and test sets.
    pub train: Vec<u32>,
    pub valid: Vec<u32>,
    pub test: Vec<u32>,
    /// Size of the whole training set: the loss is a mean over it.
    pub global_train: usize,
}

/// The wire form of a [`WorkerShare`] (ndarray types are not bincode-encodable).
#[derive(bincode::Encode, bincode::Decode)]
struct WireShare {
    part: LocalGraph,
    in_dim: usize,
    feature_rows: usize,
    features: Vec<f32>,
    /// `None`: single-label classes; `Some(cols)`: multi-label targets with `cols` columns.
    label_cols: Option<usize>,
    classes: Vec<u32>,
    targets: Vec<f32>,
    num_classes: usize,
    splits: [Vec<u32>; 3],
    global_train: usize,
}

impl WorkerShare {
    /// Bytes of the arrays this worker holds: its local graph (as [`LocalGraph`] stores it),
    /// features and labels.
    pub(crate) fn held_bytes(&self) -> u64 {
        let p = &self.part;
        let n = p.num_local();
        let lists: usize = (0..p.num_parts()).map(|q| p.send(q).len() + p.recv(q).len()).sum();
        let copy_sites: usize = (0..p.num_primary()).map(|l| p.copies_of(l).len()).sum();
        let graph = p.csr().indptr().len() * 8
            + p.csr().indices().len() * 4
            + n * 4 * 4 // local_to_global, by_global, in and out degrees
            + lists * 4
            + p.num_copies() * 8
            + (p.num_primary() + 1) * 8
            + copy_sites * 8;
        let labels = match &self.labels {
            Labels::Classes(c) => c.len() * 4,
            Labels::MultiLabel(t) => t.len() * 4,
        };
        (graph + self.features.len() * 4 + labels + (self.train.len() + self.valid.len() + self.test.len()) * 4) as u64
    }

    /// Edge-cut: fetches the input features of this worker's halo rows from their owners, once
    /// (one `all_to_all_v` of raw `f32` rows, `in_dim * 4` bytes a halo row, under
    /// [`HALO_FEATURES`]), so that `features` holds a row per local vertex. A collective: every
    /// worker of the job calls it, with its share as received.
    pub(crate) fn fetch_halo_features(
        &mut self,
        comm: &dyn Communicator,
        clock: &CommClock<'_>,
    ) -> Result<(), DistError> {
        let (part, (rows, width)) = (&self.part, self.features.dim());
        let setup_error = |detail: String| DistError::Setup { rank: comm.rank(), detail };
        if rows != part.num_primary() {
            return Err(setup_error(format!(
                "the halo features are fetched once, into a share with its {} primaries' rows; it has {rows}",
                part.num_primary()
            )));
        }
        // Rows go straight into the messages and out of them into the new matrix: the
        // transient is one message copy each way (in-process workers fetch all at once).
        let own = self.features.as_standard_layout();
        let data = own.as_slice().expect("a standard-layout array is one row-major slice");
        let row_bytes = width * 4;
        let send = (0..comm.size())
            .map(|q| {
                let list = if q == comm.rank() { &[][..] } else { part.send(q) };
                let mut bytes = vec![0u8; list.len() * row_bytes];
                for (out, &l) in bytes.chunks_exact_mut(row_bytes.max(1)).zip(list) {
                    for (b, &v) in out.chunks_exact_mut(4).zip(&data[l as usize * width..][..width]) {
                        v.put(b);
                    }
                }
                bytes
            })
            .collect();
        let received = clock.call(|| comm.all_to_all_v(HALO_FEATURES, send))?;
        let mut features = Array2::zeros((part.num_local(), width));
        features.slice_mut(s![..rows, ..]).assign(&own);
        for (q, bytes) in received.into_iter().enumerate() {
            let list = if q == comm.rank() { &[][..] } else { part.recv(q) };
            if bytes.len() != list.len() * row_bytes {
                return Err(setup_error(format!(
                    "rank {q} sent {} bytes of halo features, expected {} rows of {width} values",
                    bytes.len(),
                    list.len()
                )));
            }
            for (&l, row) in list.iter().zip(bytes.chunks_exact(row_bytes.max(1))) {
                let mut dest = features.row_mut(l as usize);
                let dest = dest.as_slice_mut().expect("a row of a standard-layout array is contiguous");
                wire::decode_into(row, dest).map_err(|e| setup_error(format!("halo features from rank {q}: {e}")))?;
            }
        }
        drop(own);
        self.features = features;
        Ok(())
    }

    fn into_wire(self) -> WireShare {
        let (feature_rows, in_dim) = self.features.dim();
        let (label_cols, classes, targets) = match self.labels {
            Labels::Classes(c) => (None, c, Vec::new()),
            Labels::MultiLabel(t) => (Some(t.ncols()), Vec::new(), t.into_raw_vec_and_offset().0),
        };
        WireShare {
            part: self.part,
            in_dim,
            feature_rows,
            features: self.features.into_raw_vec_and_offset().0,
            label_cols,
            classes,
            targets,
            num_classes: self.num_classes,
            splits: [self.train, self.valid, self.test],
            global_train: self.global_train,
        }
    }

    fn from_wire(w: WireShare) -> Result<Self, String> {
        let n = w.part.num_local();
        if !(w.part.num_primary()..=n).contains(&w.feature_rows) {
            return Err(format!(
                "{} feature rows for {} primaries of {n} local vertices",
                w.feature_rows,
                w.part.num_primary()
            ));
        }
        let features =
            Array2::from_shape_vec((w.feature_rows, w.in_dim), w.features).map_err(|e| format!("features: {e}"))?;
        let labels = match w.label_cols {
            None if w.classes.len() == n => Labels::Classes(w.classes),
            None => return Err(format!("{} labels for {n} local vertices", w.classes.len())),
            Some(cols) => Labels::MultiLabel(
                Array2::from_shape_vec((n, cols), w.targets).map_err(|e| format!("label targets: {e}"))?,
            ),
        };
        let [train, valid, test] = w.splits;
        if let Some(&bad) = train.iter().chain(&valid).chain(&test).find(|&&l| !w.part.is_primary(l as usize)) {
            return Err(format!("split row {bad} is not one of the {} primaries", w.part.num_primary()));
        }
        Ok(Self {
            part: w.part,
            features,
            labels,
            num_classes: w.num_classes,
            train,
            valid,
            test,
            global_train: w.global_train,
        })
    }
}

/// Rank 0's view of the job after partitioning.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// What the shares are cut from, one worker at a time ([`hand_out`]).
    pub plan: SharePlan,
    /// What the report says of the dataset and the partition.
    pub described: Described,
}

/// Every worker's part of the graph and split rows, before its features and labels are cut
/// from the dataset: [`SharePlan::share`] makes one share at a time and frees its part.
#[derive(Debug)]
pub(crate) struct SharePlan {
    /// Only the primaries compute (edge-cut, or vertex-cut with masters only): a share holds
    /// their input features alone; otherwise every local row's.
    primaries: bool,
    /// Indexed by part; taken as each share is made.
    parts: Vec<Option<(LocalGraph, [Vec<u32>; 3])>>,
}

impl SharePlan {
    /// Cuts part `p`'s share from `dataset` and drops the plan's copy of its part.
    fn share(&mut self, p: usize, dataset: &Dataset) -> Result<WorkerShare, DistError> {
        let (part, [train, valid, test]) = self.parts.get_mut(p).and_then(Option::take).ok_or_else(|| {
            DistError::Setup { rank: 0, detail: format!("part {p} of {} was asked for twice", self.parts.len()) }
        })?;
        let rows: Vec<usize> = part.local_to_global().iter().map(|&g| g as usize).collect();
        let computed = if self.primaries { part.num_primary() } else { part.num_local() };
        let labels = dataset.labels.select(&rows);
        Ok(WorkerShare {
            features: dataset.features.select(Axis(0), &rows[..computed]),
            part,
            labels,
            num_classes: dataset.num_classes,
            train,
            valid,
            test,
            global_train: dataset.splits.train.len(),
        })
    }
}

/// Partitions `dataset` with a `cut` into `workers` parts on `config.hosts` hosts. The
/// partitioner's temporaries and the book's cross-part tables are gone when this returns;
/// what is left is every part's local graph, handed out by [`hand_out`].
pub(crate) fn prepare(
    dataset: &Dataset,
    cut: CutKind,
    config: &DistributedConfig,
    workers: usize,
    seed: u64,
) -> Result<Prepared, DistError> {
    let algorithm = config.algorithm_for(cut);
    let pconfig = PartitionConfig { hosts: config.hosts, seed, ..PartitionConfig::new(algorithm, workers) };
    let layout = pconfig.layout().map_err(|source| DistError::Partition { algorithm, source })?;
    let (book, cost, name) = match &config.partition_book {
        Some(dir) => {
            let (book, cost) = measure(|| PartitionBook::load_for(dir, &dataset.graph, workers));
            let book = book.map_err(|source| DistError::Book { dir: dir.clone(), source })?;
            if book.meta().cut != cut {
                let detail =
                    format!("it holds {}, the run needs {}", book.meta().cut.with_article(), cut.with_article());
                return Err(DistError::BookCut { dir: dir.clone(), detail });
            }
            (book, cost, format!("book {}", dir.display()))
        }
        None => {
            let (partition, cost) = measure(|| partition_graph(&dataset.graph, &pconfig));
            let partition = partition.map_err(|source| DistError::Partition { algorithm, source })?;
            let book = PartitionBook::build(&dataset.graph, &partition)
                .map_err(|source| DistError::Partition { algorithm, source })?;
            (book, cost, algorithm.name().to_string())
        }
    };
    let metrics = PartitionMetrics::of(&book, &layout)?;
    let summary = summary(name, &metrics, cost.time_s);
    let parts = book.into_parts();
    let s = &dataset.splits;
    let splits = split_rows(&parts, dataset.num_nodes(), [&s.train, &s.valid, &s.test])
        .map_err(|e| DistError::Setup { rank: 0, detail: e.to_string() })?;
    let plan =
        SharePlan { primaries: config.primaries_only(cut), parts: parts.into_iter().zip(splits).map(Some).collect() };
    let described = Described::of(dataset, cut.as_str(), Some(summary));
    Ok(Prepared { plan, described })
}

/// What the report says of a partition `name`d so, of quality `metrics`, made or read in `time_s`.
fn summary(name: String, metrics: &PartitionMetrics, time_s: f64) -> PartitionSummary {
    PartitionSummary {
        algorithm: name,
        parts: metrics.parts,
        replication_factor: metrics.replication_factor,
        edge_imbalance: metrics.edge_imbalance,
        vertex_imbalance: metrics.vertex_imbalance,
        edge_cut_fraction: metrics.edge_cut_fraction.unwrap_or(0.0),
        time_s,
    }
}

/// A part folder (`halo partition --out DIR`, see [`graph_partition::book::write_part_folder`]):
/// every rank reads its own part, and nothing else, instead of a share from rank 0.
#[derive(Debug)]
pub(crate) struct PartFolder {
    pub dir: PathBuf,
    pub manifest: PartsManifest,
}

impl PartFolder {
    /// `Some` when the run's `--partition-book` is a part folder. Checks it against the run: the
    /// split it names, and the fingerprint of the run's dataset directory where this host has
    /// one (a host that holds only its part cannot check it; every part's rows are checked
    /// against the folder's fingerprint in [`PartFolder::open`]).
    pub(crate) fn of(config: &TrainConfig, source: Source<'_>) -> Result<Option<Self>, TrainError> {
        let Some(dir) = &config.distributed.partition_book else { return Ok(None) };
        let book_error = |source| DistError::Book { dir: dir.clone(), source };
        let Some(manifest) = PartsManifest::read(dir).map_err(book_error)? else { return Ok(None) };
        let mismatch = |reason: String| book_error(BookError::Mismatch { path: dir.join(MANIFEST), reason });
        if let Some(split) = config.split.as_ref().filter(|&s| *s != manifest.split) {
            return Err(
                mismatch(format!("its rows are of split `{}`, the run asks for `{split}`", manifest.split)).into()
            );
        }
        let local = match (source, &config.dataset) {
            (Source::Load(root, _), Some(spec)) => resolve_dataset_dir(spec, root).ok(),
            (Source::Load(..), None) => {
                return Err(mismatch(format!(
                    "it was made from dataset `{}`; the run names none (--dataset)",
                    manifest.dataset
                ))
                .into());
            }
            (Source::Given(_), _) => {
                return Err(mismatch("an in-memory dataset cannot be checked against a part folder".into()).into());
            }
        };
        match local {
            Some(data) => {
                let found =
                    Dataset::source_fingerprint(&data).map_err(|error| DataError::Load { dir: data.clone(), error })?;
                if found != manifest.dataset_fingerprint {
                    return Err(mismatch(format!(
                        "dataset fingerprint is {:016x}, the run's dataset {} has {found:016x}",
                        manifest.dataset_fingerprint,
                        data.display()
                    ))
                    .into());
                }
            }
            None => tracing::info!(
                "the run's dataset is not on this host; its part folder {} is checked against itself",
                dir.display()
            ),
        }
        Ok(Some(Self { dir: dir.clone(), manifest }))
    }

    /// Rank `comm.rank()`'s share, read from its part alone: its local graph, the features of
    /// the rows it computes (and of its halo rows under `cached`), normalised as `config` says,
    /// its labels and split ids. With the report's description of the data on rank 0. Fails,
    /// naming the file, rank and field, on a part of another rank, book, cut or dataset, or a
    /// truncated or corrupt one.
    pub(crate) fn open(
        &self,
        comm: &dyn Communicator,
        cut: CutKind,
        config: &TrainConfig,
        cached: bool,
    ) -> Result<(WorkerShare, Described), DistError> {
        let (dir, manifest, rank) = (&self.dir, &self.manifest, comm.rank());
        let part_error = |source| DistError::Part { dir: dir.clone(), rank, source };
        let mismatch = |reason: String| part_error(BookError::Mismatch { path: dir.join("book.json"), reason });
        let start = std::time::Instant::now();
        let (meta, part) = PartitionBook::load_part(dir, rank).map_err(part_error)?;
        if meta.parts != comm.size() {
            return Err(mismatch(format!("it has {} parts, the run has {} workers", meta.parts, comm.size())));
        }
        if meta.cut != cut {
            return Err(mismatch(format!("it holds a {}-cut, the run needs a {cut}-cut", meta.cut)));
        }
        let computed =
            if cached || !config.distributed.primaries_only(cut) { part.num_local() } else { part.num_primary() };
        let rows = PartRows::read(dir, &part, &meta, manifest.dataset_fingerprint, manifest.num_classes, computed)
            .map_err(part_error)?;
        let mut features = Array2::from_shape_vec((computed, rows.num_features), rows.features)
            .map_err(|e| DistError::Setup { rank, detail: format!("features of its part: {e}") })?;
        crate::features::normalize(&mut features, config.feature_norm);
        let [train, valid, test] = rows.splits;
        let share = WorkerShare {
            part,
            features,
            labels: rows.labels,
            num_classes: manifest.num_classes,
            train,
            valid,
            test,
            global_train: rows.global_train,
        };
        let [train, valid, test] = manifest.split_sizes;
        let described = Described {
            dataset: manifest.dataset.clone(),
            cut: cut.as_str(),
            partition: Some(summary(
                format!("book {}", dir.display()),
                &manifest.metrics,
                start.elapsed().as_secs_f64(),
            )),
            split_sizes: SplitSizes { train, valid, test },
            graph: GraphSize { vertices: meta.num_nodes, edges: meta.num_edges },
        };
        Ok((share, described))
    }
}

/// Rank 0 hands every other rank its share, one at a time: share `p` is cut from `dataset`,
/// encoded, sent and dropped before share `p + 1` is made, so rank 0 holds at most one share
/// in flight besides its own, which it returns with the `held_bytes` of every share (for the
/// memory report). Every other rank calls [`receive`].
pub(crate) fn hand_out(
    comm: &dyn Communicator,
    clock: &CommClock<'_>,
    dataset: &Dataset,
    mut plan: SharePlan,
) -> Result<(WorkerShare, Vec<u64>), DistError> {
    let root = comm.rank();
    let mut own = None;
    let mut failed = None;
    let mut held = Vec::with_capacity(comm.size());
    let mut next = |p: usize| {
        let made = plan.share(p, dataset).and_then(|share| {
            held.push(share.held_bytes());
            if p == root {
                own = Some(share);
                return Ok(Vec::new());
            }
            bincode::encode_to_vec(share.into_wire(), bincode::config::standard())
                .map_err(|e| DistError::Setup { rank: root, detail: format!("cannot encode share {p}: {e}") })
        });
        made.map_err(|e| {
            let detail = e.to_string();
            failed = Some(e);
            CommError::InvalidArgument { phase: PHASE.to_owned(), detail }
        })
    };
    let sent = clock.call(|| comm.scatter_with(PHASE, root, Some(&mut next)));
    if let Some(e) = failed {
        return Err(e);
    }
    sent?;
    let own = own.ok_or_else(|| DistError::Setup { rank: root, detail: "no share of its own was made".to_owned() })?;
    Ok((own, held))
}

/// Receives this rank's share from rank 0 ([`hand_out`]).
pub(crate) fn receive(comm: &dyn Communicator, clock: &CommClock<'_>) -> Result<WorkerShare, DistError> {
    let config = bincode::config::standard();
    let bytes = clock.call(|| comm.scatter_with(PHASE, 0, None))?;
    let setup_error = |detail: String| DistError::Setup { rank: comm.rank(), detail };
    let (wire, used): (WireShare, usize) =
        bincode::decode_from_slice(&bytes, config).map_err(|e| setup_error(format!("cannot decode the share: {e}")))?;
    if used != bytes.len() {
        return Err(setup_error(format!("{} trailing bytes after the share", bytes.len() - used)));
    }
    if wire.part.part() != comm.rank() || wire.part.num_parts() != comm.size() {
        return Err(setup_error(format!(
            "received part {} of {} parts on rank {} of {}",
            wire.part.part(),
            wire.part.num_parts(),
            comm.rank(),
            comm.size()
        )));
    }
    WorkerShare::from_wire(wire).map_err(setup_error)
}
