"""Fixtures of the halo package's tests: the repository, Cora as NumPy arrays read from its raw
files, and the `halo` binary the package is compared with."""

import gzip
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
CORA = ROOT / "datasets" / "cora"


def _csv(path: pathlib.Path, dtype) -> np.ndarray:
    with gzip.open(path, "rt") as f:
        return np.loadtxt(f, delimiter=",", dtype=dtype, ndmin=1)


@pytest.fixture(scope="session")
def cora_arrays():
    """Cora from its raw CSV files, with NumPy alone: edge_index (2, E) int64, features (N, F)
    float32, labels (N,) int64 and the public split's node ids."""
    raw = CORA / "raw"
    edges = _csv(raw / "edge.csv.gz", np.int64).reshape(-1, 2).T.copy()
    features = _csv(raw / "node-feat.csv.gz", np.float32)
    labels = _csv(raw / "node-label.csv.gz", np.int64)
    split = CORA / "split" / "public"
    parts = {part: _csv(split / f"{part}.csv.gz", np.int64) for part in ("train", "valid", "test")}
    return {"edge_index": edges, "features": features, "labels": labels, **parts}


def _halo_binary():
    explicit = os.environ.get("HALO_BIN")
    if explicit:
        return pathlib.Path(explicit)
    built = [ROOT / "target" / profile / "halo" for profile in ("debug", "release")]
    built = [path for path in built if path.is_file()]
    return max(built, key=lambda path: path.stat().st_mtime) if built else None


@pytest.fixture(scope="session")
def cli(tmp_path_factory):
    """Runs `halo ARGS --report FILE` from the repository root and returns the report."""
    binary = _halo_binary()
    if binary is None or not binary.is_file():
        pytest.skip("no halo binary: set HALO_BIN, or build it with `cargo build -p cli`")
    folder = tmp_path_factory.mktemp("cli")

    def run(*args: str) -> dict:
        report = folder / f"report-{len(list(folder.iterdir()))}.json"
        subprocess.run([str(binary), *args, "--quiet", "--report", str(report)], cwd=ROOT, check=True)
        return json.loads(report.read_text())

    return run
