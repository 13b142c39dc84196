//! `halo.Dataset`'s native half: a dataset in memory, made from arrays, loaded from a dataset
//! folder, or written to one. The Python class (`python/halo/__init__.py`) checks dtypes and
//! shapes and hands over contiguous arrays; the checks of the values are graph-partition's
//! (`Dataset::from_arrays`, the loader's).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use graph_partition::dataset::{Arrays, CacheMode, LabelArray, LoadOptions, SplitArray};
use graph_partition::{Dataset, Labels};
use numpy::{PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, ToPyArray};
use pyo3::prelude::*;

use crate::value_error;

/// A graph with node features, labels and one train/val/test split, held by Halo.
#[pyclass(frozen, module = "halo._halo", name = "NativeDataset")]
pub struct NativeDataset {
    pub(crate) dataset: Arc<Dataset>,
    /// The folder it was loaded from, if any.
    pub(crate) dir: Option<PathBuf>,
}

/// One part of the split as Python gives it: node ids, or a mask.
#[derive(FromPyObject)]
pub enum SplitInput<'py> {
    Mask(PyReadonlyArray1<'py, bool>),
    Ids(PyReadonlyArray1<'py, i64>),
}

impl SplitInput<'_> {
    fn as_split(&self) -> PyResult<SplitArray<'_>> {
        Ok(match self {
            SplitInput::Mask(mask) => SplitArray::Mask(contiguous(mask.as_slice())?),
            SplitInput::Ids(ids) => SplitArray::Ids(contiguous(ids.as_slice())?),
        })
    }
}

/// Labels as Python gives them: one class per node, or rows of 0/1 targets.
#[derive(FromPyObject)]
pub enum LabelInput<'py> {
    Classes(PyReadonlyArray1<'py, i64>),
    MultiLabel(PyReadonlyArray2<'py, f32>),
}

fn contiguous<T>(slice: Result<&[T], numpy::AsSliceError>) -> PyResult<&[T]> {
    slice.map_err(|_| value_error("arrays must be contiguous (numpy.ascontiguousarray)"))
}

#[pymethods]
impl NativeDataset {
    /// The dataset of the given arrays (see `halo.Dataset.from_arrays`).
    #[staticmethod]
    #[pyo3(signature = (sources, targets, features, labels, train, val, test, name, num_classes, allow_nonfinite))]
    #[allow(clippy::too_many_arguments)]
    fn from_arrays(
        py: Python<'_>,
        sources: PyReadonlyArray1<'_, i64>,
        targets: PyReadonlyArray1<'_, i64>,
        features: PyReadonlyArray2<'_, f32>,
        labels: LabelInput<'_>,
        train: SplitInput<'_>,
        val: SplitInput<'_>,
        test: SplitInput<'_>,
        name: String,
        num_classes: Option<usize>,
        allow_nonfinite: bool,
    ) -> PyResult<Self> {
        // The one copy of the features: the dataset owns its rows.
        let features = features.as_array().to_owned();
        let labels = match &labels {
            LabelInput::Classes(classes) => LabelArray::Classes(contiguous(classes.as_slice())?),
            LabelInput::MultiLabel(targets) => LabelArray::MultiLabel(targets.as_array().to_owned()),
        };
        let arrays = Arrays {
            name,
            sources: contiguous(sources.as_slice())?,
            targets: contiguous(targets.as_slice())?,
            features,
            labels,
            num_classes,
            train: train.as_split()?,
            valid: val.as_split()?,
            test: test.as_split()?,
            allow_nonfinite,
        };
        let dataset = py.detach(|| Dataset::from_arrays(arrays)).map_err(|e| value_error(e.to_string()))?;
        Ok(Self { dataset: Arc::new(dataset), dir: None })
    }

    /// Loads a dataset folder, or a name under `datasets/` of the working directory.
    #[staticmethod]
    #[pyo3(signature = (spec, split=None, cache=true))]
    fn open(py: Python<'_>, spec: &str, split: Option<String>, cache: bool) -> PyResult<Self> {
        let dir =
            trainer::data::resolve_dataset_dir(spec, Path::new("datasets")).map_err(|e| value_error(e.to_string()))?;
        let options =
            LoadOptions { split, cache: if cache { CacheMode::Use } else { CacheMode::Off }, ..LoadOptions::default() };
        let dataset = py.detach(|| Dataset::load(&dir, &options)).map_err(|e| value_error(e.to_string()))?;
        Ok(Self { dataset: Arc::new(dataset), dir: Some(dir) })
    }

    /// Writes the dataset as a dataset folder at `dir` (the OGB raw layout that `open` reads).
    fn save(&self, py: Python<'_>, dir: PathBuf) -> PyResult<()> {
        let dataset = &self.dataset;
        py.detach(|| dataset.write_ogb(&dir)).map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))
    }

    #[getter]
    fn name(&self) -> &str {
        &self.dataset.name
    }

    #[getter]
    fn num_nodes(&self) -> usize {
        self.dataset.num_nodes()
    }

    #[getter]
    fn num_edges(&self) -> usize {
        self.dataset.graph.num_edges()
    }

    #[getter]
    fn num_features(&self) -> usize {
        self.dataset.num_features()
    }

    #[getter]
    fn num_classes(&self) -> usize {
        self.dataset.num_classes
    }

    #[getter]
    fn multi_label(&self) -> bool {
        self.dataset.labels.is_multi_label()
    }

    #[getter]
    fn split_name(&self) -> &str {
        &self.dataset.splits.name
    }

    #[getter]
    fn folder(&self) -> Option<PathBuf> {
        self.dir.clone()
    }

    /// Every stored edge, both directions of each, as a (2, E) int64 array.
    fn edge_index<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let graph = &self.dataset.graph;
        let edges = graph.num_edges();
        let mut flat = vec![0i64; 2 * edges];
        let (sources, targets) = flat.split_at_mut(edges);
        let mut k = 0;
        for v in 0..graph.num_nodes() {
            for &u in graph.neighbors(v) {
                sources[k] = v as i64;
                targets[k] = i64::from(u);
                k += 1;
            }
        }
        let array = ndarray::Array2::from_shape_vec((2, edges), flat).map_err(|e| value_error(e.to_string()))?;
        Ok(PyArray2::from_owned_array(py, array))
    }

    /// A copy of the features, (N, F) float32.
    fn features<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f32>> {
        self.dataset.features.to_pyarray(py)
    }

    /// The labels: int64 classes (-1 for unlabelled), or float32 rows of targets.
    fn labels<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        match &self.dataset.labels {
            Labels::Classes(classes) => {
                let classes: Vec<i64> =
                    classes.iter().map(|&c| if c == Labels::UNLABELLED { -1 } else { i64::from(c) }).collect();
                PyArray1::from_vec(py, classes).into_any()
            }
            Labels::MultiLabel(targets) => targets.to_pyarray(py).into_any(),
        }
    }

    /// The node ids of one part of the split (`train`, `val` or `test`).
    fn split<'py>(&self, py: Python<'py>, part: &str) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let splits = &self.dataset.splits;
        let ids = match part {
            "train" => &splits.train,
            "val" => &splits.valid,
            "test" => &splits.test,
            other => return Err(value_error(format!("no split part `{other}`: train, val or test"))),
        };
        Ok(PyArray1::from_vec(py, ids.iter().map(|&v| i64::from(v)).collect()))
    }
}
