#!/usr/bin/env python3
"""The summary of a GPU bundle run (`run` calls it): OUTDIR/summary.md and OUTDIR/summary.json
from what `run` left in OUTDIR (machine.txt, tests/, speed/, minibatch/, featpart/, adgraph/, methods/,
ab/, accuracy/, timeline.tsv).

usage: summary.py OUTDIR --bundle BUNDLE_DIR

Standard library only: it must work where torch is missing. Times are medians over the epochs
after the second; a ratio is Halo's time over PyG's (below 1: Halo is faster). Halo's per-phase
device timings (`epochs[].device`) and memory (`final.device`) are included where the report
has them.
"""
import argparse
import json
import os
import re
import statistics

# Issue 35's targets, as the largest Halo/PyG ratio allowed: (what, ratio key, models it covers).
TARGETS = [
    ("whole epoch <= 0.7x PyG", "epoch", 0.7, ("gcn", "sage", "gat")),
    ("step <= 0.5x PyG", "step", 0.5, ("gcn", "sage")),
    ("step <= 0.7x PyG", "step", 0.7, ("gat",)),
    ("evaluation <= 1.0x PyG", "eval", 1.0, ("gcn", "sage", "gat")),
]
RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored")
FAILED = re.compile(r"^test (\S+) \.\.\. FAILED")


def after_second(values):
    """The epochs the summary takes: those after the second (all of them for a short run)."""
    return values[2:] if len(values) > 2 else values


def median(values):
    values = after_second(values)
    return statistics.median(values) if values else None


def read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def read_json(path):
    text = read(path)
    if text is None:
        return None, f"{os.path.basename(path)} is missing"
    try:
        return json.loads(text), None
    except ValueError as e:
        return None, f"{os.path.basename(path)} is not JSON ({e})"


def test_results(out, bundle):
    rows = []
    listing = read(os.path.join(bundle, "tests.tsv")) or ""
    for line in listing.splitlines():
        if not line.strip():
            continue
        name, gpus = line.split("\t")
        log = read(os.path.join(out, "tests", f"{name}.log")) or ""
        exit_code = (read(os.path.join(out, "tests", f"{name}.exit")) or "").strip()
        row = {"name": name, "gpus": int(gpus), "exit": exit_code, "passed": 0, "failed": 0, "ignored": 0}
        results = [RESULT.match(l) for l in log.splitlines()]
        results = [m for m in results if m]
        for m in results:
            row["passed"] += int(m.group(1))
            row["failed"] += int(m.group(2))
            row["ignored"] += int(m.group(3))
        row["failed_tests"] = [m.group(1) for m in map(FAILED.match, log.splitlines()) if m]
        if exit_code == "skip":
            row["status"] = log.strip() or "skipped"
        elif not exit_code:
            row["status"] = "not run"
        elif exit_code == "124":
            row["status"] = "timed out"
        elif not results:
            row["status"] = f"no test result (exit {exit_code}): see tests/{name}.log"
        else:
            row["status"] = "ok" if exit_code == "0" and row["failed"] == 0 else "failed"
        rows.append(row)
    return rows


def numeric_medians(records):
    """Per key, the median of its numeric values over `records` (dicts, one per epoch) after the second."""
    keys = sorted({k for r in records for k, v in r.items() if isinstance(v, (int, float))})
    return {k: median([r[k] for r in records if isinstance(r.get(k), (int, float))]) for k in keys}


def halo_side(report):
    epochs = report.get("epochs") or []
    step = [e["wall_s"] for e in epochs]
    evaluation = [e["eval_s"] for e in epochs]
    side = {
        "step_s": median(step),
        "eval_s": median(evaluation),
        "epoch_s": median([s + e for s, e in zip(step, evaluation)]),
        "epochs": len(epochs),
        "val_acc": epochs[-1]["val_acc"] if epochs else None,
        "loss": epochs[-1]["loss"] if epochs else None,
    }
    devices = [e["device"] for e in epochs if isinstance(e.get("device"), dict)]
    if devices:
        side["device"] = numeric_medians(devices)
    final_device = (report.get("final") or {}).get("device")
    if isinstance(final_device, dict):
        side["final_device"] = final_device
    if report.get("incomplete"):
        side["incomplete"] = report.get("reason", True)
    return side


