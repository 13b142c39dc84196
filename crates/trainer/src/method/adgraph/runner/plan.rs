//! ADGraph's data plan: rank 0 partitions the graph into one part per worker (an edge-cut
//! partitioner: METIS or random), extends each part by the `hops`-hop in-neighbourhood of its
//! training vertices ([`expand_l_hop`]) and cuts one [`PartData`] per worker: the subgraph
//! induced on the extended vertex set (local ids ascending in global id, so rows keep the whole
//! graph's neighbour order), those vertices' features, labels and whole-graph degrees, and the
//! part's own training vertices. The parts travel in one scatter under the `setup` ledger
//! phase, so their bytes are counted.

use comm_hierarchy::Communicator;
use gnn_core::GraphDegrees;
use graph_partition::metrics::measure;
use graph_partition::partition::{Partition, PartitionConfig, expand_l_hop, partition_graph};
use graph_partition::sample::{BatchPlan, Remainder};
use graph_partition::{Csr, Dataset, Labels, Splits};
use ndarray::{Array2, Axis};
use serde_json::{Value, json};

use crate::error::DistError;
use crate::harness::CommClock;
use crate::minibatch::trainer::StepSeeds;
use crate::report::PartitionSummary;

/// Ledger phase of the parts' shipping (outside every epoch's counts).
pub(super) const SETUP: &str = "setup";

/// What one worker holds: its extended part as a dataset in local ids.
#[derive(Debug)]
pub(crate) struct PartData {
    /// The induced subgraph, the features, labels of the extended vertices; `splits.train` are
    /// the local ids of the part's own training vertices (validation and test stay empty: rank
    /// 0 evaluates on the whole graph).
    pub dataset: Dataset,
    /// Global id of each local vertex, ascending.
    pub keys: Vec<u32>,
    /// Whole-graph in- and out-degrees of the local vertices.
    pub in_degree: Vec<f32>,
    pub out_degree: Vec<f32>,
    /// Training vertices of every part, by part: fixes the steps per epoch and the size of
    /// every step's global batch without communication.
    pub train_counts: Vec<usize>,
}

impl PartData {
    /// The whole-graph degrees of the local vertices, in local order.
    pub(crate) fn degrees(&self) -> GraphDegrees {
        GraphDegrees { in_degree: self.in_degree.clone(), out_degree: self.out_degree.clone() }
    }

    /// Bytes of the arrays the worker holds: CSR, ids, features, labels, degrees, training list.
    pub(crate) fn held_bytes(&self) -> u64 {
        let d = &self.dataset;
        let graph = d.graph.indptr().len() * 8 + d.graph.indices().len() * 4;
        let labels = match &d.labels {
            Labels::Classes(c) => c.len() * 4,
            Labels::MultiLabel(t) => t.len() * 4,
        };
        let ids = self.keys.len() * 4 + (self.in_degree.len() + self.out_degree.len()) * 4 + d.splits.train.len() * 4;
        (graph + d.features.len() * 4 + labels + ids) as u64
    }

    /// This worker's steps of the 1-based `epoch`, every worker taking the same number: its
    /// training vertices shuffled by (seed, epoch) (ranked by global id, so the order does not
    /// depend on the local numbering) and cut into `steps` batches whose sizes differ by at
    /// most one, `steps` being what the largest part needs at `batch_size` seeds per step. Each
    /// step's global batch is the union of every worker's batch of that step.
    pub(crate) fn steps(&self, rank: usize, batch_size: usize, seed: u64, epoch: usize) -> Vec<StepSeeds> {
        let steps = self.train_counts.iter().max().map_or(0, |&m| m.div_ceil(batch_size));
        let global: Vec<u32> = self.dataset.splits.train.iter().map(|&l| self.keys[l as usize]).collect();
        let order = BatchPlan::shuffled(&global, batch_size, seed, epoch as u64, Remainder::Keep)
            .expect("batch size validated at least 1");
        let mut start = 0;
        (0..steps)
            .map(|step| {
                let len = run_len(self.train_counts[rank], steps, step);
                let seeds = order.order()[start..start + len]
                    .iter()
                    .map(|g| self.keys.binary_search(g).expect("a training vertex is in its extended part") as u32)
                    .collect();
                start += len;
                let global_rows = self.train_counts.iter().map(|&n| run_len(n, steps, step)).sum();
                StepSeeds { seeds, global_rows }
            })
            .collect()
    }
}

/// Length of run `i` when `n` items are cut into `runs` runs as even as possible, longer first.
fn run_len(n: usize, runs: usize, i: usize) -> usize {
    n / runs + usize::from(i < n % runs)
}

