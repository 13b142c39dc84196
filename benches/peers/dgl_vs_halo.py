#!/usr/bin/env python3
"""Mini-batch GraphSAGE, DGL 2.1 against Halo, on one graph in one sitting.

Makes a synthetic graph with `halo datasets synth` (or takes a dataset in the OGB raw layout),
then runs the DGL peer (../shared/peers/dgl_minibatch.py) and `halo train` on it alternately,
ROUNDS times each (DGL first in odd rounds, Halo first in even ones), so both see the same
machine and the same load. Prints, per run, the epoch times, the median epoch, the sampled
edges per step (so a difference in batch shape shows) and the load average before the run;
then per side the min/median/max of the median epochs and the ratio Halo / DGL of the medians.

Both sides train 3-layer GraphSAGE-mean, hidden 256, fanouts 15,10,5, batch 1024, Adam lr 0.003,
no weight decay, dropout 0.5 after each hidden layer and none on the input features (as the DGL
peer's model) on split `random` by default; an epoch is sampling plus training
(DGL samples inside its loop, Halo's `wall_s` includes waiting for its sampler), no evaluation.

Set-up of DGL: the header of ../shared/peers/dgl_minibatch.py (a venv; pass its interpreter
with --python).

    python3 benches/peers/dgl_vs_halo.py --python /tmp/dgl/bin/python --halo target/release/halo \
        --out /tmp/peers --synth "--nodes 100000 --avg-degree 20 --features 128 --classes 16"
    python3 benches/peers/dgl_vs_halo.py --python /tmp/dgl/bin/python --data DIR --out /tmp/peers

The power-law graph of docs/BENCHMARKS.md comes from powerlaw_graph.py beside this script
(`--out DIR`, then `--data DIR` here).

--cpus 0,1 pins both sides (and the graph generation) to those cores, so a machine with more
cores than the one being modelled gives both the same number of threads.

--halo-device cuda trains Halo's side on GPU 0 (a build with `--features cuda`) against DGL's
CPU epoch, issue 38's speed check: per Halo run it also prints the host's sampling time per
epoch (the sampling threads' time over their number: the epoch's floor when sampling is the
bound), the epoch over it, and the GPU's idle share of the steps.

    python3 benches/peers/dgl_vs_halo.py --python /tmp/dgl/bin/python --halo target/release/halo \
        --halo-device cuda --out /tmp/peers-gpu --synth "--nodes 100000 --avg-degree 20 --features 128 --classes 16"
"""
import argparse, json, math, os, shlex, statistics, subprocess, sys

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "peers", "dgl_minibatch.py")


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    graph = ap.add_mutually_exclusive_group(required=True)
    graph.add_argument("--data", help="a dataset directory in the OGB raw layout")
    graph.add_argument("--synth", help="arguments of `halo datasets synth` (without --out); the graph goes to OUT/graph")
    ap.add_argument("--out", required=True, help="folder for the graph, the reports and the logs")
    ap.add_argument("--python", default="python3", help="the interpreter of the DGL venv")
    ap.add_argument("--halo", default="target/release/halo")
    ap.add_argument("--peer", default=PEER, help="the DGL peer script")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--split", default="random")
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--cpus", help="comma-separated cores to pin every run to, e.g. 0,1")
    ap.add_argument("--halo-device", default="cpu", help="where Halo trains: cpu, or cuda[:N]")
    ap.add_argument("--sampler-threads", type=int, help="Halo's sampling threads [default: its own, the cores]")
    a = ap.parse_args()
    if a.rounds < 1 or a.epochs < 1:
        ap.error("--rounds and --epochs must be at least 1")
    return a


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(cmd, log):
    """Runs cmd with its output in log; exits naming the log when it fails."""
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        with open(log) as f:
            tail = f.read().splitlines()[-15:]
        sys.exit(f"{shlex.join(cmd)} failed ({rc}); log {log}:\n" + "\n".join(tail))


def train_rows(data, split):
    """Training vertices of the split (one id a line, gzipped), for DGL's steps per epoch."""
    import gzip
    with gzip.open(os.path.join(data, "split", split, "train.csv.gz"), "rt") as f:
        return sum(1 for line in f if line.strip())