def pyg_side(result):
    path = result.get("faster")
    side = {"path": path, "paths": {}}
    for name, r in (result.get("paths") or {}).items():
        if "error" in r:
            side["paths"][name] = {"error": r["error"]}
            continue
        side["paths"][name] = {
            "step_s": median(r["step_s"]),
            "eval_s": median(r["eval_s"]),
            "epoch_s": median([s + e for s, e in zip(r["step_s"], r["eval_s"])]),
            "val_acc": r.get("val_acc"),
            "loss": r["loss"][-1] if r.get("loss") else None,
            "peak_gpu_bytes": r.get("peak_gpu_bytes"),
        }
    if path in side["paths"]:
        side.update(side["paths"][path])
    for key in ("torch", "torch_geometric", "loaded_from", "load_s"):
        side[key] = result.get(key)
    return side


def speed_rows(out):
    rows = []
    listing = read(os.path.join(out, "speed", "rows.tsv")) or ""
    for line in listing.splitlines():
        if not line.strip():
            continue
        row_id, graph, model = line.split("\t")
        row = {"id": row_id, "graph": graph, "model": model, "errors": []}
        for side, reader in (("halo", halo_side), ("pyg", pyg_side)):
            data, error = read_json(os.path.join(out, "speed", f"{row_id}.{side}.json"))
            if error:
                log = (read(os.path.join(out, "speed", f"{row_id}.{side}.log")) or "").strip().splitlines()
                last = f": {log[-1].strip()}" if log else ""
                row["errors"].append(f"{side}: {error} (speed/{row_id}.{side}.log ends{last or ' empty'})")
                continue
            try:
                row[side] = reader(data)
            except (KeyError, TypeError) as e:
                row["errors"].append(f"{side}: unexpected report ({type(e).__name__}: {e})")
        halo, pyg = row.get("halo", {}), row.get("pyg", {})
        row["ratio"] = {
            k: halo[f"{k}_s"] / pyg[f"{k}_s"]
            for k in ("step", "eval", "epoch")
            if halo.get(f"{k}_s") is not None and pyg.get(f"{k}_s")
        }
        kind = row_id.split("-")[-1]
        row["targets"] = {
            what: row["ratio"][key] <= limit
            for what, key, limit, models in TARGETS
            if kind in models and key in row["ratio"]
        }
        rows.append(row)
    return rows


# Issue 38's bar for the mini-batch row: the device epoch at most this many times the host's
# sampling time for it (sampling is the bound).
SAMPLING_BOUND = 1.2


def minibatch_rows(out):
    """Issue 38's mini-batch row: the device epoch (step phase, no evaluation) against the host's
    sampling time in the same epoch (the sampling threads' seconds over their number), and the
    GPU's idle share, medians of the epochs after the second."""
    data, error = read_json(os.path.join(out, "minibatch", "100k-sage-mb.halo.json"))
    if data is None:
        log = read(os.path.join(out, "minibatch", "100k-sage-mb.halo.log"))
        return [] if log is None else [{"id": "100k-sage-mb", "errors": [error]}]
    try:
        epochs = data.get("epochs") or []
        threads = (data.get("config") or {}).get("minibatch", {}).get("sampler-threads") or 1
        wall = [e["wall_s"] for e in epochs]
        sampling = [e["method"]["sampling_s"] / threads for e in epochs]
        idle = [e["device"]["idle_share"] for e in epochs if (e.get("device") or {}).get("idle_share") is not None]
        row = {
            "id": "100k-sage-mb",
            "epoch_s": median(wall),
            "sampling_s": median(sampling),
            "sampler_threads": threads,
            "idle_share": median(idle),
            "edges_per_step": median([e["method"]["sampled_edges_per_step"] for e in epochs]),
            "val_acc": epochs[-1]["val_acc"] if epochs else None,
            "errors": [],
        }
    except (KeyError, TypeError, ZeroDivisionError) as e:
        return [{"id": "100k-sage-mb", "errors": [f"unexpected report ({type(e).__name__}: {e})"]}]
    if row["epoch_s"] is not None and row["sampling_s"]:
        row["over_sampling"] = row["epoch_s"] / row["sampling_s"]
        row["met"] = row["over_sampling"] <= SAMPLING_BOUND
    return [row]


