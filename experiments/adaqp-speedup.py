#!/usr/bin/env python3
"""adaqp-speedup.py RESULTS_DIR [BASELINE]: modeled speedup of every variant of a `halo experiment`
grid against BASELINE (default vanilla), next to Amdahl's prediction, paired by seed.

Per run: T = final.modeled_train_s, M = final.modeled_comm_s_total (every collective the cost
model charges: the exchanges *and* the gradient all-reduce, which quantization leaves alone),
C = T - M (measured compute, codec time included). Vanilla's communication share is
s = M_v / T_v; the variant's communication ratio r = M_a / M_v; Amdahl predicts
1 / ((1 - s) + s r) if the variant computed exactly as long as vanilla, and the measured
speedup is T_v / T_a, so measured / predicted = T_v / (C_a + M_a) * ((1 - s) + s r), which
differs from 1 only through C_a / C_v. Two parts of that ratio are separated: the codec's own
time (`quant_s_per_worker`, encode and decode, summed over epochs: Q_a), giving Amdahl with the
codec, T_v / (C_v + Q_a + M_a); and the machine's load, estimated by each run's least-loaded
epoch (E epochs at the smallest `compute_s` plus the run's communication: `min-epoch`). Also:
the exchange byte ratio (`final.bytes_exchange`) and the assignment time against its period
(wall, and modeled), the largest over the run's assignments.
"""
import json
import pathlib
import statistics
import sys


def load(results, variant):
    runs = {}
    for path in sorted(pathlib.Path(results, "runs").glob(f"{variant}-seed*.json")):
        seed = path.stem[len(variant) + len("-seed"):]
        if seed.isdigit():
            runs[int(seed)] = json.loads(path.read_text())
    return runs


def mean(xs):
    return statistics.fmean(xs) if xs else float("nan")


def main():
    results = sys.argv[1]
    baseline = sys.argv[2] if len(sys.argv) > 2 else "vanilla"
    grid = json.loads(pathlib.Path(results, "results.json").read_text()) if pathlib.Path(results, "results.json").exists() else None
    names = sorted({p.stem.rsplit("-seed", 1)[0] for p in pathlib.Path(results, "runs").glob("*-seed*.json")})
    base = load(results, baseline)
    print(f"{'variant':<24} {'seeds':>5} {'s_v':>6} {'grad_b':>6} {'bytes_x':>7} {'r=M_a/M_v':>9} "
          f"{'C_a/C_v':>7} {'amdahl':>7} {'measured':>8} {'meas/amd':>8} {'amd+codec':>9} {'min-epoch':>9} "
          f"{'assign/period wall':>18} {'modeled':>8}")
    for name in names:
        runs = load(results, name)
        seeds = sorted(set(runs) & set(base))
        rows = []
        for k in seeds:
            v, a = base[k]["final"], runs[k]["final"]
            tv, mv, ta, ma = v["modeled_train_s"], v["modeled_comm_s_total"], a["modeled_train_s"], a["modeled_comm_s_total"]
            s, r = mv / tv, ma / mv
            amdahl = 1.0 / ((1.0 - s) + s * r)
            measured = tv / ta
            grad = v["bytes_grad_sync"] / (v["bytes_grad_sync"] + v["bytes_exchange"])
            bytes_x = a["bytes_exchange"] / v["bytes_exchange"]
            shares_wall, shares_modeled = [], []
            epochs = runs[k]["epochs"]
            period = runs[k]["config"]["method"]["adaqp"]["assign-period"]
            for i, e in enumerate(epochs):
                assignment = ((e.get("method") or {}).get("controller") or {}).get("assignment")
                if assignment:
                    window = epochs[max(0, i + 1 - period): i + 1]
                    shares_wall.append(assignment["time_s"] / sum(x["wall_s"] for x in window))
                    shares_modeled.append(assignment["time_s"] / sum(x["modeled_epoch_s"] for x in window))
            codec = sum(((e.get("method") or {}).get("controller") or {}).get("quant_s_per_worker", 0.0) for e in epochs)
            with_codec = tv / (tv - mv + codec + ma)

            def least_loaded(run, comm):
                return len(run["epochs"]) * min(e["compute_s"] for e in run["epochs"]) + comm

            min_epoch = least_loaded(base[k], mv) / least_loaded(runs[k], ma)
            rows.append((s, grad, bytes_x, r, (ta - ma) / (tv - mv), amdahl, measured, measured / amdahl, with_codec,
                         min_epoch, max(shares_wall, default=float("nan")), max(shares_modeled, default=float("nan"))))
        cols = list(zip(*rows)) if rows else [[]] * 12
        m = [mean(c) for c in cols]
        print(f"{name:<24} {len(seeds):>5} {m[0]:>6.3f} {m[1]:>6.3f} {m[2]:>7.3f} {m[3]:>9.3f} {m[4]:>7.3f} "
              f"{m[5]:>7.3f} {m[6]:>8.3f} {m[7]:>8.3f} {m[8]:>9.3f} {m[9]:>9.3f} {m[10]:>18.4f} {m[11]:>8.4f}")
    if grid is None:
        print("(no results.json yet: the grid has not finished)")


if __name__ == "__main__":
    main()
