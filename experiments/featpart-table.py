#!/usr/bin/env python3
"""Tabulates featpart grids (`halo experiment experiments/featpart-*.toml --out results/<name>`).

    python3 experiments/featpart-table.py results/featpart-cora [results/featpart-synth ...]
    python3 experiments/featpart-table.py --targets 0.84,0.85 results/featpart-synth10k [...]

Per variant, means ± standard error over seeds, differences paired by seed with the baseline
(tau0): the accuracy the run ends at, fetch and all bytes per iteration, fetch/local
iterations, the tau medians over the first and last 10% of iterations, and the time to the
target (`final.method.time_to_target`, the paper's rule).

Time to target is given twice. `raw` is the run's modeled seconds: its measured compute plus
the modeled communication, so it carries the machine's load at the time. `norm` replaces
each iteration's measured compute by one figure for the whole grid (the median compute per
iteration over every run of the grid), which every variant does the same work for; what
remains differs only by modeled communication and by the epoch where the target is reached.
The trials of `auto` count as 3 forward-backward passes each (full and own-column gradients,
the secant's second full one) plus their modeled communication. Under `--bias-estimate
running-max` every fetch iteration does one more forward-backward (its own-column gradient):
norm counts it as one more iteration's compute, and the reference figure is taken over the
runs without it.

Each cell's summary line also gives the fetch-free ceiling: how much faster than tau = 0 an
iteration could be if every fetch were skipped at no cost in accuracy (normalised compute,
tau = 0's modeled communication less the fetches' share of its bytes). No tau can beat it.

Where runs decide tau (`auto`), a second table gives what eq. 20 read: eta and sigma_bias at
the first fetch and their medians over the fetches of the last 10% of iterations.
"""

import json
import statistics
import sys
from pathlib import Path


def mean_se(values):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    m = statistics.fmean(values)
    se = statistics.stdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0
    return f"{m:.3f} ± {se:.3f}" if abs(m) < 10 else f"{m:.1f} ± {se:.1f}"


def runs_of(grid):
    out = {}
    for path in sorted((grid / "runs").glob("*-seed*.json")):
        variant, seed = path.stem.rsplit("-seed", 1)
        report = json.loads(path.read_text())
        if "final" in report:
            out.setdefault(variant, {})[int(seed)] = report
    return out


def iterations(report):
    m = report["final"]["method"]
    return m["fetch_iterations"] + m["local_iterations"]


def compute_per_iteration(report):
    return sum(e["compute_s"] for e in report["epochs"]) / iterations(report)


def hit_epoch(report, target):
    """The epoch where `target` is reached by the paper's rule, as `featpart/target.rs` finds it:
    the first evaluation at or above the target that starts `target_window_epochs` evaluations
    of population variance below 1e-4."""
    accs = [e["test_acc"] for e in report["epochs"]]
    window = report["final"]["method"]["target_window_epochs"]
    for i in range(len(accs) - window + 1):
        span = accs[i : i + window]
        mean = statistics.fmean(span)
        if accs[i] >= target and sum((a - mean) ** 2 for a in span) / window < 1e-4:
            return report["epochs"][i]["epoch"]
    return None


def run_target_epoch(report):
    hit = report["final"]["method"].get("time_to_target")
    return hit["epoch"] if hit else None


def normalised_target_s(report, c_ref, with_trials=True, epoch=None):
    m = report["final"]["method"]
    epoch = run_target_epoch(report) if epoch is None else epoch
    if epoch is None:
        return None
    seconds = 0.0
    if with_trials and m.get("trials"):
        seconds += 3 * m["trials"]["iterations"] * c_ref + m["trials"]["modeled_comm_s"]
    second_pass = m.get("bias_estimate") == "running-max"
    for e in report["epochs"]:
        passes = e["method"]["steps"] + (e["method"]["fetch_iterations"] if second_pass else 0)
        seconds += passes * c_ref + e["modeled_comm_s"]
        if e["epoch"] == epoch:
            return seconds
    return None


def fetch_free_ceiling(report, c_ref):
    """The most any tau could gain per iteration over this tau = 0 run: its normalised iteration
    time over the same without the fetches' share of the modeled communication (taken in
    proportion to bytes), as if every fetch were skipped at no cost in accuracy."""
    m = report["final"]["method"]
    comm = sum(e["modeled_comm_s"] for e in report["epochs"]) / iterations(report)
    fetch_share = m["fetch_bytes_per_iteration"] / m["bytes_per_iteration"]
    return (c_ref + comm) / (c_ref + comm * (1 - fetch_share))


