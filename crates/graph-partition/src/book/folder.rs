//! Writing a part folder one part at a time ([`write_part_folder`], `halo partition --out`):
//! the files [`super::PartitionBook::save`] and [`super::write_part_rows`] write, without ever
//! holding the whole book. Each part is built, written (`part-<i>.bin`, the labels and split
//! ids of `part-<i>.rows`) and dropped before the next is made; the graph is dropped once
//! every part is written, before the features are streamed. What is held at once is the
//! graph, one part, every part's copy list (4 bytes per copy) and, for the feature pass, every
//! part's row order (8 bytes per local vertex).

use std::path::Path;
use std::time::Instant;

use super::build::{Cut, Homes, Plan};
use super::rows::{Source, Writer, no_rows_for_a_feature_cut, row_order, stream_rows};
use super::validate::{check_l_hop_of, check_l_hop_sets};
use super::{BookError, BookMeta, CutKind, InvalidBook, LHopSets, PartsManifest, io};
use crate::dataset::Structure;
use crate::metrics::{MetricsError, PartStats, PartitionMetrics, remote_in_edges};
use crate::partition::{HostLayout, Partition, PartitionError};

/// What [`write_part_folder`] found while writing.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenFolder {
    /// The partition's quality, as [`PartitionMetrics::of`] computes it from the whole book.
    pub metrics: PartitionMetrics,
    /// The time spent building the parts (writing them not included).
    pub build_time_s: f64,
}

/// Why [`write_part_folder`] failed.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    /// The partition does not fit the graph.
    #[error("{0}")]
    Partition(#[from] PartitionError),
    /// The host layout does not fit the partition.
    #[error("{0}")]
    Metrics(#[from] MetricsError),
    /// A file could not be written, or the dataset not read.
    #[error("{0}")]
    Book(#[from] BookError),
}

/// Writes the part folder of `partition` over `structure` into `dir` (created if missing):
/// `book.json`, every `part-<i>.bin` (with its set of `l_hop`, if any), every `part-<i>.rows`,
/// and `parts.json` last, made from the dataset whose raw files have `dataset_fingerprint`
/// by partitioner `algorithm`, with metrics on `layout`'s hosts. The files are those of
/// [`super::PartitionBook::save`] then [`super::write_part_rows`], byte for byte. An earlier
/// `parts.json` is removed first and each rows file is put in place whole, so an interrupted
/// write leaves no part folder; the part files of an earlier book that this one does not
/// have are removed. `structure` is consumed: its graph is dropped before the features are
/// streamed.
pub fn write_part_folder(
    dir: &Path,
    structure: Structure,
    partition: &Partition,
    layout: &HostLayout,
    l_hop: Option<&LHopSets>,
    dataset_fingerprint: u64,
    algorithm: &str,
) -> Result<WrittenFolder, FolderError> {
    partition.validate(&structure.graph)?;
    let (parts, cut, kind, homes) = match partition {
        Partition::EdgeCut { parts, owner } => (*parts, Cut::Edge, CutKind::EdgeCut, owner.clone()),
        Partition::VertexCut { parts, edge_part, master } => {
            (*parts, Cut::Vertex { edge_part }, CutKind::VertexCut, master.clone())
        }
        Partition::FeatureCut { .. } => return Err(no_rows_for_a_feature_cut(dir).into()),
    };
    if layout.parts() != parts {
        return Err(MetricsError::Layout { layout: layout.parts(), book: parts }.into());
    }
    let invalid = |error: InvalidBook| BookError::Invalid { path: dir.join("book.json"), error };
    if let Some(l_hop) = l_hop {
        check_l_hop_sets(kind, parts, l_hop).map_err(invalid)?;
    }
    let features = structure.feature_file();
    let Structure { name, graph, labels, splits, num_classes, num_features, .. } = structure;
    let meta = BookMeta {
        cut: kind,
        num_nodes: graph.num_nodes(),
        num_edges: graph.num_edges(),
        graph_fingerprint: graph.fingerprint(),
        parts,
        feature_columns: Vec::new(),
    };
    io::prepare_dir(dir)?;
    let plan = Plan::new(&graph, cut, Homes::new(parts, homes));
    let split_ids = split_ids(plan.homes(), [&splits.train, &splits.valid, &splits.test]).map_err(invalid)?;
    let mut build_time_s = 0.0;
    let (mut summaries, mut stats, mut orders, mut writers) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut remote = 0;
    for (p, split) in split_ids.into_iter().enumerate() {
        let start = Instant::now();
        let lg = plan.part(p);
        build_time_s += start.elapsed().as_secs_f64();
        let set = l_hop.map(|l| l.nodes[p].as_slice());
        if let Some(set) = set {
            check_l_hop_of(&lg, set, meta.num_nodes).map_err(invalid)?;
        }
        summaries.push(io::write_part(dir, &lg, set)?);
        stats.push(PartStats::of(&lg, kind, layout));
        remote += remote_in_edges(&lg);
        let rows: Vec<usize> = lg.local_to_global().iter().map(|&g| g as usize).collect();
        let part_labels = labels.select(&rows);
        drop(rows);
        let train = splits.train.len();
        writers.push(Writer::create(dir, &lg, &meta, dataset_fingerprint, num_features, part_labels, split, train)?);
        orders.push(row_order(&lg));
    }
    io::finish_book(dir, &meta, l_hop.map(|l| l.hops), summaries)?;
    drop(plan);
    drop(graph);
    let metrics = PartitionMetrics::from_parts(&meta, layout, stats, remote);
    let source = Source { name: &name, splits: &splits, num_classes };
    let manifest = PartsManifest::of(source, num_features, dataset_fingerprint, algorithm, metrics.clone());
    drop(labels);
    stream_rows(dir, &features, num_features, writers, &orders, &manifest)?;
    Ok(WrittenFolder { metrics, build_time_s })
}

/// For every part, the local ids of its primaries in each of `sets` (in the order the sets
/// list them), from where each vertex's primary lives: what [`super::split_rows`] finds in
/// the whole book.
fn split_ids(homes: &Homes, sets: [&[u32]; 3]) -> Result<Vec<[Vec<u32>; 3]>, InvalidBook> {
    let num_nodes = homes.part.len();
    let mut out: Vec<[Vec<u32>; 3]> = (0..homes.primaries.len()).map(|_| Default::default()).collect();
    for (k, set) in sets.iter().enumerate() {
        for &g in set.iter() {
            let (Some(&p), Some(&l)) = (homes.part.get(g as usize), homes.local.get(g as usize)) else {
                return Err(InvalidBook {
                    part: None,
                    reason: format!("split vertex {g} has no primary in the partition book of {num_nodes} vertices"),
                });
            };
            out[p as usize][k].push(l);
        }
    }
    Ok(out)
}
