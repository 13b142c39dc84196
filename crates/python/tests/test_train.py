"""Training from Python equals `halo train` on the same data and settings, epoch for epoch."""

import json
import threading
import types

import numpy as np
import pytest

import halo

from conftest import CORA


def cora_from_arrays(arrays) -> halo.Dataset:
    return halo.Dataset.from_arrays(
        arrays["edge_index"],
        arrays["features"],
        arrays["labels"],
        train=arrays["train"],
        val=arrays["valid"],
        test=arrays["test"],
        name="cora",
    )


def test_cora_from_numpy_equals_the_cli_bit_for_bit(cli, cora_arrays):
    ds = cora_from_arrays(cora_arrays)
    assert (ds.num_nodes, ds.num_edges, ds.num_features, ds.num_classes) == (2708, 10556, 1433, 7)
    run = halo.train(ds, epochs=20, seed=7, feature_norm="row", progress=False)
    report = cli("train", "--dataset", "cora", "--epochs", "20", "--seed", "7", "--feature-norm", "row")
    assert len(run.losses) == 20
    assert run.losses == [e["loss"] for e in report["epochs"]]
    assert [e["val_acc"] for e in run.history] == [e["val_acc"] for e in report["epochs"]]
    assert run.report["final"]["best_epoch"] == report["final"]["best_epoch"]
    assert run.complete and run.model is not None


def test_a_plain_object_with_pyg_attributes_equals_the_cli(cli, cora_arrays):
    n = cora_arrays["features"].shape[0]

    def mask(ids):
        flags = np.zeros(n, dtype=bool)
        flags[ids] = True
        return flags

    data = types.SimpleNamespace(
        edge_index=cora_arrays["edge_index"],
        x=cora_arrays["features"],
        y=cora_arrays["labels"],
        train_mask=mask(cora_arrays["train"]),
        val_mask=mask(cora_arrays["valid"]),
        test_mask=mask(cora_arrays["test"]),
    )
    ds = halo.Dataset.from_pyg(data, name="cora")
    run = halo.train(ds, epochs=20, seed=7, model="sage", progress=False)
    report = cli("train", "--dataset", "cora", "--epochs", "20", "--seed", "7", "--model", "sage")
    assert run.losses == [e["loss"] for e in report["epochs"]]


def test_distributed_vanilla_equals_the_cli(cli):
    ds = halo.Dataset.open(CORA)
    run = halo.train(ds, method="vanilla", distributed={"workers": 4, "hosts": 2}, epochs=10, progress=False)
    report = cli("train", "--dataset", "cora", "--method", "vanilla", "--workers", "4", "--hosts", "2", "--epochs", "10")
    assert (run.report["workers"], run.report["hosts"]) == (4, 2)
    assert run.losses == [e["loss"] for e in report["epochs"]]
    assert [e["bytes_inter"] for e in run.history] == [e["bytes_inter"] for e in report["epochs"]]
    assert run.report["final"]["bytes_total"] == report["final"]["bytes_total"] > 0


def test_the_report_follows_the_contract_and_is_written_where_asked(tmp_path):
    ds = halo.Dataset.open(CORA)
    path = tmp_path / "run.json"
    run = halo.train(ds, epochs=3, report=str(path), progress=False)
    assert json.loads(path.read_text()) == run.report
    for key in ("dataset", "model", "method", "cut", "workers", "hosts", "seed", "config", "epochs", "final"):
        assert key in run.report, key
    assert run.report["config"]["epochs"] == 3
    assert set(run.history[0]) >= {"epoch", "loss", "train_acc", "val_acc", "test_acc", "wall_s", "bytes_by_phase"}


def test_on_epoch_sees_every_epoch_and_may_stop_the_run(tmp_path):
    ds = halo.Dataset.open(CORA)
    seen = []

    def on_epoch(record):
        seen.append(record["epoch"])
        return record["epoch"] < 3

    path = tmp_path / "stopped.json"
    run = halo.train(ds, epochs=50, on_epoch=on_epoch, report=path, progress=False)
    assert seen == [1, 2, 3]
    assert not run.complete and run.model is None
    assert len(run.history) == 3 and "final" not in run.report
    assert run.report["reason"] == "stopped by on_epoch after epoch 3"
    assert json.loads(path.read_text())["incomplete"] is True


def test_on_epoch_stops_a_distributed_run_too():
    ds = halo.Dataset.open(CORA)
    run = halo.train(
        ds, method="vanilla", distributed={"workers": 2}, epochs=50, on_epoch=lambda r: r["epoch"] < 2, progress=False
    )
    # The workers run ahead of the observer by at most the epoch they are in.
    assert not run.complete and len(run.history) in (2, 3)


def test_an_exception_in_on_epoch_is_raised_with_the_epochs_kept():
    ds = halo.Dataset.open(CORA)

    def on_epoch(record):
        if record["epoch"] == 2:
            raise RuntimeError("enough")

    with pytest.raises(RuntimeError, match="enough") as caught:
        halo.train(ds, epochs=50, on_epoch=on_epoch, progress=False)
    assert len(caught.value.run.history) == 2


def test_the_interpreter_runs_other_threads_while_training():
    ds = halo.Dataset.open(CORA)
    ticks = []
    done = threading.Event()

    def tick():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        # Without the callback the interpreter is never taken back during the run.
        run = halo.train(ds, epochs=30, hidden=256, progress=False)
    finally:
        done.set()
        thread.join()
    assert run.complete
    train_s = run.report["final"]["train_wall_s"]
    assert len(ticks) > 10, f"{len(ticks)} ticks during {train_s:.3f} s of training"
