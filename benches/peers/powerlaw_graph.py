#!/usr/bin/env python3
"""A power-law graph in the OGB raw layout, for the mini-batch peer comparison (dgl_vs_halo.py).

`halo datasets synth` draws Chung-Lu degrees too, but caps every weight at the structural
cut-off sqrt(nodes x degree) (about 1,400 at 100k vertices and degree 20). This draws the
uncapped sequence: vertex i gets the weight (i + 1)^(-1 / (gamma - 1)) (ids shuffled), and each
edge picks its two ends in proportion to their weights, so hubs of several thousand neighbours
make the sampled blocks wider (more input vertices per step). With probability --homophily an edge's second
end is drawn from the first end's class only. Labels are uniform over --classes; features are a
class mean (N(0, 1) per column, one per class) plus N(0, 1) noise. Duplicate edges and self loops
are dropped, so the stored mean degree comes out a little below --avg-degree. Split `random`:
60% train, 20% valid, 20% test.

    python3 benches/peers/powerlaw_graph.py --out /tmp/powerlaw100k \\
        --nodes 100000 --avg-degree 20 --features 128 --classes 16

Needs numpy (the DGL venv has it).
"""
import argparse, gzip, json, os

import numpy as np


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder (created; files there are replaced)")
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--avg-degree", type=float, default=20.0)
    ap.add_argument("--features", type=int, default=128)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--gamma", type=float, default=2.5, help="degree exponent (> 2)")
    ap.add_argument("--homophily", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.nodes < 2 or a.avg_degree <= 0 or a.features < 1 or a.classes < 1:
        ap.error("--nodes must be at least 2; --avg-degree, --features and --classes above 0")
    if a.gamma <= 2 or not 0 <= a.homophily <= 1:
        ap.error("--gamma must be above 2 and --homophily in [0, 1]")
    return a


def write_csv(path, rows, fmt):
    with gzip.open(path, "wt", compresslevel=1) as f:
        np.savetxt(f, rows, fmt=fmt, delimiter=",")


def main():
    a = parse()
    rng = np.random.default_rng(a.seed)
    n = a.nodes
    weight = (np.arange(n) + 1.0) ** (-1.0 / (a.gamma - 1.0))
    rng.shuffle(weight)  # hubs anywhere in the id range, as in real graphs
    prob = weight / weight.sum()
    labels = rng.integers(0, a.classes, n)
    edges = int(n * a.avg_degree / 2)
    src = rng.choice(n, edges, p=prob)
    dst = rng.choice(n, edges, p=prob)
    same = rng.random(edges) < a.homophily
    for c in range(a.classes):
        members = np.flatnonzero(labels == c)
        pick = np.flatnonzero(same & (labels[src] == c))
        if len(members) and len(pick):
            p = weight[members] / weight[members].sum()
            dst[pick] = members[rng.choice(len(members), len(pick), p=p)]
    u, v = np.minimum(src, dst), np.maximum(src, dst)
    keep = u != v
    pairs = np.unique(np.stack([u[keep], v[keep]], axis=1), axis=0)
    means = rng.standard_normal((a.classes, a.features)).astype(np.float32)
    feats = means[labels] + rng.standard_normal((n, a.features)).astype(np.float32)
    order = rng.permutation(n)
    train, valid = int(0.6 * n), int(0.8 * n)

    raw, split = os.path.join(a.out, "raw"), os.path.join(a.out, "split", "random")
    os.makedirs(raw, exist_ok=True)
    os.makedirs(split, exist_ok=True)
    write_csv(os.path.join(raw, "edge.csv.gz"), pairs, "%d")
    write_csv(os.path.join(raw, "node-feat.csv.gz"), feats, "%.6g")
    write_csv(os.path.join(raw, "node-label.csv.gz"), labels[:, None], "%d")
    write_csv(os.path.join(raw, "num-node-list.csv.gz"), np.array([[n]]), "%d")
    write_csv(os.path.join(raw, "num-edge-list.csv.gz"), np.array([[len(pairs)]]), "%d")
    for name, ids in [("train", order[:train]), ("valid", order[train:valid]), ("test", order[valid:])]:
        write_csv(os.path.join(split, name + ".csv.gz"), np.sort(ids)[:, None], "%d")
    degree = np.bincount(pairs.ravel(), minlength=n)
    meta = {
        "name": f"powerlaw-n{n}-d{a.avg_degree:g}-g{a.gamma:g}-s{a.seed}",
        "num_nodes": n,
        "num_edges_stored": int(len(pairs)),
        "edges": "undirected, each stored once (u <= v): add the reverse edge",
        "num_features": a.features,
        "num_classes": a.classes,
        "task": "single-label node classification",
        "split": "random",
        "layout": "OGB node-property-prediction raw layout (raw/*.csv.gz, split/<name>/*.csv.gz)",
        "source": "written by benches/peers/powerlaw_graph.py",
    }
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(f"{a.out}: {n} vertices, {len(pairs)} undirected edges, mean degree {2 * len(pairs) / n:.1f}, "
          f"max degree {degree.max()}, homophily {np.mean(labels[pairs[:, 0]] == labels[pairs[:, 1]]):.2f}")


if __name__ == "__main__":
    main()
