#!/usr/bin/env python3
"""PyG peer on one CUDA GPU: full-batch GCN, GraphSAGE or GAT with Halo's shapes, timing the
training step and the evaluation apart, through both of PyG's adjacency paths.

usage: pyg_gpu.py DATA_DIR [--model gcn|sage|gat] [--layers 2] [--hidden 16] [--heads 8]
                  [--epochs 10] [--lr 0.01] [--weight-decay 5e-4] [--dropout 0.5] [--seed 0]
                  [--split NAME] [--paths edge_index,csr] [--device cuda] [--out FILE.json]

The model is Halo's (`halo train` with the same flags): dropout on the input of every layer,
ReLU between layers (GAT: ELU, `--heads` heads of `--hidden` concatenated in the hidden layers,
one output head, attention dropout equal to `--dropout`, self loops), GCN normalised with self
loops, GraphSAGE the mean aggregator with a root weight, Adam with L2 weight decay coupled into
the gradient (`torch.optim.Adam`). A step is forward, loss, backward and optimizer step; an
evaluation is one forward in eval mode and the accuracy of every split. Both are timed with
`torch.cuda.synchronize()` on either side.

The graph is the one Halo trains on: read from Halo's binary cache (DATA_DIR/processed/, written
by any `halo train` or `halo datasets info` on the folder) when it is there, else parsed from the
OGB raw CSVs (symmetrised, without self loops and duplicates, as Halo loads them).

Prints one JSON line (also written to --out): per adjacency path (`edge_index`, and `csr`, a
torch.sparse CSR adjacency) the per-epoch seconds of step and evaluation, the loss, the last
epoch's accuracies and the peak GPU memory, or the error that path raised; `faster` names the
path with the lower median whole epoch (step plus evaluation) over the epochs after the second.
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import torch_geometric
from torch_geometric.nn import GATConv, GCNConv, SAGEConv
from torch_geometric.utils import remove_self_loops, to_torch_csr_tensor, to_undirected

CACHE_MAGIC = b"HALOCSH\0"
CACHE_VERSION = 3


def read_cache(d, meta):
    """Halo's cache (graph-partition/src/dataset/cache.rs, format 3): magic, version (u32), header
    length (u64), the header and its hash (u64), then indptr (u64), indices (u32), features (f32,
    row-major) and class labels (u32). The sizes come from meta.json; None when anything differs."""
    path = os.path.join(d, "processed", "halo-cache-v2.bin")
    n, f = meta.get("num_nodes"), meta.get("num_features")
    if not os.path.isfile(path) or n is None or f is None or "multi" in meta.get("task", ""):
        return None
    with open(path, "rb") as fh:
        head = fh.read(20)
    if len(head) < 20 or head[:8] != CACHE_MAGIC or int.from_bytes(head[8:12], "little") != CACHE_VERSION:
        return None
    offset = 20 + int.from_bytes(head[12:20], "little") + 8
    indptr = np.fromfile(path, dtype="<u8", count=n + 1, offset=offset)
    if len(indptr) != n + 1:
        return None
    nnz = int(indptr[-1])
    offset += 8 * (n + 1)
    if os.path.getsize(path) != offset + 4 * nnz + 4 * n * f + 4 * n:
        return None
    indices = np.fromfile(path, dtype="<u4", count=nnz, offset=offset)
    x = np.fromfile(path, dtype="<f4", count=n * f, offset=offset + 4 * nnz).reshape(n, f)
    y = np.fromfile(path, dtype="<u4", count=n, offset=offset + 4 * nnz + 4 * n * f)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr).astype(np.int64))
    edge_index = torch.from_numpy(np.stack([rows, indices.astype(np.int64)]))
    return edge_index, torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def read_numbers(path, dtype):
    """Every number of a gzipped CSV, in order (numpy's C parser; no pandas needed)."""
    with gzip.open(path, "rt") as fh:
        return np.fromstring(fh.read().replace(",", " "), dtype=dtype, sep=" ")


def read_csv(d, meta):
    raw = os.path.join(d, "raw")
    y = read_numbers(os.path.join(raw, "node-label.csv.gz"), np.int64)
    n = len(y)
    x = read_numbers(os.path.join(raw, "node-feat.csv.gz"), np.float32).reshape(n, -1)
    edges = torch.from_numpy(read_numbers(os.path.join(raw, "edge.csv.gz"), np.int64).reshape(-1, 2).T.copy())
    edge_index, _ = remove_self_loops(to_undirected(edges, num_nodes=n))
    return edge_index, torch.from_numpy(x), torch.from_numpy(y)


def load(d, split):
    meta_path = os.path.join(d, "meta.json")
    meta = json.load(open(meta_path)) if os.path.isfile(meta_path) else {}
    if "multi" in meta.get("task", ""):
        sys.exit(f"{d}: multi-label datasets are not supported by this peer")
    graph, source = read_cache(d, meta), "halo cache"
    if graph is None:
        graph, source = read_csv(d, meta), "csv"
    if split is None:
        names = sorted(os.listdir(os.path.join(d, "split")))
        split = meta.get("split") if meta.get("split") in names else names[0] if len(names) == 1 else None
        if split is None:
            sys.exit(f"{d}/split holds {names}: choose one with --split")
    splits = [
        torch.from_numpy(read_numbers(os.path.join(d, "split", split, f"{part}.csv.gz"), np.int64))
        for part in ("train", "valid", "test")
    ]
    return graph, splits, source, meta.get("num_classes")


class Net(torch.nn.Module):
    def __init__(self, kind, fin, hidden, out, layers, heads, dropout):
        super().__init__()
        self.kind, self.dropout = kind, dropout
        self.convs = torch.nn.ModuleList()
        width = fin
        for i in range(layers):
            last = i == layers - 1
            dout = out if last else hidden
            if kind == "gcn":
                conv = GCNConv(width, dout, cached=True)
            elif kind == "sage":
                conv = SAGEConv(width, dout, aggr="mean")
            else:
                conv = GATConv(width, dout, heads=1 if last else heads, dropout=dropout)
            self.convs.append(conv)
            width = dout * (heads if kind == "gat" and not last else 1)

    def forward(self, x, adj):
        for i, conv in enumerate(self.convs):
            x = F.dropout(x, self.dropout, self.training)
            x = conv(x, adj)
            if i < len(self.convs) - 1:
                x = F.elu(x) if self.kind == "gat" else F.relu(x)
        return x


def after_second(values):
    """The epochs the summaries take: those after the second (all of them for a short run)."""
    return values[2:] if len(values) > 2 else values


def train(a, x, y, adj, splits, classes):
    torch.manual_seed(a.seed)
    model = Net(a.model, x.shape[1], a.hidden, classes, a.layers, a.heads, a.dropout).to(x.device)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    train_idx = splits[0]
    step_s, eval_s, losses = [], [], []
    cuda = x.device.type == "cuda"
    synchronize = torch.cuda.synchronize if cuda else lambda: None
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    for _ in range(a.epochs):
        synchronize()
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad(set_to_none=True)
        out = model(x, adj)
        loss = F.cross_entropy(out[train_idx], y[train_idx])
        loss.backward()
        opt.step()
        synchronize()
        t1 = time.perf_counter()
        model.eval()
        with torch.no_grad():
            correct = model(x, adj).argmax(1) == y
            accs = torch.stack([correct[idx].float().mean() for idx in splits]).tolist()
        synchronize()
        t2 = time.perf_counter()
        step_s.append(t1 - t0)
        eval_s.append(t2 - t1)
        losses.append(loss.item())
    epoch = [s + e for s, e in zip(step_s, eval_s)]
    return {
        "step_s": step_s,
        "eval_s": eval_s,
        "loss": losses,
        "train_acc": accs[0],
        "val_acc": accs[1],
        "test_acc": accs[2],
        "peak_gpu_bytes": torch.cuda.max_memory_allocated() if cuda else None,
        "epoch_median_s": statistics.median(after_second(epoch)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("--model", choices=["gcn", "sage", "gat"], default="gcn")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split")
    ap.add_argument("--paths", default="edge_index,csr")
    ap.add_argument("--device", default="cuda", help="a torch device (cpu: a check of the script without a GPU)")
    ap.add_argument("--out")
    a = ap.parse_args()
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device visible to torch")
    t0 = time.perf_counter()
    (edge_index, x, y), splits, source, classes = load(a.data, a.split)
    load_s = time.perf_counter() - t0
    n = x.shape[0]
    x, y, edge_index = x.to(device), y.to(device), edge_index.to(device)
    splits = [s.to(device) for s in splits]
    classes = classes or int(y.max()) + 1
    result = {
        "peer": "pyg-gpu",
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "dataset": os.path.abspath(a.data),
        "loaded_from": source,
        "load_s": round(load_s, 3),
        "nodes": n,
        "edges_directed": int(edge_index.shape[1]),
        "features": int(x.shape[1]),
        "classes": classes,
        **{k: getattr(a, k) for k in ("model", "layers", "hidden", "heads", "epochs", "lr", "weight_decay", "dropout")},
        "paths": {},
    }
    for path in a.paths.split(","):
        try:
            if path == "edge_index":
                adj = edge_index
            elif path == "csr":
                adj = to_torch_csr_tensor(edge_index, size=(n, n))
            else:
                sys.exit(f"--paths: unknown path `{path}` (edge_index, csr)")
            result["paths"][path] = train(a, x, y, adj, splits, classes)
        except Exception as e:  # one path failing (unsupported, out of memory) leaves the other
            result["paths"][path] = {"error": f"{type(e).__name__}: {e}"}
        adj = None
        if device.type == "cuda":
            torch.cuda.empty_cache()
    timed = {p: r for p, r in result["paths"].items() if "epoch_median_s" in r}
    result["faster"] = min(timed, key=lambda p: timed[p]["epoch_median_s"]) if timed else None
    line = json.dumps(result)
    print(line)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(line + "\n")
    if not timed:
        sys.exit("every adjacency path failed")


if __name__ == "__main__":
    main()
