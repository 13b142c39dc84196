"""Type stubs of the halo package (see ``__init__.py`` for the docstrings)."""

import os
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

PathLike = Union[str, os.PathLike[str]]

MPI: bool

class Dataset:
    """A graph with node features, labels and one train/val/test split, held by Halo."""

    @classmethod
    def from_arrays(
        cls,
        edge_index: Any,
        features: Any,
        labels: Any,
        train: Any = ...,
        val: Any = ...,
        test: Any = ...,
        *,
        name: str = ...,
        num_classes: Optional[int] = ...,
        allow_nonfinite: bool = ...,
    ) -> Dataset:
        """A dataset of NumPy arrays: (2, E) int ids, (N, F) float32 features, (N,) int classes
        or (N, C) 0/1 targets, and the split as node ids or boolean masks."""
    @classmethod
    def from_pyg(cls, data: Any, *, name: str = ..., num_classes: Optional[int] = ...) -> Dataset:
        """A dataset of any object with PyG Data's attributes (edge_index, x, y, *_mask)."""
    @classmethod
    def open(cls, path_or_name: PathLike, *, split: Optional[str] = ..., cache: bool = ...) -> Dataset:
        """Loads a Halo dataset folder, or a dataset by name under ``datasets/``."""
    def save(self, dir: PathLike) -> None:
        """Writes the dataset as a Halo dataset folder."""
    @property
    def name(self) -> str:
        """The dataset's name in reports."""
    @property
    def num_nodes(self) -> int:
        """Nodes of the graph."""
    @property
    def num_edges(self) -> int:
        """Stored (directed) edges: each undirected edge counts twice."""
    @property
    def num_features(self) -> int:
        """Width of a feature row."""
    @property
    def num_classes(self) -> int:
        """Classes (single-label), or label columns (multi-label)."""
    @property
    def multi_label(self) -> bool:
        """Whether the labels are rows of 0/1 targets."""
    @property
    def folder(self) -> Optional[str]:
        """The folder the dataset was loaded from, if it was."""
    @property
    def edge_index(self) -> np.ndarray:
        """Every stored edge as a new (2, E) int64 array."""
    @property
    def features(self) -> np.ndarray:
        """A copy of the features, (N, F) float32."""
    @property
    def labels(self) -> np.ndarray:
        """A copy of the labels: (N,) int64 (-1: unlabelled), or (N, C) float32."""
    @property
    def train(self) -> np.ndarray:
        """The training node ids, int64."""
    @property
    def val(self) -> np.ndarray:
        """The validation node ids, int64."""
    @property
    def test(self) -> np.ndarray:
        """The test node ids, int64."""

class Model:
    """A trained model: its weights and the configuration that says what they mean."""

    @classmethod
    def load(cls, path: PathLike) -> Model:
        """Reads weights written by ``save`` or ``halo train --save-model``."""
    def save(self, path: PathLike) -> None:
        """Writes safetensors weights at ``path`` and the sidecar ``<path>.json``."""
    def predict(self, dataset: Dataset) -> np.ndarray:
        """The logits of every node, (N, C) float32."""
    @property
    def config(self) -> Dict[str, Any]:
        """The sidecar: model, train, dataset, epoch, val_acc, test_acc."""
    def parameters(self) -> Dict[str, np.ndarray]:
        """Every parameter under its Halo name."""
    def state_dict(self) -> Dict[str, np.ndarray]:
        """The parameters under the names of the PyG model ``pyg_model`` builds."""

class Run:
    """The outcome of ``train``."""

    report: Dict[str, Any]
    model: Optional[Model]
    def __init__(self, report: Dict[str, Any], model: Optional[Model]) -> None: ...
    @property
    def history(self) -> List[Dict[str, Any]]:
        """The epochs, as in the report."""
    @property
    def complete(self) -> bool:
        """Whether the run trained every epoch it was asked to (or stopped by patience)."""
    @property
    def losses(self) -> List[float]:
        """The training loss of each epoch."""

def train(
    dataset: Union[Dataset, PathLike],
    /,
    *,
    on_epoch: Optional[Callable[[Dict[str, Any]], Optional[bool]]] = ...,
    progress: bool = ...,
    **settings: Any,
) -> Run:
    """Trains on ``dataset`` with the settings of ``halo train --config`` (``_`` for ``-``)."""

def pyg_model(model: Model) -> Any:
    """The PyG ``torch.nn.Module`` of ``model``'s architecture with its weights (needs torch)."""