# Issue 38's bar: the modeled scaling efficiency at 8 workers, with device compute.
SCALING_BAR = 0.9


def adgraph_scaling(out):
    """The ADGraph runs of 1, 2, 4 and 8 workers as docs/methods/adgraph.md models them: a
    worker's step costs the one-worker run's compute per step, an epoch is the run's steps of
    it plus its modeled gradient all-reduce, and the efficiency is T1 / (K x TK). None where the
    runs were not asked for."""
    folder = os.path.join(out, "adgraph")
    if not os.path.isfile(os.path.join(folder, "adgraph-device.toml")):
        return None
    runs = {}
    for k in (1, 2, 4, 8):
        data, error = read_json(os.path.join(folder, "adgraph-device", "runs", f"w{k}-seed0.json"))
        if data is None:
            return {"rows": [], "errors": [f"w{k}: {error}"]}
        try:
            e = data["epochs"][0]
            runs[k] = (e["method"]["steps"], e["method"]["compute_s"], e["modeled_comm_s"])
        except (KeyError, IndexError, TypeError) as err:
            return {"rows": [], "errors": [f"w{k}: unexpected report ({type(err).__name__}: {err})"]}
    steps1, compute1, _ = runs[1]
    step_s = compute1 / steps1 if steps1 else 0.0
    t1 = step_s * steps1
    rows = []
    for k, (steps, _, comm) in runs.items():
        tk = step_s * steps + comm
        rows.append({"workers": k, "steps": steps, "step_s": step_s, "comm_s": comm, "epoch_s": tk,
                     "efficiency": t1 / (k * tk) if tk else None, "comm_share": comm / tk if tk else None})
    eight = rows[-1]["efficiency"]
    return {"rows": rows, "errors": [], "met": None if eight is None else eight >= SCALING_BAR}


# Issue 37's bars: each method's modeled epoch at most this share of vanilla's, on the same cut
# and the paper's topology (AdaQP against vanilla edge-cut, CDFGNN's cache plus 8 bits against
# vanilla vertex-cut, EC-Graph against vanilla edge-cut).
METHOD_BARS = {"adaqp": 0.5, "cdfgnn": 0.7, "ecgraph": 0.6}


def asked(folder, papers):
    """Whether `run` wrote a grid of one of `papers` into `folder` (the row was asked for)."""
    return any(os.path.isfile(os.path.join(folder, f"{paper}.toml")) for paper in papers)


