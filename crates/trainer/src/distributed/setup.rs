//! Setting a job up: rank 0 partitions the dataset, then cuts one [`WorkerShare`] per worker
//! and sends it before cutting the next (a streamed scatter); every worker then holds only its part of the graph (its primaries and
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
use graph_partition::book::{LocalGraph, PartitionBook};
use graph_partition::metrics::{PartitionMetrics, measure};
use graph_partition::partition::{PartitionConfig, partition_graph};
use graph_partition::{Dataset, Labels};
use ndarray::{Array2, Axis, s};

use graph_partition::book::CutKind;

use crate::config::DistributedConfig;
use crate::error::DistError;
use crate::harness::CommClock;
use crate::harness::Described;
use crate::report::PartitionSummary;

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
        let labels = match &dataset.labels {
            Labels::Classes(c) => Labels::Classes(rows.iter().map(|&g| c[g]).collect()),
            Labels::MultiLabel(t) => Labels::MultiLabel(t.select(Axis(0), &rows)),
        };
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
    let summary = PartitionSummary {
        algorithm: name,
        parts: workers,
        replication_factor: metrics.replication_factor,
        edge_imbalance: metrics.edge_imbalance,
        vertex_imbalance: metrics.vertex_imbalance,
        edge_cut_fraction: metrics.edge_cut_fraction.unwrap_or(0.0),
        time_s: cost.time_s,
    };
    let parts = book.into_parts();
    let s = &dataset.splits;
    let splits = split_rows(&parts, dataset.num_nodes(), [&s.train, &s.valid, &s.test])?;
    let plan =
        SharePlan { primaries: config.primaries_only(cut), parts: parts.into_iter().zip(splits).map(Some).collect() };
    let described = Described::of(dataset, cut.as_str(), Some(summary));
    Ok(Prepared { plan, described })
}

/// For every part, the local ids of its primaries in each of `sets` (global ids below
/// `num_nodes`), in the order the sets list them.
fn split_rows(parts: &[LocalGraph], num_nodes: usize, sets: [&[u32]; 3]) -> Result<Vec<[Vec<u32>; 3]>, DistError> {
    let mut home = vec![None; num_nodes];
    for p in parts {
        for l in 0..p.num_primary() {
            home[p.local_to_global()[l] as usize] = Some((p.part(), l as u32));
        }
    }
    let mut out: Vec<[Vec<u32>; 3]> = (0..parts.len()).map(|_| Default::default()).collect();
    for (k, set) in sets.iter().enumerate() {
        for &g in set.iter() {
            let (p, l) = home.get(g as usize).copied().flatten().ok_or_else(|| DistError::Setup {
                rank: 0,
                detail: format!("split vertex {g} has no primary in the partition book of {num_nodes} vertices"),
            })?;
            out[p][k].push(l);
        }
    }
    Ok(out)
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