/// The wire form of a [`PartData`] (ndarray types are not bincode-encodable).
#[derive(bincode::Encode, bincode::Decode)]
struct WirePart {
    keys: Vec<u32>,
    indptr: Vec<u64>,
    indices: Vec<u32>,
    in_dim: usize,
    features: Vec<f32>,
    /// `None`: single-label classes; `Some(cols)`: multi-label targets with `cols` columns.
    label_cols: Option<usize>,
    classes: Vec<u32>,
    targets: Vec<f32>,
    num_classes: usize,
    train: Vec<u32>,
    in_degree: Vec<f32>,
    out_degree: Vec<f32>,
    train_counts: Vec<u64>,
    name: String,
    split: String,
}

impl PartData {
    fn into_wire(self) -> WirePart {
        let d = self.dataset;
        let in_dim = d.features.ncols();
        let (label_cols, classes, targets) = match d.labels {
            Labels::Classes(c) => (None, c, Vec::new()),
            Labels::MultiLabel(t) => (Some(t.ncols()), Vec::new(), t.into_raw_vec_and_offset().0),
        };
        let (indptr, indices) = (d.graph.indptr().to_vec(), d.graph.indices().to_vec());
        WirePart {
            keys: self.keys,
            indptr,
            indices,
            in_dim,
            features: d.features.into_raw_vec_and_offset().0,
            label_cols,
            classes,
            targets,
            num_classes: d.num_classes,
            train: d.splits.train,
            in_degree: self.in_degree,
            out_degree: self.out_degree,
            train_counts: self.train_counts.iter().map(|&c| c as u64).collect(),
            name: d.name,
            split: d.splits.name,
        }
    }

    fn from_wire(w: WirePart) -> Result<Self, String> {
        let n = w.keys.len();
        let graph = Csr::try_new(n, n, w.indptr, w.indices).map_err(|e| format!("part graph: {e}"))?;
        let features = Array2::from_shape_vec((n, w.in_dim), w.features).map_err(|e| format!("features: {e}"))?;
        let labels = match w.label_cols {
            None if w.classes.len() == n => Labels::Classes(w.classes),
            None => return Err(format!("{} labels for {n} vertices", w.classes.len())),
            Some(cols) => Labels::MultiLabel(
                Array2::from_shape_vec((n, cols), w.targets).map_err(|e| format!("label targets: {e}"))?,
            ),
        };
        if w.in_degree.len() != n || w.out_degree.len() != n {
            return Err(format!("{} / {} degrees for {n} vertices", w.in_degree.len(), w.out_degree.len()));
        }
        if let Some(&bad) = w.train.iter().find(|&&l| l as usize >= n) {
            return Err(format!("training vertex {bad} is not one of the {n} local vertices"));
        }
        if !w.keys.is_sorted() {
            return Err("global ids are not ascending".to_string());
        }
        let splits = Splits { name: w.split, train: w.train, valid: Vec::new(), test: Vec::new() };
        Ok(Self {
            dataset: Dataset {
                name: w.name,
                graph: graph.into(),
                features,
                labels,
                splits,
                num_classes: w.num_classes,
            },
            keys: w.keys,
            in_degree: w.in_degree,
            out_degree: w.out_degree,
            train_counts: w.train_counts.iter().map(|&c| c as usize).collect(),
        })
    }
}

/// Rank 0's view after planning: every worker's part and the figures of the plan.
#[derive(Debug)]
pub(crate) struct Planned {
    pub parts: Vec<PartData>,
    pub summary: PartitionSummary,
    /// Per-worker figures for `final.method`.
    pub figures: Value,
}