def methods_device(out):
    """Issue 37's claims with GPU compute (the `methods-device` grids): per paper, vanilla's and
    the method's modeled epoch (the median of the epochs after the first), their ratio against
    the bar, and vanilla's communication share. None where the grids were not asked for."""
    folder = os.path.join(out, "methods")
    if not asked(folder, METHOD_BARS):
        return None
    rows = []
    for paper, bar in METHOD_BARS.items():
        row = {"paper": paper, "bar": bar, "errors": []}
        for variant in ("vanilla", paper):
            data, error = read_json(os.path.join(folder, paper, "runs", f"{variant}-seed0.json"))
            if data is None:
                row["errors"].append(f"{variant}: {error}")
                continue
            try:
                epochs = data["epochs"][1:] or data["epochs"]
                row[variant] = {
                    "modeled_epoch_s": statistics.median(e["modeled_epoch_s"] for e in epochs),
                    "modeled_comm_s": statistics.median(e["modeled_comm_s"] for e in epochs),
                    "compute_s": statistics.median(e["compute_s"] for e in epochs),
                    "wall_s": statistics.median(e["wall_s"] for e in epochs),
                    # What the exchange moved between the GPUs and the host (device-side
                    # encoding: encoded bytes), the evaluation's exact rows included.
                    "bus_bytes": statistics.median(
                        e["device"]["exchange"]["down_bytes"] + e["device"]["exchange"]["up_bytes"] for e in epochs
                    ),
                    "test_acc": data["final"]["test_acc_at_best_val"],
                    "compute_measure": data["final"].get("compute_measure"),
                }
            except (KeyError, TypeError, statistics.StatisticsError) as err:
                row["errors"].append(f"{variant}: unexpected report ({type(err).__name__}: {err})")
        # The same configuration on CPU workers (AdaQP's grid), for the wall clock on both.
        cpu, error = read_json(os.path.join(folder, paper, "runs", f"{paper}-cpu-seed0.json"))
        if cpu is not None:
            try:
                epochs = cpu["epochs"][1:] or cpu["epochs"]
                row["cpu"] = {
                    "wall_s": statistics.median(e["wall_s"] for e in epochs),
                    "eval_s": statistics.median(e["eval_s"] for e in epochs),
                }
            except (KeyError, TypeError, statistics.StatisticsError) as err:
                row["errors"].append(f"{paper}-cpu: unexpected report ({type(err).__name__}: {err})")
        elif os.path.isfile(os.path.join(folder, f"{paper}.toml")) and f'"{paper}-cpu"' in read(
            os.path.join(folder, f"{paper}.toml")
        ):
            row["errors"].append(f"{paper}-cpu: {error}")
        if not row["errors"]:
            vanilla, method = row["vanilla"], row[paper]
            row["comm_share"] = vanilla["modeled_comm_s"] / vanilla["modeled_epoch_s"] if vanilla["modeled_epoch_s"] else None
            row["ratio"] = method["modeled_epoch_s"] / vanilla["modeled_epoch_s"] if vanilla["modeled_epoch_s"] else None
            row["met"] = None if row["ratio"] is None else row["ratio"] <= bar
        rows.append(row)
    return rows


# The A/B's figures: (name, where in an epoch's record).
AB_FIGURES = [
    ("epoch wall_s", ("wall_s",)),
    ("eval_s", ("eval_s",)),
    ("compute_s", ("compute_s",)),
    ("exchange_s", ("device", "exchange_s")),
    ("modeled_epoch_s", ("modeled_epoch_s",)),
]


def ab_device(out):
    """The `ab-device` row: per configuration and figure, the base build's and this build's
    median over the epochs after the first of every round, and this build's over the base's.
    None where the row was not asked for; {"skipped": why} where the bundle had no base build."""
    folder = os.path.join(out, "ab")
    if not os.path.isdir(folder):
        return None
    skipped = read(os.path.join(folder, "skipped.txt"))
    if skipped is not None:
        return {"skipped": skipped.strip()}
    rows = []
    for config in ("vanilla", "adaqp"):
        sides, errors = {}, []
        for side in ("base", "new"):
            values = {name: [] for name, _ in AB_FIGURES}
            names = sorted(f for f in os.listdir(folder) if f.startswith(f"{side}-{config}-") and f.endswith(".json"))
            if not names:
                errors.append(f"{side}: no report")
            for name in names:
                data, error = read_json(os.path.join(folder, name))
                if data is None:
                    errors.append(f"{side}: {error}")
                    continue
                for epoch in data.get("epochs", [])[1:]:
                    for figure, path in AB_FIGURES:
                        value = epoch
                        for key in path:
                            value = value.get(key) if isinstance(value, dict) else None
                        if isinstance(value, (int, float)):
                            values[figure].append(value)
            sides[side] = {k: statistics.median(v) if v else None for k, v in values.items()}
        figures = []
        for figure, _ in AB_FIGURES:
            base, new = sides["base"][figure], sides["new"][figure]
            figures.append({"figure": figure, "base": base, "new": new, "ratio": new / base if base and new is not None else None})
        rows.append({"config": config, "figures": figures, "errors": errors})
    return {"rows": rows}


# Issue 37's accuracy bars on Cora (docs/methods/<paper>.md): the most test accuracy, in points,
# the method may lose against vanilla.
ACCURACY_BARS = {"adaqp": 0.5, "cdfgnn": 1.0, "ecgraph": 1.0}


