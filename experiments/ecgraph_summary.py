#!/usr/bin/env python3
"""Tables of docs/methods/ecgraph.md from `halo experiment` outputs of the ecgraph-*.toml grids.

    python3 experiments/ecgraph_summary.py results/ecgraph-cora [results/ecgraph-cora-b4 ...]

Per variant, over its seeds (mean, and for accuracy the standard error and the paired difference
from the baseline of the same seed): test accuracy at the best validation epoch; forward bytes
(the `fwd/<l>` phases of `bytes_by_phase`, summed over epochs) over the baseline's; exchange bytes
over the baseline's; selector shares and the forward-width histogram (`final.method.controller`);
modeled time to the best validation accuracy (the sum of `modeled_epoch_s` up to the best epoch,
and its communication part, the sum of `modeled_comm_s`), and the baseline's communication share.
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
        "t_best": sum(e["modeled_epoch_s"] for e in upto),
        "comm_best": sum(e["modeled_comm_s"] for e in upto),
        "comm_share": sum(e["modeled_comm_s"] for e in epochs) / sum(e["modeled_epoch_s"] for e in epochs),
        "best_epoch": best,
        "shares": ctrl.get("selector_shares"),
        "bits": ctrl.get("fwd_bits_epochs"),
    }


def main(dirs):
    for d in map(Path, dirs):
        results = json.loads((d / "results.json").read_text())
        baseline = results["baseline"]
        runs = {}
        for r in results["runs"]:
            runs.setdefault(r["variant"], {})[r["seed"]] = run_figures(json.loads((d / r["report"]).read_text()))
        base = runs[baseline]
        print(f"## {results['experiment']} (baseline {baseline})\n")
        print("| variant | test acc | diff vs baseline | fwd bytes / baseline | exchange bytes / baseline "
              "| best epoch | modeled time to best val (s) | its comm part (s) | speedup | selector shares (c/p/a, layer 0) | fwd B epochs (layer 0) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        bt = mean_se([f["t_best"] for f in base.values()])[0]
        for name, seeds in runs.items():
            acc = mean_se([f["test"] * 100 for f in seeds.values()])
            diff = mean_se([(seeds[s]["test"] - base[s]["test"]) * 100 for s in seeds if s in base])
            fwd = mean_se([f["fwd"] for f in seeds.values()])[0] / mean_se([f["fwd"] for f in base.values()])[0]
            exch = mean_se([f["exchange"] for f in seeds.values()])[0] / mean_se(
                [f["exchange"] for f in base.values()])[0]
            t = mean_se([f["t_best"] for f in seeds.values()])[0]
            c = mean_se([f["comm_best"] for f in seeds.values()])[0]
            be = mean_se([f["best_epoch"] for f in seeds.values()])[0]
            first = next(iter(seeds.values()))
            shares = "-"
            if first["shares"]:
                tot = [0.0, 0.0, 0.0]
                for f in seeds.values():
                    s = f["shares"][0]
                    sel = s["compressed"] + s["predicted"] + s["average"]
                    for k, key in enumerate(["compressed", "predicted", "average"]):
                        tot[k] += s[key] / sel / len(seeds) if sel else 0.0
                shares = "/".join(f"{x:.2f}" for x in tot)
            bits = "-"
            if first["bits"]:
                hist = {}
                for f in seeds.values():
                    for b, n in f["bits"][0].items():
                        hist[int(b)] = hist.get(int(b), 0) + n
                bits = " ".join(f"{b}:{n}" for b, n in sorted(hist.items()))
            print(f"| {name} | {acc[0]:.2f} ± {acc[1]:.2f} | {diff[0]:+.2f} ± {diff[1]:.2f} | {fwd:.3f} | {exch:.3f} "
                  f"| {be:.0f} | {t:.3f} | {c:.4f} | {bt / t:.2f}x | {shares} | {bits} |")
        share = mean_se([f["comm_share"] for f in base.values()])[0]
        print(f"\nBaseline communication share of the modeled epoch: {share * 100:.1f}%\n")


if __name__ == "__main__":
    main(sys.argv[1:])
