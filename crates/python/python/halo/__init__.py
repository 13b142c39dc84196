"""Halo from Python: graph neural network training, single-process or across workers.

NumPy arrays (or a PyG ``Data`` object) go in; a training report, the per-epoch history and
the trained model come out. The training is Halo's own (the same code as ``halo train``), with
the interpreter released while it runs.

    >>> import halo
    >>> ds = halo.Dataset.from_arrays(edge_index, features, labels, train=..., val=..., test=...)
    >>> run = halo.train(ds, model="gcn", epochs=200, method="vanilla",
    ...                  distributed={"workers": 4, "hosts": 2})
    >>> run.report["final"]["test_acc_at_best_val"]
    >>> logits = run.model.predict(ds)

See ``docs/PYTHON.md`` in the repository for the whole guide.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from . import _halo

__all__ = ["Dataset", "Model", "Run", "train", "pyg_model", "MPI"]

#: Whether this build trains one rank per process under mpirun (the ``mpi`` feature).
MPI: bool = _halo.MPI

PathLike = Union[str, "os.PathLike[str]"]


def _array(name: str, value: Any) -> np.ndarray:
    """``value`` as a NumPy array: tensors (anything with ``detach``/``numpy``) are converted."""
    if value is None:
        raise ValueError(f"{name}: missing")
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "cpu"):
        value = value.cpu()
    if not isinstance(value, np.ndarray) and hasattr(value, "numpy"):
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype == object:
        raise ValueError(f"{name}: an array of Python objects; expected a numeric array")
    return array


def _ids(name: str, array: np.ndarray) -> np.ndarray:
    """An integer array as contiguous int64 (int32 and other integer types are copied once)."""
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name}: dtype {array.dtype}, expected integer node ids (int64 or int32)")
    return np.ascontiguousarray(array, dtype=np.int64)


def _split(name: str, value: Any) -> np.ndarray:
    """One part of the split: node ids, or a boolean mask with one flag per node."""
    if value is None:
        return np.zeros(0, dtype=np.int64)
    array = _array(name, value)
    if array.ndim != 1:
        raise ValueError(f"{name}: shape {array.shape}, expected (K,) node ids or an (N,) boolean mask")
    if array.dtype == np.bool_:
        return np.ascontiguousarray(array)
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    return _ids(name, array)


def _labels(value: Any) -> np.ndarray:
    """Class ids (N,) as int64, or (N, C) 0/1 targets as float32."""
    array = _array("labels", value)
    if array.ndim == 2 and array.shape[1] == 1 and np.issubdtype(array.dtype, np.integer):
        array = array[:, 0]
    if array.ndim == 1:
        if not np.issubdtype(array.dtype, np.integer):
            raise ValueError(f"labels: dtype {array.dtype}, expected integer class ids (N,) or (N, C) 0/1 targets")
        return np.ascontiguousarray(array, dtype=np.int64)
    if array.ndim == 2:
        if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
            raise ValueError(f"labels: dtype {array.dtype}, expected 0/1 targets")
        return np.ascontiguousarray(array, dtype=np.float32)
    raise ValueError(f"labels: shape {array.shape}, expected (N,) class ids or (N, C) 0/1 targets")


class Dataset:
    """A graph with node features, labels and one train/val/test split, held by Halo.

    Make one with :meth:`from_arrays`, :meth:`from_pyg` or :meth:`open`; write it with
    :meth:`save`. Every check of Halo's loader applies, and a failed one raises ``ValueError``
    naming the array and the first bad index.
    """

    __slots__ = ("_native",)

    def __init__(self, native: "_halo.NativeDataset") -> None:
        self._native = native

    @classmethod
    def from_arrays(
        cls,
        edge_index: Any,
        features: Any,
        labels: Any,
        train: Any = None,
        val: Any = None,
        test: Any = None,
        *,
        name: str = "arrays",
        num_classes: Optional[int] = None,
        allow_nonfinite: bool = False,
    ) -> "Dataset":
        """A dataset of NumPy arrays.

        Args:
            edge_index: (2, E) int64 or int32 node ids, one column per edge. The graph is made
                undirected, with duplicate edges and self loops dropped, as Halo's loader does.
            features: (N, F) float32, one row per node. Copied once into the dataset.
            labels: (N,) integer class ids (negative: unlabelled), or (N, C) 0/1 targets of a
                multi-label task (NaN: unknown).
            train, val, test: the split, each as node ids or an (N,) boolean mask.
            name: the dataset's name in reports.
            num_classes: the class count (default: one more than the largest class).
            allow_nonfinite: accept NaN and infinite features.

        Raises:
            ValueError: a wrong dtype or shape, an id out of range, a node in two splits, a split
                node without a label, a non-finite feature; the message names the array and the
                first bad index.
        """
        edges = _array("edge_index", edge_index)
        if edges.ndim != 2 or edges.shape[0] != 2:
            raise ValueError(f"edge_index: shape {edges.shape}, expected (2, E): sources, then targets")
        if not np.issubdtype(edges.dtype, np.integer):
            raise ValueError(f"edge_index: dtype {edges.dtype}, expected int64 or int32 node ids")
        x = _array("features", features)
        if x.dtype != np.float32:
            raise ValueError(f"features: dtype {x.dtype}, expected float32 (convert with .astype(numpy.float32))")
        if x.ndim != 2:
            raise ValueError(f"features: shape {x.shape}, expected (N, F): one row per node")
        sources = np.ascontiguousarray(edges[0], dtype=np.int64)
        targets = np.ascontiguousarray(edges[1], dtype=np.int64)
        native = _halo.NativeDataset.from_arrays(
            sources,
            targets,
            x,
            _labels(labels),
            _split("train", train),
            _split("val", val),
            _split("test", test),
            name,
            num_classes,
            allow_nonfinite,
        )
        return cls(native)

    @classmethod
    def from_pyg(cls, data: Any, *, name: str = "pyg", num_classes: Optional[int] = None) -> "Dataset":
        """A dataset of any object with PyG ``Data``'s attributes.

        Reads ``edge_index``, ``x``, ``y`` and the masks ``train_mask``, ``val_mask`` and
        ``test_mask`` (absent ones are empty), as tensors or arrays. Halo does not import torch:
        tensors are read through their ``numpy()`` method.
        """

        def attribute(key: str) -> Any:
            return getattr(data, key, None)

        for key in ("edge_index", "x", "y"):
            if attribute(key) is None:
                raise ValueError(f"{key}: the object has no `{key}` attribute (PyG Data's {key})")
        return cls.from_arrays(
            attribute("edge_index"),
            attribute("x"),
            attribute("y"),
            train=attribute("train_mask"),
            val=attribute("val_mask"),
            test=attribute("test_mask"),
            name=name,
            num_classes=num_classes,
        )

    @classmethod
    def open(cls, path_or_name: PathLike, *, split: Optional[str] = None, cache: bool = True) -> "Dataset":
        """Loads a Halo dataset folder, or a dataset by name under ``datasets/`` (``"cora"``).

        Args:
            path_or_name: the folder (OGB raw layout), or a name under ``datasets/`` of the
                working directory.
            split: the split folder under ``split/`` (default: the only one).
            cache: read and write the binary dataset cache, as ``halo train`` does.
        """
        return cls(_halo.NativeDataset.open(os.fspath(path_or_name), split, cache))

    def save(self, dir: PathLike) -> None:
        """Writes the dataset as a Halo dataset folder, which :meth:`open` and ``halo`` read."""
        self._native.save(os.fspath(dir))

    @property
    def name(self) -> str:
        """The dataset's name in reports."""
        return self._native.name

    @property
    def num_nodes(self) -> int:
        """Nodes of the graph."""
        return self._native.num_nodes

    @property
    def num_edges(self) -> int:
        """Stored (directed) edges: each undirected edge counts twice."""
        return self._native.num_edges

    @property
    def num_features(self) -> int:
        """Width of a feature row."""
        return self._native.num_features

    @property
    def num_classes(self) -> int:
        """Classes (single-label), or label columns (multi-label)."""
        return self._native.num_classes

    @property
    def multi_label(self) -> bool:
        """Whether the labels are rows of 0/1 targets."""
        return self._native.multi_label

    @property
    def folder(self) -> Optional[str]:
        """The folder the dataset was loaded from, if it was."""
        folder = self._native.folder
        return None if folder is None else os.fspath(folder)

    @property
    def edge_index(self) -> np.ndarray:
        """Every stored edge, both directions of each, as a new (2, E) int64 array."""
        return self._native.edge_index()

    @property
    def features(self) -> np.ndarray:
        """A copy of the features, (N, F) float32."""
        return self._native.features()

    @property
    def labels(self) -> np.ndarray:
        """A copy of the labels: (N,) int64 classes (-1: unlabelled), or (N, C) float32 targets."""
        return self._native.labels()

    @property
    def train(self) -> np.ndarray:
        """The training node ids, int64."""
        return self._native.split("train")

    @property
    def val(self) -> np.ndarray:
        """The validation node ids, int64."""
        return self._native.split("val")

    @property
    def test(self) -> np.ndarray:
        """The test node ids, int64."""
        return self._native.split("test")

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}, nodes={self.num_nodes}, edges={self.num_edges}, "
            f"features={self.num_features}, classes={self.num_classes})"
        )