def paired(runs, variant, baseline):
    """Mean and standard error (None for one seed) of `variant - baseline`'s test accuracy over
    the seeds both ran, in points, and the seeds. `halo experiment`'s own `test_acc_diff` pairs
    each variant with the grid's baseline only; the method against vanilla on the GPU pairs two
    other variants, so both comparisons are taken here, from the runs, the same way."""
    acc = {}
    for run in runs:
        if run.get("test_acc") is not None:
            acc.setdefault(run["variant"], {})[run["seed"]] = run["test_acc"]
    mine, theirs = acc.get(variant, {}), acc.get(baseline, {})
    seeds = sorted(set(mine) & set(theirs))
    diffs = [100 * (mine[s] - theirs[s]) for s in seeds]
    if not diffs:
        return None
    stderr = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else None
    return {"mean": statistics.mean(diffs), "stderr": stderr, "seeds": seeds}


def methods_accuracy(out):
    """Issue 37's accuracy bars with GPU compute (the `methods-cora-device` grids): per paper,
    the method on the GPU against its CPU run and against vanilla on the GPU, paired by seed.
    None where the grids were not asked for."""
    folder = os.path.join(out, "accuracy")
    if not asked(folder, ACCURACY_BARS):
        return None
    rows = []
    for paper, bar in ACCURACY_BARS.items():
        row = {"paper": paper, "bar": bar, "errors": []}
        data, error = read_json(os.path.join(folder, paper, "results.json"))
        if data is None:
            row["errors"].append(error)
            rows.append(row)
            continue
        runs = data.get("runs") or []
        row["device_vs_cpu"] = paired(runs, "cuda", "cpu")
        row["method_vs_vanilla"] = paired(runs, "cuda", "vanilla-cuda")
        for key in ("device_vs_cpu", "method_vs_vanilla"):
            if row[key] is None:
                row["errors"].append(f"{key}: no seed has both runs' test accuracy")
        if not row["errors"]:
            row["met"] = row["method_vs_vanilla"]["mean"] >= -bar
        rows.append(row)
    return rows


def featpart_table(out):
    """The featpart grids' table, "" where they ran without one, None where they were not run."""
    folder = os.path.join(out, "featpart")
    if not os.path.isdir(folder) or not any(n.endswith(".toml") for n in os.listdir(folder)):
        return None
    return read(os.path.join(folder, "table.md")) or ""


def ms(seconds):
    return "-" if seconds is None else f"{seconds * 1e3:.3g} ms"


def seconds(value):
    return "-" if value is None else f"{value:.3g} s"


def ratio(value):
    return "-" if value is None else f"{value:.2f}"


def mib(value):
    return "-" if not isinstance(value, (int, float)) else f"{value / 2**20:.0f} MiB"


