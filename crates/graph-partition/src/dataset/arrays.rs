//! A dataset from arrays in memory (the Python package's `Dataset.from_arrays`), with the checks
//! of the loader and the import: node ids in range, finite features, one class per node, each
//! split node labelled and in one split only.
//!
//! Edges are made undirected, with duplicates and self loops dropped, as the loader does, so the
//! arrays of a loaded dataset give back the same graph. Each error names the array and the first
//! bad element ([`ArrayError`]).

use std::sync::Arc;

use ndarray::Array2;

use super::{Dataset, Labels, Splits};
use crate::csr::{Csr, EdgeListOptions};

/// The arrays a dataset is made of. Node ids are `i64`, as NumPy's default integer.
#[derive(Debug, Clone)]
pub struct Arrays<'a> {
    pub name: String,
    /// Edge sources and destinations (`edge_index[0]` and `edge_index[1]`), one pair per edge.
    pub sources: &'a [i64],
    pub targets: &'a [i64],
    /// One row per node; the row count is the node count.
    pub features: Array2<f32>,
    pub labels: LabelArray<'a>,
    /// Classes of a single-label task; `None`: one more than the largest class.
    pub num_classes: Option<usize>,
    pub train: SplitArray<'a>,
    pub valid: SplitArray<'a>,
    pub test: SplitArray<'a>,
    /// Accept NaN and infinite features.
    pub allow_nonfinite: bool,
}

/// Node labels as given.
#[derive(Debug, Clone)]
pub enum LabelArray<'a> {
    /// One class per node; a negative class marks an unlabelled node.
    Classes(&'a [i64]),
    /// One row of 0/1 targets per node (NaN: unknown).
    MultiLabel(Array2<f32>),
}

