"""Models out: predictions, files the CLI reads, and PyG's parameter names."""

import importlib.util
import subprocess

import numpy as np
import pytest

import halo

from conftest import CORA, ROOT, _halo_binary


@pytest.fixture(scope="module")
def cora():
    return halo.Dataset.open(CORA)


@pytest.fixture(scope="module", params=["gcn", "sage", "gat"])
def trained(request, cora):
    return halo.train(cora, model=request.param, epochs=5, feature_norm="row", progress=False)


def test_predict_gives_the_logits_the_reported_accuracy_comes_from(trained, cora):
    logits = trained.model.predict(cora)
    assert logits.shape == (cora.num_nodes, cora.num_classes) and logits.dtype == np.float32
    best = trained.report["final"]
    test = cora.test
    accuracy = float(np.mean(logits[test].argmax(axis=1) == cora.labels[test]))
    assert accuracy == pytest.approx(best["test_acc_at_best_val"], abs=1e-9)


def test_a_saved_model_loads_and_predicts_the_same(trained, cora, tmp_path):
    path = tmp_path / "m.safetensors"
    trained.model.save(path)
    assert (tmp_path / "m.safetensors.json").is_file()
    back = halo.Model.load(path)
    assert np.array_equal(back.predict(cora), trained.model.predict(cora))
    assert back.config["epoch"] == trained.report["final"]["best_epoch"]


def test_the_cli_predicts_from_a_model_python_saved(cora, tmp_path):
    binary = _halo_binary()
    if binary is None:
        pytest.skip("no halo binary: set HALO_BIN, or build it with `cargo build -p cli`")
    run = halo.train(cora, epochs=5, progress=False)
    path = tmp_path / "m.safetensors"
    run.model.save(path)
    out = tmp_path / "p.csv"
    subprocess.run([str(binary), "predict", "--model", str(path), "--out", str(out)], cwd=ROOT, check=True)
    rows = out.read_text().splitlines()[1:]
    predicted = np.array([int(row.split(",")[1]) for row in rows])
    assert np.array_equal(predicted, run.model.predict(cora).argmax(axis=1))


def test_state_dict_names_and_shapes_follow_pyg(trained):
    model = trained.model.config["model"]
    params = trained.model.parameters()
    state = trained.model.state_dict()
    kind, f, c = model["kind"], model["in_dim"], model["out_dim"]
    if kind == "gcn":
        assert sorted(state) == ["convs.0.bias", "convs.0.lin.weight", "convs.1.bias", "convs.1.lin.weight"]
        assert state["convs.0.lin.weight"].shape == (model["hidden"], f)
        assert np.array_equal(state["convs.1.lin.weight"], params["conv1.weight"].T)
    elif kind == "sage":
        assert "convs.0.lin_l.weight" in state and "convs.0.lin_r.weight" in state and "convs.0.lin_l.bias" in state
        assert np.array_equal(state["convs.0.lin_r.weight"], params["conv0.weight_self"].T)
    else:
        heads, hidden = model["heads"], model["hidden"]
        assert state["convs.0.lin.weight"].shape == (heads * hidden, f)
        assert state["convs.0.att_src"].shape == (1, heads, hidden)
        assert state["convs.1.att_dst"].shape == (1, model["out_heads"], c)
        assert state["convs.0.bias"].shape == (heads * hidden,)


HAVE_PYG = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("torch_geometric") is not None


@pytest.mark.skipif(not HAVE_PYG, reason="torch and torch_geometric are not installed")
def test_the_pyg_model_predicts_what_halo_predicts(trained, cora):
    import torch

    module = halo.pyg_model(trained.model)
    x = torch.from_numpy(cora.features)
    x = x / x.sum(dim=1, keepdim=True).clamp(min=1e-12)  # feature_norm="row"
    with torch.no_grad():
        logits = module(x, torch.from_numpy(cora.edge_index)).numpy()
    assert np.abs(logits - trained.model.predict(cora)).max() < 1e-4