def reference_compute(runs):
    """The grid's one compute figure per iteration: the median over its runs (over those without
    the running maximum's second pass, where there are such)."""
    every = [r for v in runs.values() for r in v.values()]
    single = [r for r in every if r["final"]["method"].get("bias_estimate") != "running-max"]
    return statistics.median(compute_per_iteration(r) for r in single or every)


def targets_table(grid, targets):
    """Time to target at targets other than the grid's own: a sensitivity check of the verdict,
    not the verdict. Per target and variant: the seeds that reach it, and the paired normalised
    speed-up against tau0 with and without the trials' time."""
    runs = runs_of(grid)
    base = runs.get("tau0", {})
    c_ref = reference_compute(runs)
    for by_seed in runs.values():
        for report in by_seed.values():
            own = report["final"]["method"]["target_acc"]
            if hit_epoch(report, own) != run_target_epoch(report):
                sys.exit(f"{grid}: the rule here disagrees with the run's own time to target at {own}")
    print(f"#### {grid.name}: other targets (grid target {report['final']['method']['target_acc']})\n")
    print("| target | variant | reached (tau0) | speed-up vs tau0, norm (paired) | without trials |")
    print("|---|---|---|---|---|")
    for target in targets:
        for variant, by_seed in runs.items():
            if variant == "tau0":
                continue
            hits = {s: hit_epoch(r, target) for s, r in by_seed.items()}
            base_hits = {s: hit_epoch(base[s], target) for s in by_seed if s in base}
            both = [s for s in hits if hits[s] and base_hits.get(s)]
            def speed(with_trials):
                return mean_se(
                    normalised_target_s(base[s], c_ref, True, base_hits[s])
                    / normalised_target_s(by_seed[s], c_ref, with_trials, hits[s])
                    for s in both
                )
            reached = sum(1 for e in hits.values() if e)
            base_reached = sum(1 for e in base_hits.values() if e)
            print(f"| {target} | {variant} | {reached}/{len(hits)} ({base_reached}) | {speed(True)} ({len(both)}) "
                  f"| {speed(False)} |")
    print()


def table(grid):
    runs = runs_of(grid)
    base = runs.get("tau0", {})
    c_ref = reference_compute(runs)
    rows = []
    header = (
        "| variant | seeds | final test acc | diff vs tau0 (paired) | test acc at best val, diff | fetch MB/iter "
        "| all MB/iter | fetch / local iters | tau median first/last 10% (seeds last <= first) | reached target "
        "| s to target raw / norm | speedup vs tau0 raw / norm (paired, both reached) | compute/comm |"
    )
    rows.append(header)
    rows.append("|" + "---|" * (header.count("|") - 1))
    summary = {}
    for variant, by_seed in runs.items():
        seeds = sorted(by_seed)
        final = {s: by_seed[s]["epochs"][-1]["test_acc"] for s in seeds}
        at_best = {s: by_seed[s]["final"]["test_acc_at_best_val"] for s in seeds}
        diff = [final[s] - base[s]["epochs"][-1]["test_acc"] for s in seeds if s in base]
        diff_best = [at_best[s] - base[s]["final"]["test_acc_at_best_val"] for s in seeds if s in base]
        m = {s: by_seed[s]["final"]["method"] for s in seeds}
        fetch_mb = [m[s]["fetch_bytes_per_iteration"] / 1e6 for s in seeds]
        all_mb = [m[s]["bytes_per_iteration"] / 1e6 for s in seeds]
        fetches = statistics.fmean(m[s]["fetch_iterations"] for s in seeds)
        locals_ = statistics.fmean(m[s]["local_iterations"] for s in seeds)
        firsts = [m[s]["tau_median_first_10pct"] for s in seeds]
        lasts = [m[s]["tau_median_last_10pct"] for s in seeds]
        if None in firsts:
            medians = "-"
        else:
            down = sum(last <= first for first, last in zip(firsts, lasts))
            medians = f"{statistics.median(firsts)}/{statistics.median(lasts)} ({down}/{len(seeds)})"
        raw = {s: m[s]["time_to_target"]["modeled_s"] for s in seeds if m[s].get("time_to_target")}
        norm = {s: normalised_target_s(by_seed[s], c_ref) for s in raw}
        both = [s for s in raw if s in base and base[s]["final"]["method"].get("time_to_target")]
        speed_raw = [base[s]["final"]["method"]["time_to_target"]["modeled_s"] / raw[s] for s in both]
        speed_norm = [normalised_target_s(base[s], c_ref) / norm[s] for s in both]
        speed_bare = [normalised_target_s(base[s], c_ref) / normalised_target_s(by_seed[s], c_ref, False) for s in both]
        ratio = [m[s]["compute_to_comm"] for s in seeds]
        rows.append(
            f"| {variant} | {len(seeds)} | {mean_se(final.values())} | {mean_se(diff)} | {mean_se(diff_best)} "
            f"| {mean_se(fetch_mb)} | {mean_se(all_mb)} | {fetches:.0f} / {locals_:.0f} | {medians} "
            f"| {len(raw)}/{len(seeds)} | {mean_se(raw.values())} / {mean_se(norm.values())} "
            f"| {mean_se(speed_raw)} / {mean_se(speed_norm)} ({len(both)}) | {mean_se(ratio)} |"
        )
        summary[variant] = {
            "reached": len(raw),
            "speedup_norm": statistics.fmean(speed_norm) if speed_norm else None,
            "speedup_raw": statistics.fmean(speed_raw) if speed_raw else None,
            "speedup_bare": statistics.fmean(speed_bare) if speed_bare else None,
            "diff": statistics.fmean(diff) if diff else None,
        }
    if base:
        summary["tau0"]["ceiling"] = statistics.fmean(fetch_free_ceiling(r, c_ref) for r in base.values())
    print(f"### {grid.name}\n\nreference compute per iteration: {c_ref * 1e3:.1f} ms\n")
    print("\n".join(rows))
    print()
    inputs_table(runs)
    return summary


