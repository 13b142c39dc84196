#!/usr/bin/env python3
"""Tables of docs/methods/ecgraph.md from `halo experiment` outputs of the ecgraph-*.toml grids.

    python3 experiments/ecgraph_summary.py results/ecgraph-cora [results/ecgraph-cora-b4 ...]

Per variant (against the grid's baseline, or for `<x>-bw<s>` the baseline run at the same
bandwidth scale), over its finished seeds (mean, and for accuracy the standard error and the paired difference
from the baseline of the same seed): test accuracy at the best validation epoch; forward bytes
(the `fwd/<l>` phases of `bytes_by_phase`, summed over epochs) over the baseline's; exchange bytes
over the baseline's; selector shares and the forward-width histogram (`final.method.controller`);
modeled communication to the best validation epoch (the sum of `modeled_comm_s` up to it) and
modeled time to it: that communication and the halo feature cache's fetch at setup, plus the best epoch times one compute time per epoch for
every variant, the baseline's median measured compute (`modeled_epoch_s - modeled_comm_s`), since
the measured compute of each run on a shared, loaded machine is noise; and the baseline's
communication share of that modeled epoch. Then per epoch: exchange bytes, modeled
communication, the modeled epoch (the baseline's median compute plus that communication), the
variant's own median measured compute, and the halo feature cache's one fetch at setup
(`final.method.halo_cache`) where it ran.
"""
import json
import math
import sys
from pathlib import Path


def mean_se(xs):
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, float("nan")
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return m, math.sqrt(var / len(xs))


def run_figures(report):
    epochs = report["epochs"]
    fin = report["final"]
    best = fin["best_epoch"]
    upto = [e for e in epochs if e["epoch"] <= best]
    fwd = sum(b for e in epochs for p, b in e["bytes_by_phase"].items() if p.startswith("fwd/"))
    ctrl = (fin.get("method") or {}).get("controller") or {}
    return {
        "test": fin["test_acc_at_best_val"],
        "fwd": fwd,
        "exchange": fin["bytes_exchange"],
        "comm_best": sum(e["modeled_comm_s"] for e in upto),
        "comm_epoch": sum(e["modeled_comm_s"] for e in epochs) / len(epochs),
        "compute": sorted(e["modeled_epoch_s"] - e["modeled_comm_s"] for e in epochs),
        "best_epoch": best,
        "exchange_epoch": fin["bytes_exchange"] / len(epochs),
        "halo_cache": (fin.get("method") or {}).get("halo_cache"),
        "fetch_s": ((fin.get("method") or {}).get("halo_cache") or {}).get("modeled_s", 0.0),
        "shares": ctrl.get("selector_shares"),
        "bits": ctrl.get("fwd_bits_epochs"),
    }