def markdown(summary):
    lines = ["# Halo GPU bundle: summary", ""]
    lines.append(f"Bundle built from `{summary['bundle'].get('commit', 'unknown')}`.")
    lines += [""] + [f"- {line}" for line in summary["machine"]] + [""]
    lines += ["## GPU tests", "", "| binary | passed | failed | ignored | status |", "|---|---|---|---|---|"]
    for t in summary["tests"]:
        status = t["status"] + (f": {', '.join(t['failed_tests'])}" if t["failed_tests"] else "")
        lines.append(f"| {t['name']} | {t['passed']} | {t['failed']} | {t['ignored']} | {status} |")
    total = summary["tests_total"]
    lines += ["", f"Total: {total['passed']} passed, {total['failed']} failed; logs in `tests/`.", ""]
    lines += ["## Speed against PyG on the same GPU", ""]
    speed = summary["speed"]
    if speed["skipped"]:
        lines += [f"Skipped: {speed['skipped']}.", ""]
    else:
        lines += [
            "Medians of the epochs after the second; ratio = Halo / PyG (below 1: Halo is faster); PyG on "
            "whichever adjacency path had the faster whole epoch.",
            "",
            "| graph | model | Halo step | PyG step | ratio | Halo eval | PyG eval | ratio "
            "| Halo epoch | PyG epoch | ratio | PyG path | targets missed |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in speed["rows"]:
            h, p, q = r.get("halo", {}), r.get("pyg", {}), r["ratio"]
            missed = ", ".join(k for k, ok in r["targets"].items() if not ok) or ("none" if r["targets"] else "-")
            lines.append(
                f"| {r['graph']} | {r['model']} | {ms(h.get('step_s'))} | {ms(p.get('step_s'))} | {ratio(q.get('step'))} "
                f"| {ms(h.get('eval_s'))} | {ms(p.get('eval_s'))} | {ratio(q.get('eval'))} "
                f"| {ms(h.get('epoch_s'))} | {ms(p.get('epoch_s'))} | {ratio(q.get('epoch'))} "
                f"| {p.get('path') or '-'} | {missed} |"
            )
        lines += ["", "Both PyG paths, last-epoch validation accuracy of each side, and GPU memory:", ""]
        lines += ["| row | PyG edge_index epoch | PyG csr epoch | Halo val acc | PyG val acc | Halo peak GPU "
                  "| Halo estimate | PyG peak GPU |", "|---|---|---|---|---|---|---|---|"]
        for r in speed["rows"]:
            h, p = r.get("halo", {}), r.get("pyg", {})
            paths = p.get("paths", {})
            cells = [ms(paths[k].get("epoch_s")) if k in paths and "error" not in paths[k] else
                     ("failed" if k in paths else "-") for k in ("edge_index", "csr")]
            fd = h.get("final_device", {})
            acc = lambda v: "-" if v is None else f"{v:.3f}"
            lines.append(f"| {r['id']} | {cells[0]} | {cells[1]} | {acc(h.get('val_acc'))} | {acc(p.get('val_acc'))} "
                         f"| {mib(fd.get('peak_gpu_bytes'))} | {mib(fd.get('estimated_gpu_bytes'))} "
                         f"| {mib(p.get('peak_gpu_bytes'))} |")
        phased = [r for r in speed["rows"] if r.get("halo", {}).get("device")]
        if phased:
            keys = sorted({k for r in phased for k in r["halo"]["device"]})
            lines += ["", "Halo's device phases (medians of `epochs[].device`):", ""]
            lines += ["| row | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
            for r in phased:
                d = r["halo"]["device"]
                cells = [ms(d.get(k)) if k.endswith("_s") else str(d.get(k, "-")) for k in keys]
                lines.append(f"| {r['id']} | " + " | ".join(cells) + " |")
        errors = [f"- {r['id']}: {e}" for r in speed["rows"] for e in r["errors"]]
        errors += [f"- {r['id']}: Halo's report is incomplete: {r['halo']['incomplete']}" for r in speed["rows"]
                   if "incomplete" in r.get("halo", {})]
        errors += [f"- {r['id']}: PyG {name}: {v['error']}" for r in speed["rows"]
                   for name, v in r.get("pyg", {}).get("paths", {}).items() if "error" in v]
        if errors:
            lines += ["", "Problems:", ""] + errors
        lines.append("")
    if summary["minibatch"]:
        lines += ["## Mini-batch on the device (issue 38)", ""]
        lines += [
            f"GraphSAGE 3x256 on the 100k graph, fanouts 15,10,5, batch 1024; medians of the epochs after the "
            f"second. Bar: the epoch at most {SAMPLING_BOUND}x the host's sampling time (the sampling threads' "
            "seconds over their number). DGL's CPU epoch beside it: `benches/peers/dgl_vs_halo.py "
            "--halo-device cuda` where DGL is installed.",
            "",
            "| row | epoch | host sampling | threads | epoch / sampling | bar met | GPU idle share "
            "| sampled edges per step | val acc |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in summary["minibatch"]:
            if r["errors"]:
                lines.append(f"| {r['id']} | failed: {'; '.join(r['errors'])} | | | | | | | |")
                continue
            idle = "-" if r["idle_share"] is None else f"{r['idle_share']:.3f}"
            edges = "-" if r["edges_per_step"] is None else f"{r['edges_per_step']:.0f}"
            acc = "-" if r["val_acc"] is None else f"{r['val_acc']:.3f}"
            met = {True: "yes", False: "no"}.get(r.get("met"), "-")
            lines.append(f"| {r['id']} | {ms(r['epoch_s'])} | {ms(r['sampling_s'])} | {r['sampler_threads']} "
                         f"| {ratio(r.get('over_sampling'))} | {met} | {idle} | {edges} | {acc} |")
        lines.append("")
    scaling = summary["adgraph_scaling"]
    if scaling is not None:
        lines += ["## ADGraph's modeled scaling with device compute (issue 38)", ""]
        if scaling["errors"]:
            lines += [f"- {e}" for e in scaling["errors"]] + [""]
        else:
            lines += ["| workers | steps/epoch | step (1 worker) | modeled comm | modeled epoch | efficiency | comm share |",
                      "|---|---|---|---|---|---|---|"]
            for r in scaling["rows"]:
                pct = lambda v, d: "-" if v is None else f"{v:.{d}%}"
                lines.append(f"| {r['workers']} | {r['steps']} | {ms(r['step_s'])} | {ms(r['comm_s'])} "
                             f"| {r['epoch_s']:.3g} s | {pct(r['efficiency'], 1)} | {pct(r['comm_share'], 2)} |")
            met = {True: "met", False: "not met"}.get(scaling["met"], "-")
            lines += ["", f"Bar: efficiency at 8 workers at least {SCALING_BAR} (the paper: 0.91): {met}.", ""]
    methods = summary["methods"]
    if methods is not None:
        lines += [
            "## The methods with GPU compute (issue 37)",
            "",
            "8 workers on one GPU (serialized), GCN 2x128 on the 1M-vertex graph, each paper's topology at its real "
            "bandwidth, 3 epochs, seed 0; modeled epochs are medians of the epochs after the first. Accuracy "
            "bars need the method docs' longer grids.",
            "",
            "| paper | vanilla modeled epoch | vanilla comm share | method modeled epoch | method / vanilla "
            "| bar | met | vanilla compute | method compute | wall epoch, vanilla / method "
            "| exchange bus bytes per epoch, vanilla / method |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in methods:
            if r["errors"]:
                lines.append(f"| {r['paper']} | failed: {'; '.join(r['errors'])} | | | | | | | | | |")
                continue
            v, m = r["vanilla"], r[r["paper"]]
            share = "-" if r["comm_share"] is None else f"{r['comm_share']:.1%}"
            met = {True: "yes", False: "no"}.get(r["met"], "-")
            lines.append(f"| {r['paper']} | {ms(v['modeled_epoch_s'])} | {share} | {ms(m['modeled_epoch_s'])} "
                         f"| {ratio(r['ratio'])} | {r['bar']} | {met} | {ms(v['compute_s'])} | {ms(m['compute_s'])} "
                         f"| {seconds(v['wall_s'])} / {seconds(m['wall_s'])} | {mib(v['bus_bytes'])} / {mib(m['bus_bytes'])} |")
        for r in methods:
            if not r["errors"] and "cpu" in r:
                gpu, cpu = r[r["paper"]], r["cpu"]
                share = "-" if not cpu["wall_s"] else f"{gpu['wall_s'] / cpu['wall_s']:.2f}"
                lines += ["", f"Wall clock of {r['paper']}'s configuration, GPU workers against CPU workers on this "
                          f"machine's cores (epoch medians after the first): {seconds(gpu['wall_s'])} against "
                          f"{seconds(cpu['wall_s'])}, GPU / CPU {share}; the CPU workers' evaluation "
                          f"{seconds(cpu['eval_s'])}."]
        lines.append("")
    ab = summary["ab"]
    if ab is not None:
        base = (summary["bundle"] or {}).get("base") or "none"
        lines += ["## A/B against the base build", ""]
        if "skipped" in ab:
            lines += [f"Skipped: {ab['skipped']}.", ""]
        else:
            lines += [
                f"Base build `{str(base)[:12]}` against this one, alternating, two rounds each: methods-device's "
                "configurations on the 1M graph (8 workers, AdaQP's partition and topology), medians of the epochs "
                "after the first.",
                "",
                "| configuration | figure | base | this build | this / base |",
                "|---|---|---|---|---|",
            ]
            for r in ab["rows"]:
                if r["errors"]:
                    lines.append(f"| {r['config']} | failed: {'; '.join(r['errors'])} | | | |")
                for f in r["figures"]:
                    lines.append(f"| {r['config']} | {f['figure']} | {seconds(f['base'])} | {seconds(f['new'])} "
                                 f"| {ratio(f['ratio'])} |")
            lines.append("")
    accuracy = summary["accuracy"]
    if accuracy is not None:
        lines += [
            "## The methods' accuracy with GPU compute (issue 37)",
            "",
            "Cora, each paper's Cora grid (docs/methods), seeds 0-4: the method on the GPU against its CPU run "
            "and against vanilla on the GPU, test accuracy at the best validation epoch, paired by seed, in points.",
            "",
            "| paper | GPU - CPU | GPU method - GPU vanilla | bar (loss at most) | met |",
            "|---|---|---|---|---|",
        ]
        points = lambda d: "-" if d is None else (
            f"{d['mean']:+.2f}" + ("" if d["stderr"] is None else f" ± {d['stderr']:.2f}"))
        for r in accuracy:
            if r["errors"]:
                lines.append(f"| {r['paper']} | failed: {'; '.join(r['errors'])} | | | |")
                continue
            met = {True: "yes", False: "no"}.get(r["met"], "-")
            lines.append(f"| {r['paper']} | {points(r['device_vs_cpu'])} | {points(r['method_vs_vanilla'])} "
                         f"| {r['bar']} | {met} |")
        lines.append("")
    featpart = summary["featpart"]
    if featpart is not None:
        lines += ["## Featpart with device compute (issue 38)", ""]
        lines += [featpart.strip() or "No table: see `featpart/` (the grids' logs and table.log).", ""]
    if summary["timeline"]:
        lines += ["## Timeline", "", "| step | seconds | exit |", "|---|---|---|"]
        lines += [f"| {t['step']} | {t['seconds']} | {t['exit']} |" for t in summary["timeline"]]
        lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--bundle", required=True)
    a = ap.parse_args()
    bundle, _ = read_json(os.path.join(a.bundle, "bundle.json"))
    tests = test_results(a.out, a.bundle)
    skipped = (read(os.path.join(a.out, "speed", "skipped.txt")) or "").strip()
    rows = speed_rows(a.out)
    if not rows and not skipped:
        skipped = "no rows were run (HALO_BUNDLE_ROWS=none)"
    timeline = []
    for line in (read(os.path.join(a.out, "timeline.tsv")) or "").splitlines()[1:]:
        step, seconds, exit_code = line.split("\t")
        timeline.append({"step": step, "seconds": float(seconds), "exit": int(exit_code)})
    machine = (read(os.path.join(a.out, "machine.txt")) or "").splitlines()
    summary = {
        "bundle": bundle or {},
        "gpus": [line.split(": ", 1)[1] for line in machine if line.startswith("gpu: ")],
        "machine": machine,
        "tests": tests,
        "tests_total": {k: sum(t[k] for t in tests) for k in ("passed", "failed", "ignored")},
        "speed": {"skipped": skipped or None, "epochs": "medians of the epochs after the second", "rows": rows},
        "minibatch": minibatch_rows(a.out),
        # experiments/featpart-table.py's markdown, where the featpart grids ran (None: not asked).
        "featpart": featpart_table(a.out),
        "adgraph_scaling": adgraph_scaling(a.out),
        "methods": methods_device(a.out),
        "ab": ab_device(a.out),
        "accuracy": methods_accuracy(a.out),
        "timeline": timeline,
    }
    with open(os.path.join(a.out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
        fh.write("\n")
    with open(os.path.join(a.out, "summary.md"), "w") as fh:
        fh.write(markdown(summary))


if __name__ == "__main__":
    main()