/// Partitions `dataset` into `workers` parts with `pconfig`, extends each by `hops` hops around
/// its training vertices and cuts the parts.
pub(crate) fn plan(dataset: &Dataset, pconfig: &PartitionConfig, hops: usize) -> Result<Planned, DistError> {
    let algorithm = pconfig.algorithm;
    let graph = &dataset.graph;
    let (planned, cost) = measure(|| -> Result<_, DistError> {
        let owner =
            match partition_graph(graph, pconfig).map_err(|source| DistError::Partition { algorithm, source })? {
                Partition::EdgeCut { owner, .. } => owner,
                _ => {
                    return Err(DistError::Setup {
                        rank: 0,
                        detail: format!(
                            "adgraph needs an edge-cut partitioner (metis, random, hash, bdg), not {algorithm:?}"
                        ),
                    });
                }
            };
        let sets = expand_l_hop(graph, pconfig.parts, &owner, &dataset.splits.train, hops)
            .map_err(|source| DistError::Partition { algorithm, source })?;
        Ok((owner, sets))
    });
    let (owner, sets) = planned?;
    let degrees = GraphDegrees::of(graph);
    let mut train_of: Vec<Vec<u32>> = vec![Vec::new(); pconfig.parts];
    for &t in &dataset.splits.train {
        train_of[owner[t as usize] as usize].push(t);
    }
    let train_counts: Vec<usize> = train_of.iter().map(Vec::len).collect();
    let parts: Vec<PartData> =
        sets.iter().zip(&train_of).map(|(set, train)| cut_part(dataset, &degrees, set, train, &train_counts)).collect();
    let n = dataset.num_nodes() as f64;
    let held: Vec<u64> = parts.iter().map(PartData::held_bytes).collect();
    let vertices: Vec<usize> = sets.iter().map(Vec::len).collect();
    let edges: Vec<usize> = parts.iter().map(|p| p.dataset.graph.num_edges()).collect();
    let replication = vertices.iter().sum::<usize>() as f64 / n;
    let over_mean = |xs: &[usize]| {
        let mean = xs.iter().sum::<usize>() as f64 / xs.len() as f64;
        if mean > 0.0 { xs.iter().copied().max().unwrap_or(0) as f64 / mean } else { 1.0 }
    };
    let cut_edges = (0..graph.num_nodes())
        .map(|v| graph.neighbors(v).iter().filter(|&&u| owner[u as usize] != owner[v]).count())
        .sum::<usize>();
    let summary = PartitionSummary {
        algorithm: algorithm.name().to_string(),
        parts: pconfig.parts,
        replication_factor: replication,
        edge_imbalance: over_mean(&edges),
        vertex_imbalance: over_mean(&vertices),
        edge_cut_fraction: if graph.num_edges() > 0 { cut_edges as f64 / graph.num_edges() as f64 } else { 0.0 },
        time_s: cost.time_s,
    };
    let figures = json!({
        "hops": hops,
        "replication_factor": replication,
        "extended_vertices_per_worker": vertices,
        "extended_edges_per_worker": edges,
        "coverage_per_worker": vertices.iter().map(|&v| v as f64 / n).collect::<Vec<_>>(),
        "train_vertices_per_worker": train_counts,
        "held_bytes_per_worker": held,
        "held_bytes_max": held.iter().copied().max().unwrap_or(0),
        "whole_dataset_bytes": whole_bytes(dataset),
    });
    Ok(Planned { parts, summary, figures })
}

/// Bytes the whole dataset would take in a worker's layout (the replicated plan's memory).
fn whole_bytes(dataset: &Dataset) -> u64 {
    let n = dataset.num_nodes();
    let labels = match &dataset.labels {
        Labels::Classes(c) => c.len() * 4,
        Labels::MultiLabel(t) => t.len() * 4,
    };
    ((n + 1) * 8 + dataset.graph.num_edges() * 4 + dataset.features.len() * 4 + labels + n * 12) as u64
}

/// The part over the ascending vertex set `set` whose training vertices are `train`.
fn cut_part(dataset: &Dataset, degrees: &GraphDegrees, set: &[u32], train: &[u32], train_counts: &[usize]) -> PartData {
    let rows: Vec<usize> = set.iter().map(|&g| g as usize).collect();
    let labels = match &dataset.labels {
        Labels::Classes(c) => Labels::Classes(rows.iter().map(|&g| c[g]).collect()),
        Labels::MultiLabel(t) => Labels::MultiLabel(t.select(Axis(0), &rows)),
    };
    let local = |g: &u32| set.binary_search(g).expect("training vertices are in their extended part") as u32;
    let splits =
        Splits { name: dataset.splits.name.clone(), train: train.iter().map(local).collect(), ..Splits::default() };
    PartData {
        dataset: Dataset {
            name: dataset.name.clone(),
            graph: dataset.graph.induced_subgraph(set).into(),
            features: dataset.features.select(Axis(0), &rows),
            labels,
            splits,
            num_classes: dataset.num_classes,
        },
        keys: set.to_vec(),
        in_degree: rows.iter().map(|&g| degrees.in_degree[g]).collect(),
        out_degree: rows.iter().map(|&g| degrees.out_degree[g]).collect(),
        train_counts: train_counts.to_vec(),
    }
}

/// Hands every rank its part: rank 0 passes `Some(parts)`, the others `None`.
pub(crate) fn ship(
    comm: &dyn Communicator,
    clock: &CommClock<'_>,
    parts: Option<Vec<PartData>>,
) -> Result<PartData, DistError> {
    let config = bincode::config::standard();
    let setup_error = |detail: String| DistError::Setup { rank: comm.rank(), detail };
    let outgoing = match parts {
        Some(parts) => Some(
            parts
                .into_iter()
                .map(|p| bincode::encode_to_vec(p.into_wire(), config))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| setup_error(format!("cannot encode a part: {e}")))?,
        ),
        None => None,
    };
    let bytes = clock.call(|| comm.scatter(SETUP, 0, outgoing))?;
    let (wire, used): (WirePart, usize) =
        bincode::decode_from_slice(&bytes, config).map_err(|e| setup_error(format!("cannot decode the part: {e}")))?;
    if used != bytes.len() {
        return Err(setup_error(format!("{} trailing bytes after the part", bytes.len() - used)));
    }
    if wire.train_counts.len() != comm.size() {
        return Err(setup_error(format!("a plan of {} parts for {} workers", wire.train_counts.len(), comm.size())));
    }
    PartData::from_wire(wire).map_err(setup_error)
}
