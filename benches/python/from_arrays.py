"""`from_arrays` + `train` against `halo train` on the same dataset folder: the epoch time and the
peak RSS of each (docs/BENCHMARKS.md). Run from the repository root with the package installed:

    python benches/python/from_arrays.py HALO_BINARY DATASET_DIR [EPOCHS]

Each side runs in a process of its own; the Python side reads the folder's arrays into NumPy,
drops the dataset they came from, and builds its dataset with `from_arrays`. The peak RSS is
each report's `final.peak_rss_bytes`: the process's VmHWM at the end of training.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

PYTHON_SIDE = """
import json, sys, halo
src = halo.Dataset.open(sys.argv[1])
arrays = dict(edge_index=src.edge_index, features=src.features, labels=src.labels,
              train=src.train, val=src.val, test=src.test, name=src.name)
del src
ds = halo.Dataset.from_arrays(**arrays)
del arrays
run = halo.train(ds, epochs=int(sys.argv[2]), progress=False)
print(json.dumps(run.report))
"""


def epoch_s(epochs):
    """The median training step of the epochs after the first."""
    return statistics.median(e["wall_s"] for e in epochs[1:])


def cli_side(binary, dataset, epochs):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        subprocess.run([binary, "train", "--dataset", dataset, "--epochs", str(epochs), "--quiet", "--report", report],
                       check=True, stdout=subprocess.DEVNULL)
        with open(report) as f:
            return json.load(f)


def python_side(dataset, epochs):
    out = subprocess.run([sys.executable, "-c", PYTHON_SIDE, dataset, str(epochs)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    binary, dataset = sys.argv[1], sys.argv[2]
    epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    rows = []
    for trial in range(2):
        py = python_side(dataset, epochs)
        cli = cli_side(binary, dataset, epochs)
        # Each report's peak RSS is its process's VmHWM at the end of training.
        peaks = (cli["final"]["peak_rss_bytes"], py["final"]["peak_rss_bytes"])
        rows.append((trial, epoch_s(cli["epochs"]), epoch_s(py["epochs"]), *peaks))
    print("| trial | CLI epoch s | Python epoch s | ratio | CLI peak RSS MiB | Python peak RSS MiB | ratio |")
    print("|---|---|---|---|---|---|---|")
    for trial, ce, pe, cr, pr in rows:
        print(f"| {trial} | {ce:.4f} | {pe:.4f} | {pe / ce:.3f} | {cr / 2**20:.0f} | {pr / 2**20:.0f} | {pr / cr:.3f} |")


if __name__ == "__main__":
    main()