def dgl_run(a, data, stem, steps):
    log = stem + ".log"
    cmd = [a.python, a.peer, data, "--split", a.split, "--fanouts", a.fanouts, "--hidden", str(a.hidden),
           "--batch-size", str(a.batch_size), "--epochs", str(a.epochs), "--lr", str(a.lr), "--dropout", str(a.dropout)]
    run(cmd, log)
    with open(log) as f:
        lines = [l for l in f.read().splitlines() if l.startswith("{")]
    if not lines:
        sys.exit(f"the DGL peer printed no JSON line; log {log}")
    r = json.loads(lines[-1])
    # The peer reports one sampling-only epoch as a rate; edges per step follow from it.
    edges = r["sampled_edges_per_s"] * r["sample_epoch_s"] / steps
    return {"epochs": r["epoch_times_s"], "median": r["epoch_median_s"], "edges_per_step": edges, "vertices_per_step": None}


def halo_run(a, data, stem):
    report = stem + ".json"
    cmd = [a.halo, "train", "--dataset", data, "--split", a.split, "--model", "sage", "--layers",
           str(len(a.fanouts.split(","))), "--hidden", str(a.hidden), "--fanouts", a.fanouts, "--batch-size",
           str(a.batch_size), "--lr", str(a.lr), "--weight-decay", "0", "--dropout", str(a.dropout), "--input-dropout", "0", "--epochs",
           str(a.epochs), "--device", a.halo_device, "--report", report]
    if a.sampler_threads:
        cmd += ["--sampler-threads", str(a.sampler_threads)]
    run(cmd, stem + ".log")
    with open(report) as f:
        r = json.load(f)
    walls = [e["wall_s"] for e in r["epochs"]]
    method = [e.get("method") or {} for e in r["epochs"]]
    mean = lambda key: statistics.mean(m.get(key, float("nan")) for m in method)
    threads = a.sampler_threads or len(os.sched_getaffinity(0))
    devices = [e.get("device") or {} for e in r["epochs"]]
    idle = [d["idle_share"] for d in devices if d.get("idle_share") is not None]
    return {"epochs": walls, "median": statistics.median(walls), "edges_per_step": mean("sampled_edges_per_step"),
            "vertices_per_step": mean("sampled_vertices_per_step"),
            "sampling_wall": statistics.median(m.get("sampling_s", float("nan")) / threads for m in method),
            "idle": statistics.median(idle) if idle else None}


def spread(values):
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def main():
    a = parse()
    if a.cpus:
        os.sched_setaffinity(0, {int(c) for c in a.cpus.split(",")})
    os.makedirs(a.out, exist_ok=True)
    data = a.data
    if a.synth:
        data = os.path.join(a.out, "graph")
        run([a.halo, "datasets", "synth", *shlex.split(a.synth), "--out", data], os.path.join(a.out, "synth.log"))
    steps = math.ceil(train_rows(data, a.split) / a.batch_size)
    print(f"graph {data}: {steps} steps of {a.batch_size} per epoch; cores {sorted(os.sched_getaffinity(0))}")
    sides = {"dgl": [], "halo": []}
    for round_ in range(1, a.rounds + 1):
        order = ["dgl", "halo"] if round_ % 2 == 1 else ["halo", "dgl"]
        for side in order:
            load = load_average()
            stem = os.path.join(a.out, f"{side}_{round_}")
            r = dgl_run(a, data, stem, steps) if side == "dgl" else halo_run(a, data, stem)
            sides[side].append(r)
            vertices = "" if r["vertices_per_step"] is None else f", {r['vertices_per_step']:.0f} input vertices"
            print(f"round {round_} {side:<4} load {load}: epochs {', '.join(f'{t:.2f}' for t in r['epochs'])} s, "
                  f"median {r['median']:.2f} s; {r['edges_per_step']:.0f} sampled edges per step{vertices}", flush=True)
            if side == "halo" and a.halo_device != "cpu":
                idle = "n/a" if r["idle"] is None else f"{r['idle']:.3f}"
                print(f"    on {a.halo_device}: host sampling {r['sampling_wall']:.2f} s per epoch, epoch / sampling "
                      f"{r['median'] / r['sampling_wall']:.2f} (bar: 1.2), GPU idle share {idle}", flush=True)
    dgl = [r["median"] for r in sides["dgl"]]
    halo = [r["median"] for r in sides["halo"]]
    print(f"median epoch, min / median / max over rounds: DGL {spread(dgl)} s, Halo {spread(halo)} s")
    print(f"Halo / DGL: {statistics.median(halo) / statistics.median(dgl):.2f}x "
          f"(per round: {', '.join(f'{h / d:.2f}' for h, d in zip(halo, dgl))})")
    if a.halo_device != "cpu":
        print(f"DGL's CPU epoch / Halo's {a.halo_device} epoch: {statistics.median(dgl) / statistics.median(halo):.1f}x (bar: 20)")


if __name__ == "__main__":
    main()