def inputs_table(runs):
    """eta and sigma_bias as eq. 20 read them: at the first fetch, and the median over the
    fetches of the last 10% of iterations (medians over seeds)."""
    rows = []
    for variant, by_seed in runs.items():
        first_eta, last_eta, first_bias, last_bias = [], [], [], []
        for report in by_seed.values():
            schedule = report["final"]["method"].get("tau_schedule") or []
            if not schedule or "eta" not in schedule[0]:
                continue
            late = [d for d in schedule if d["iteration"] >= iterations(report) * 0.9] or schedule[-1:]
            first_eta.append(schedule[0]["eta"])
            first_bias.append(schedule[0]["sigma_bias"])
            last_eta.append(statistics.median(d["eta"] for d in late))
            last_bias.append(statistics.median(d["sigma_bias"] for d in late))
        if first_eta:
            med = statistics.median
            rows.append(
                f"| {variant} | {len(first_eta)} | {med(first_eta):.4g} / {med(last_eta):.4g} "
                f"| {med(first_bias):.4g} / {med(last_bias):.4g} |"
            )
    if rows:
        print("| variant | seeds | eta first fetch / last 10% | sigma_bias first fetch / last 10% |")
        print("|---|---|---|---|")
        print("\n".join(rows))
        print()


def main():
    args = sys.argv[1:]
    if args[:1] == ["--targets"]:
        targets = [float(t) for t in args[1].split(",")]
        for arg in args[2:]:
            targets_table(Path(arg), targets)
        return
    cells = {Path(arg).name: table(Path(arg)) for arg in args}
    # Time to target over the cells: a variant is no slower than tau0 in a cell where it reaches
    # the target in at least as many seeds and its paired normalised speed-up is at least 1.
    variants = sorted({v for summary in cells.values() for v in summary if v.startswith("auto")})
    for variant in variants:
        verdicts = []
        for cell, summary in cells.items():
            if variant not in summary or "tau0" not in summary:
                continue
            v, b = summary[variant], summary["tau0"]
            speed = v["speedup_norm"]
            no_slower = v["reached"] >= b["reached"] and speed is not None and speed >= 1.0
            verdicts.append((cell, no_slower, speed, v["reached"], b["reached"], v["speedup_bare"]))
        if not verdicts:
            continue
        speeds = [v[2] for v in verdicts if v[2] is not None]
        bare = [v[5] for v in verdicts if v[5] is not None]
        print(f"{variant}: no slower than tau0 in {sum(v[1] for v in verdicts)}/{len(verdicts)} cells; "
              f"mean normalised speed-up over cells where both reached {statistics.fmean(speeds) if speeds else float('nan'):.3f}"
              f" (without the trials' time {statistics.fmean(bare) if bare else float('nan'):.3f})")
        for cell, ok, speed, reached, base_reached, speed_bare in verdicts:
            shown = f"{speed:.3f}" if speed is not None else "-"
            shown_bare = f"{speed_bare:.3f}" if speed_bare is not None else "-"
            ceiling = cells[cell]["tau0"]["ceiling"]
            print(f"  {cell}: {'no slower' if ok else 'slower'} (speed-up {shown}, without trials {shown_bare}, "
                  f"reached {reached} vs {base_reached}; fetch-free ceiling per iteration {ceiling:.3f})")


if __name__ == "__main__":
    main()