/// One part of the split as given.
#[derive(Debug, Clone, Copy)]
pub enum SplitArray<'a> {
    /// Node ids.
    Ids(&'a [i64]),
    /// One flag per node.
    Mask(&'a [bool]),
}

/// Why arrays cannot make a dataset: the array, the first bad element and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{array}{}: {message}", .at.as_ref().map(|at| format!(" at {at}")).unwrap_or_default())]
pub struct ArrayError {
    /// The array's name (`edge_index`, `features`, `labels`, `train`, `val`, `test`).
    pub array: String,
    /// The index of the first bad element (`[1, 7]`), when one element is at fault.
    pub at: Option<String>,
    pub message: String,
}

impl ArrayError {
    fn new(array: &str, at: Option<String>, message: String) -> Self {
        Self { array: array.to_string(), at, message }
    }
}

/// The names of the split's parts in errors, as the Python package names its arguments.
const PARTS: [&str; 3] = ["train", "val", "test"];

impl Dataset {
    /// A dataset of `arrays`, checked (see the module docs).
    pub fn from_arrays(arrays: Arrays<'_>) -> Result<Self, ArrayError> {
        let Arrays { name, sources, targets, features, labels, num_classes, train, valid, test, allow_nonfinite } =
            arrays;
        let nodes = features.nrows();
        if nodes == 0 || features.ncols() == 0 || nodes >= u32::MAX as usize {
            let shape = format!("({}, {})", nodes, features.ncols());
            return Err(ArrayError::new("features", None, format!("shape {shape}: expected (N, F) with N, F > 0")));
        }
        if sources.len() != targets.len() {
            let message = format!("{} sources but {} targets", sources.len(), targets.len());
            return Err(ArrayError::new("edge_index", None, message));
        }
        let node = |array: &str, at: String, id: i64| {
            if (0..nodes as i64).contains(&id) {
                Ok(id as u32)
            } else {
                Err(ArrayError::new(
                    array,
                    Some(at),
                    format!("node id {id} is out of range (the graph has {nodes} nodes)"),
                ))
            }
        };
        let mut edges = Vec::with_capacity(sources.len());
        for (k, (&s, &t)) in sources.iter().zip(targets).enumerate() {
            edges.push((node("edge_index", format!("[0, {k}]"), s)?, node("edge_index", format!("[1, {k}]"), t)?));
        }
        if !allow_nonfinite && let Some(k) = features.iter().position(|x| !x.is_finite()) {
            let (row, col) = (k / features.ncols(), k % features.ncols());
            let value = features[[row, col]];
            let message = format!("{value} is not a finite value (features must be finite)");
            return Err(ArrayError::new("features", Some(format!("[{row}, {col}]")), message));
        }
        let (labels, num_classes) = labels_of(labels, nodes, num_classes)?;
        let mut parts = Vec::with_capacity(3);
        for (part, given) in PARTS.into_iter().zip([train, valid, test]) {
            parts.push(match given {
                SplitArray::Ids(ids) => {
                    ids.iter().enumerate().map(|(k, &id)| node(part, format!("[{k}]"), id)).collect::<Result<_, _>>()?
                }
                SplitArray::Mask(mask) if mask.len() != nodes => {
                    let message = format!("{} flags for {nodes} nodes: a mask has one flag per node", mask.len());
                    return Err(ArrayError::new(part, None, message));
                }
                SplitArray::Mask(mask) => (0..nodes as u32).filter(|&v| mask[v as usize]).collect(),
            });
        }
        let [train, valid, test]: [Vec<u32>; 3] = parts.try_into().expect("three parts");
        let splits = Splits { name: "arrays".into(), train, valid, test };
        if let Some((part, position, kind)) = super::ogb::split_fault(&splits, &labels, "labels") {
            let index = match part {
                "train" => 0,
                "valid" => 1,
                _ => 2,
            };
            return Err(ArrayError::new(PARTS[index], Some(format!("[{position}]")), kind.to_string()));
        }
        let graph = Csr::from_edges(nodes, &edges, EdgeListOptions::default())
            .map_err(|e| ArrayError::new("edge_index", None, e.to_string()))?;
        drop(edges);
        let dataset = Dataset { name, graph: Arc::new(graph), features, labels, splits, num_classes };
        dataset.validate().map_err(|e| ArrayError::new("dataset", None, e.to_string()))?;
        Ok(dataset)
    }
}

/// The labels of `nodes` nodes and the class count.
fn labels_of(labels: LabelArray<'_>, nodes: usize, num_classes: Option<usize>) -> Result<(Labels, usize), ArrayError> {
    match labels {
        LabelArray::Classes(classes) => {
            if classes.len() != nodes {
                let message = format!("{} labels for {nodes} nodes: one class per node", classes.len());
                return Err(ArrayError::new("labels", None, message));
            }
            let largest = classes.iter().copied().max().unwrap_or(-1);
            let count = num_classes.unwrap_or((largest + 1).max(0) as usize);
            if let Some(k) = classes.iter().position(|&c| c >= count as i64 || c >= Labels::UNLABELLED as i64) {
                let message = format!("class {} is out of range (num_classes is {count})", classes[k]);
                return Err(ArrayError::new("labels", Some(format!("[{k}]")), message));
            }
            let classes = classes.iter().map(|&c| if c < 0 { Labels::UNLABELLED } else { c as u32 }).collect();
            Ok((Labels::Classes(classes), count))
        }
        LabelArray::MultiLabel(targets) => {
            if targets.nrows() != nodes || targets.ncols() == 0 {
                let message = format!(
                    "shape ({}, {}) for {nodes} nodes: one row of 0/1 targets per node",
                    targets.nrows(),
                    targets.ncols()
                );
                return Err(ArrayError::new("labels", None, message));
            }
            if let Some(k) = targets.iter().position(|&t| !(t == 0.0 || t == 1.0 || t.is_nan())) {
                let (row, col) = (k / targets.ncols(), k % targets.ncols());
                let message = format!("{} is not 0 or 1 (multi-label targets, NaN for unknown)", targets[[row, col]]);
                return Err(ArrayError::new("labels", Some(format!("[{row}, {col}]")), message));
            }
            let count = targets.ncols();
            if let Some(declared) = num_classes.filter(|&n| n != count) {
                let message = format!("{count} label columns but num_classes is {declared}");
                return Err(ArrayError::new("labels", None, message));
            }
            Ok((Labels::MultiLabel(targets), count))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn arrays<'a>(sources: &'a [i64], targets: &'a [i64], labels: &'a [i64], train: SplitArray<'a>) -> Arrays<'a> {
        Arrays {
            name: "toy".into(),
            sources,
            targets,
            features: array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]],
            labels: LabelArray::Classes(labels),
            num_classes: None,
            train,
            valid: SplitArray::Ids(&[1]),
            test: SplitArray::Mask(&[false, false, true]),
            allow_nonfinite: false,
        }
    }

    #[test]
    fn arrays_make_the_undirected_graph_the_loader_makes() {
        let ds = Dataset::from_arrays(arrays(&[0, 1, 1, 2], &[1, 0, 2, 2], &[0, 1, 1], SplitArray::Ids(&[0]))).unwrap();
        assert_eq!(ds.graph.num_edges(), 4, "0-1 and 1-2 both ways, the self loop and the duplicate gone");
        assert_eq!(ds.num_classes, 2);
        assert_eq!(
            (ds.splits.train.clone(), ds.splits.valid.clone(), ds.splits.test.clone()),
            (vec![0], vec![1], vec![2])
        );
        let same = Csr::from_edges(3, &[(0, 1), (1, 2)], EdgeListOptions::default()).unwrap();
        assert_eq!(*ds.graph, same);
    }

    #[test]
    fn each_fault_names_the_array_and_the_first_bad_element() {
        let ok_labels = [0, 1, 1];
        let cases: Vec<(Arrays<'_>, &str)> = vec![
            (
                arrays(&[0, 3], &[1, 0], &ok_labels, SplitArray::Ids(&[0])),
                "edge_index at [0, 1]: node id 3 is out of range",
            ),
            (arrays(&[0], &[-1], &ok_labels, SplitArray::Ids(&[0])), "edge_index at [1, 0]: node id -1"),
            (arrays(&[0, 1], &[1], &ok_labels, SplitArray::Ids(&[0])), "edge_index: 2 sources but 1 targets"),
            (arrays(&[0], &[1], &[0, 1], SplitArray::Ids(&[0])), "labels: 2 labels for 3 nodes"),
            (
                arrays(&[0], &[1], &ok_labels, SplitArray::Ids(&[0, 1])),
                "val at [0]: node 1 is already in the train split",
            ),
            (arrays(&[0], &[1], &[-1, 1, 1], SplitArray::Ids(&[0])), "train at [0]: node 0 has no label"),
            (arrays(&[0], &[1], &ok_labels, SplitArray::Ids(&[5])), "train at [0]: node id 5 is out of range"),
            (arrays(&[0], &[1], &ok_labels, SplitArray::Mask(&[true])), "train: 1 flags for 3 nodes"),
        ];
        for (input, expected) in cases {
            let err = Dataset::from_arrays(input).unwrap_err().to_string();
            assert!(err.starts_with(expected), "{err}\nexpected: {expected}");
        }
        let mut nan = arrays(&[0], &[1], &ok_labels, SplitArray::Ids(&[0]));
        nan.features[[2, 1]] = f32::NAN;
        let err = Dataset::from_arrays(nan.clone()).unwrap_err().to_string();
        assert!(err.starts_with("features at [2, 1]: NaN is not a finite value"), "{err}");
        nan.allow_nonfinite = true;
        assert!(Dataset::from_arrays(nan).is_ok());
        let mut declared = arrays(&[0], &[1], &ok_labels, SplitArray::Ids(&[0]));
        declared.num_classes = Some(1);
        let err = Dataset::from_arrays(declared).unwrap_err().to_string();
        assert!(err.starts_with("labels at [1]: class 1 is out of range (num_classes is 1)"), "{err}");
        let mut multi = arrays(&[0], &[1], &ok_labels, SplitArray::Ids(&[0]));
        multi.labels = LabelArray::MultiLabel(array![[0.0, 1.0], [1.0, f32::NAN], [2.0, 0.0]]);
        let err = Dataset::from_arrays(multi).unwrap_err().to_string();
        assert!(err.starts_with("labels at [2, 0]: 2 is not 0 or 1"), "{err}");
    }
}
