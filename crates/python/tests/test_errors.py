"""Bad input raises ValueError naming what is wrong; none crashes the interpreter."""

import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest

import halo

from conftest import CORA


def arrays(**change):
    """A small valid dataset's arguments, with `change` applied."""
    n = 6
    args = {
        "edge_index": np.array([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]], dtype=np.int64),
        "features": np.eye(n, 3, dtype=np.float32),
        "labels": np.array([0, 1, 0, 1, 0, 1], dtype=np.int64),
        "train": np.array([0, 1]),
        "val": np.array([2, 3]),
        "test": np.array([4, 5]),
    }
    args.update(change)
    return args


def nan_features():
    x = np.eye(6, 3, dtype=np.float32)
    x[5, 2] = np.nan
    return x


BAD_ARRAYS = [
    ("edge_index shape", arrays(edge_index=np.zeros((3, 4), dtype=np.int64)), "edge_index: shape (3, 4), expected (2, E)"),
    ("edge_index dtype", arrays(edge_index=np.zeros((2, 4))), "edge_index: dtype float64"),
    ("edge id too large", arrays(edge_index=np.array([[0, 1], [1, 6]])), "edge_index at [1, 1]: node id 6 is out of range"),
    ("negative edge id", arrays(edge_index=np.array([[-1], [1]], dtype=np.int32)), "edge_index at [0, 0]: node id -1"),
    ("features dtype", arrays(features=np.eye(6, 3)), "features: dtype float64, expected float32"),
    ("features shape", arrays(features=np.ones(6, dtype=np.float32)), "features: shape (6,), expected (N, F)"),
    ("NaN feature", arrays(features=nan_features()), "features at [5, 2]: NaN is not a finite value"),
    ("labels length", arrays(labels=np.zeros(5, dtype=np.int64)), "labels: 5 labels for 6 nodes"),
    ("labels dtype", arrays(labels=np.zeros(6)), "labels: dtype float64"),
    ("split id out of range", arrays(train=np.array([0, 60])), "train at [1]: node id 60 is out of range"),
    ("node in two splits", arrays(val=np.array([1, 3])), "val at [0]: node 1 is already in the train split"),
    ("split node without label", arrays(labels=np.array([-1, 1, 0, 1, 0, 1])), "train at [0]: node 0 has no label"),
    ("mask length", arrays(test=np.zeros(4, dtype=bool)), "test: 4 flags for 6 nodes"),
    ("split dtype", arrays(test=np.array([4.0, 5.0])), "test: dtype float64"),
]


@pytest.mark.parametrize("case,args,message", BAD_ARRAYS, ids=[c[0] for c in BAD_ARRAYS])
def test_bad_arrays_raise_value_error_naming_the_array(case, args, message):
    with pytest.raises(ValueError) as caught:
        halo.Dataset.from_arrays(**args)
    assert str(caught.value).startswith(message), str(caught.value)


def test_class_beyond_num_classes_names_the_index():
    with pytest.raises(ValueError, match=r"labels at \[1\]: class 1 is out of range \(num_classes is 1\)"):
        halo.Dataset.from_arrays(**arrays(), num_classes=1)


def test_a_pyg_object_without_features_is_named():
    data = types.SimpleNamespace(edge_index=np.zeros((2, 0), dtype=np.int64), y=np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="x: the object has no `x` attribute"):
        halo.Dataset.from_pyg(data)


BAD_SETTINGS = [
    ("unknown key", {"layerz": 2}, "setting `layerz`: unknown field `layerz`"),
    ("wrong type", {"epochs": "many"}, "setting `epochs`"),
    ("out of range", {"dropout": 1.5}, "setting `dropout`"),
    ("wrong section", {"workers": 4}, "setting `workers`: not a key of the top level: it belongs in [distributed]"),
    ("unknown method", {"method": "nope"}, "setting `method`"),
    ("none value", {"lr": None}, "setting `lr`: a NoneType is not a setting's value"),
    ("unknown section key", {"distributed": {"wrkers": 4}}, "setting `wrkers`"),
    ("method's setting elsewhere", {"method": "vanilla", "adaqp": {"bits": "nine"}}, "setting `bits`"),
    ("dataset key", {"dataset": "cora"}, "setting `dataset`: pass the dataset as train's first argument"),
    ("report folder", {"report": "/no/such/dir/r.json"}, "setting `report` /no/such/dir/r.json: directory"),
]


@pytest.mark.parametrize("case,settings,message", BAD_SETTINGS, ids=[c[0] for c in BAD_SETTINGS])
def test_bad_settings_raise_the_clis_message(case, settings, message):
    ds = halo.Dataset.from_arrays(**arrays())
    with pytest.raises(ValueError) as caught:
        halo.train(ds, progress=False, **{"epochs": 1, **settings})
    assert message in str(caught.value), str(caught.value)


def test_a_missing_dataset_folder_is_a_value_error():
    with pytest.raises(ValueError, match="dataset `/no/such/folder` not found"):
        halo.Dataset.open("/no/such/folder")


def test_no_bad_input_crashes_the_interpreter():
    """Every bad input above, in a fresh interpreter: it must end normally, each one refused."""
    script = """
import sys
sys.path.insert(0, HERE)
import test_errors as t, halo
refused = 0
for _, args, _ in t.BAD_ARRAYS:
    try:
        halo.Dataset.from_arrays(**args)
    except ValueError:
        refused += 1
ds = halo.Dataset.from_arrays(**t.arrays())
for _, settings, _ in t.BAD_SETTINGS:
    try:
        halo.train(ds, progress=False, **{"epochs": 1, **settings})
    except ValueError:
        refused += 1
print(refused)
""".replace("HERE", repr(str(pathlib.Path(__file__).parent)))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) == len(BAD_ARRAYS) + len(BAD_SETTINGS)


def test_a_dataset_opens_as_saved(tmp_path):
    ds = halo.Dataset.open(CORA)
    ds.save(tmp_path / "copy")
    back = halo.Dataset.open(tmp_path / "copy", cache=False)
    assert (back.num_nodes, back.num_edges, back.num_classes) == (ds.num_nodes, ds.num_edges, ds.num_classes)
    assert np.array_equal(back.features, ds.features) and np.array_equal(back.labels, ds.labels)
    assert np.array_equal(back.train, ds.train) and np.array_equal(back.test, ds.test)
    assert np.array_equal(back.edge_index, ds.edge_index)
