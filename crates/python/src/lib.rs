//! The native module of the `halo` Python package (`halo._halo`). The pure-Python package
//! around it (`python/halo/`) is the public interface; this module holds the parts that run in
//! Rust, each over the trainer's and graph-partition's own code:
//!
//! - `dataset`: a dataset from arrays, from a dataset folder, to a dataset folder;
//! - `settings`: `halo.train`'s keyword arguments read as the TOML keys of `halo train --config`;
//! - `train`: a training run with the interpreter released, its report and model;
//! - `model`: trained weights, prediction, safetensors files.

mod dataset;
mod model;
mod settings;
mod train;

use pyo3::prelude::*;

/// A `ValueError` saying `message`.
pub(crate) fn value_error(message: impl Into<String>) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(message.into())
}

#[pymodule]
fn _halo(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<dataset::NativeDataset>()?;
    m.add_class::<model::NativeModel>()?;
    m.add_class::<train::NativeRun>()?;
    m.add_function(wrap_pyfunction!(train::train, m)?)?;
    m.add("MPI", cfg!(feature = "mpi"))?;
    Ok(())
}