class Model:
    """A trained model: its weights and the configuration that says what they mean."""

    __slots__ = ("_native",)

    def __init__(self, native: "_halo.NativeModel") -> None:
        self._native = native

    @classmethod
    def load(cls, path: PathLike) -> "Model":
        """Reads weights written by :meth:`save` or ``halo train --save-model`` (and their sidecar)."""
        return cls(_halo.NativeModel.load(os.fspath(path)))

    def save(self, path: PathLike) -> None:
        """Writes the weights as safetensors at ``path``, and the sidecar ``<path>.json`` beside it,
        as ``halo train --save-model`` does (``halo predict`` reads them)."""
        self._native.save(os.fspath(path))

    def predict(self, dataset: Dataset) -> np.ndarray:
        """The logits of every node of ``dataset``, (N, C) float32; features are normalised as in
        training. The class of node ``v`` is ``predict(ds)[v].argmax()``."""
        return self._native.predict(dataset._native)

    @property
    def config(self) -> Dict[str, Any]:
        """The sidecar: ``model`` (architecture and sizes), ``train`` (the run's settings),
        ``dataset``, ``epoch`` (the best validation epoch), ``val_acc``, ``test_acc``."""
        return json.loads(self._native.sidecar)

    def parameters(self) -> Dict[str, np.ndarray]:
        """Every parameter under its Halo name (``conv0.weight``: (in, out), applied as ``x @ W``)."""
        return self._native.parameters()

    def state_dict(self) -> Dict[str, np.ndarray]:
        """The parameters named and shaped as PyG's ``GCNConv``, ``SAGEConv`` and ``GATConv``
        name theirs inside the model :func:`pyg_model` builds (``convs.0.lin.weight``, ...).

        ``torch.nn.Module.load_state_dict`` takes it after ``torch.from_numpy`` on each array.
        """
        from ._pyg import state_dict

        return state_dict(self.config["model"], self.parameters())

    def __repr__(self) -> str:
        model = self.config["model"]
        return f"Model({model['kind']!r}, layers={model['layers']}, in={model['in_dim']}, out={model['out_dim']})"