def main(dirs):
    for d in map(Path, dirs):
        # The finished runs (a grid still running is summarised as far as it got).
        # The grid's baseline; a variant named `<x>-bw<s>` is compared with `<baseline>-bw<s>`
        # (the same scaled bandwidth) when the grid has one.
        baseline, runs = json.loads((d / "results.json").read_text())["baseline"], {}
        for path in sorted((d / "runs").glob("*-seed*.json")):
            variant, seed = path.stem.rsplit("-seed", 1)
            runs.setdefault(variant, {})[int(seed)] = run_figures(json.loads(path.read_text()))
        base = runs[baseline]

        def base_of(name):
            suffix = name[name.index("-bw"):] if "-bw" in name else ""
            return runs.get(baseline + suffix, base)

        print(f"## {d.name} (baseline {baseline}; seeds per variant: "
              f"{', '.join(f'{v} {len(s)}' for v, s in runs.items())})\n")
        print("| variant | test acc | diff vs baseline | fwd bytes / baseline | exchange bytes / baseline "
              "| best epoch | modeled comm to best val (s) | modeled time to best val, with the setup fetch (s) | speedup "
              "| selector shares (c/p/a, first exchanging layer) | fwd B epochs (that layer) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        computes = sorted(c for f in base.values() for c in f["compute"])
        compute = computes[len(computes) // 2]
        def t_best(f):
            return f["best_epoch"] * compute + f["comm_best"] + f["fetch_s"]
        for name, seeds in runs.items():
            own_base = base_of(name)
            bt = mean_se([t_best(f) for f in own_base.values()])[0]
            acc = mean_se([f["test"] * 100 for f in seeds.values()])
            diff = mean_se([(seeds[s]["test"] - own_base[s]["test"]) * 100 for s in seeds if s in own_base])
            fwd = mean_se([f["fwd"] for f in seeds.values()])[0] / mean_se([f["fwd"] for f in own_base.values()])[0]
            exch = mean_se([f["exchange"] for f in seeds.values()])[0] / mean_se(
                [f["exchange"] for f in own_base.values()])[0]
            t = mean_se([t_best(f) for f in seeds.values()])[0]
            c = mean_se([f["comm_best"] for f in seeds.values()])[0]
            be = mean_se([f["best_epoch"] for f in seeds.values()])[0]
            first = next(iter(seeds.values()))
            # The first layer that exchanges (layer 1 under the halo feature cache).
            layer = next((i for i, s in enumerate(first["shares"] or [])
                          if s["compressed"] + s["predicted"] + s["average"] > 0), 0)
            shares = "-"
            if first["shares"]:
                tot = [0.0, 0.0, 0.0]
                for f in seeds.values():
                    s = f["shares"][layer]
                    sel = s["compressed"] + s["predicted"] + s["average"]
                    for k, key in enumerate(["compressed", "predicted", "average"]):
                        tot[k] += s[key] / sel / len(seeds) if sel else 0.0
                shares = "/".join(f"{x:.2f}" for x in tot)
            # Without ReqEC-FP the width never changes (its flags give it).
            bits = "-"
            if first["bits"] and shares != "-" and any(float(x) > 0 for x in shares.split("/")):
                hist = {}
                for f in seeds.values():
                    for b, n in f["bits"][layer].items():
                        hist[int(b)] = hist.get(int(b), 0) + n
                bits = " ".join(f"{b}:{n}" for b, n in sorted(hist.items()))
            print(f"| {name} | {acc[0]:.2f} ± {acc[1]:.2f} | {diff[0]:+.2f} ± {diff[1]:.2f} | {fwd:.3f} | {exch:.3f} "
                  f"| {be:.0f} | {c:.4f} | {t:.3f} | {bt / t:.2f}x | {shares} | {bits} |")
        # Per epoch, and the halo feature cache's one fetch at setup (`final.method.halo_cache`).
        # The cache changes the compute too (layer 0 transforms its halo rows), so each variant's
        # own median measured compute is shown next to the baseline's.
        print("\n| variant | exchange bytes per epoch | / baseline | modeled comm per epoch (ms) | modeled epoch (ms) "
              "| own median compute (ms) | halo cache fetch (bytes) | its modeled time (ms) |")
        print("|---|---|---|---|---|---|---|---|")
        base_epoch = mean_se([f["exchange_epoch"] for f in base.values()])[0]
        for name, seeds in runs.items():
            per_epoch = mean_se([f["exchange_epoch"] for f in seeds.values()])[0]
            comm_epoch = mean_se([f["comm_epoch"] for f in seeds.values()])[0]
            fetch = next(iter(seeds.values()))["halo_cache"]
            fetched = f"{fetch['bytes']:,} | {fetch['modeled_s'] * 1e3:.2f}" if fetch else "- | -"
            own = sorted(c for f in seeds.values() for c in f["compute"])
            print(f"| {name} | {per_epoch:,.0f} | {per_epoch / base_epoch:.3f} | {comm_epoch * 1e3:.3f} "
                  f"| {(compute + comm_epoch) * 1e3:.2f} | {own[len(own) // 2] * 1e3:.2f} | {fetched} |")
        for name in [n for n in runs if n == baseline or n.startswith(baseline + "-bw")]:
            comm = mean_se([f["comm_epoch"] for f in runs[name].values()])[0]
            print(f"\nCompute per epoch (baseline median): {compute * 1e3:.1f} ms; {name}'s modeled communication "
                  f"per epoch: {comm * 1e3:.2f} ms, {comm / (comm + compute) * 100:.1f}% of its modeled epoch")
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