class Run:
    """The outcome of :func:`train`."""

    __slots__ = ("report", "model")

    def __init__(self, report: Dict[str, Any], model: Optional[Model]) -> None:
        #: The report, as ``halo train --report`` writes it (the report contract). A run that
        #: stopped early has ``"incomplete": true``, a ``"reason"`` and no ``"final"``.
        self.report: Dict[str, Any] = report
        #: The model of the best validation epoch (``None`` for a run that stopped early).
        self.model: Optional[Model] = model

    @property
    def history(self) -> List[Dict[str, Any]]:
        """The epochs: one record each (``loss``, accuracies, times, bytes), as in the report."""
        return self.report["epochs"]

    @property
    def complete(self) -> bool:
        """Whether the run trained every epoch it was asked to (or stopped by patience)."""
        return not self.report.get("incomplete", False)

    @property
    def losses(self) -> List[float]:
        """The training loss of each epoch."""
        return [epoch["loss"] for epoch in self.history]

    def __repr__(self) -> str:
        state = "complete" if self.complete else "incomplete"
        return f"Run({self.report.get('method')!r}, epochs={len(self.history)}, {state})"


def _check_report_path(settings: Dict[str, Any]) -> None:
    """Refuses a report path that cannot be written, before any work (as ``halo train`` does)."""
    path = settings.get("report")
    if path is None:
        return
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ValueError(f"setting `report` {path}: is a directory")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise ValueError(f"setting `report` {path}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"setting `report` {path}: cannot create files in {folder}")


def train(
    dataset: Union[Dataset, PathLike],
    /,
    *,
    on_epoch: Optional[Callable[[Dict[str, Any]], Optional[bool]]] = None,
    progress: bool = True,
    **settings: Any,
) -> Run:
    """Trains a graph neural network on ``dataset``; returns the :class:`Run`.

    Args:
        dataset: a :class:`Dataset`, or a folder or name that :meth:`Dataset.open` opens.
        on_epoch: called with each epoch's record (a dict, as in the report) when the epoch
            ends; returning ``False`` stops the run before its next epoch (the workers of a
            distributed run may finish the epoch they are in).
        progress: show progress on stderr: a bar on a terminal, else a line every few seconds.
        **settings: the keys of ``halo train --config`` (TOML), with ``_`` for ``-``:
            ``model="gat"``, ``epochs=50``, ``weight_decay=5e-4``, ``method="adaqp"``,
            ``distributed={"workers": 4, "hosts": 2}``, ``adaqp={"bits": "adaptive"}`` (a
            method's table, ``[method.adaqp]`` in TOML), ``report="run.json"``. They are read
            and validated by the same code as the CLI's.

    Raises:
        ValueError: an unknown key or a wrong value (the CLI's message), or a dataset the run
            cannot train on.
        KeyboardInterrupt: Ctrl-C; the run stops at the end of the epoch it is in. The
            exception's ``run`` attribute holds the epochs so far, and a ``report`` path given
            holds them too, marked ``"incomplete": true``.
    """
    if not isinstance(dataset, Dataset):
        dataset = Dataset.open(dataset)
    _check_report_path(settings)
    terminal = bool(getattr(sys.stderr, "isatty", lambda: False)())
    native = _halo.train(dataset._native, settings, on_epoch, progress, terminal)
    run = Run(json.loads(native.report), None if native.model is None else Model(native.model))
    if native.error is not None:
        error = native.error
        error.run = run
        raise error
    return run


def pyg_model(model: Model) -> Any:
    """The PyG model (a ``torch.nn.Module``) of ``model``'s architecture, with its weights
    loaded: ``pyg_model(m)(x, edge_index)`` gives the logits of ``m.predict``.

    Needs torch and torch_geometric (Halo itself does not).
    """
    from ._pyg import build

    return build(model.config["model"], model.state_dict())
