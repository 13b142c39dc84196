"""Ctrl-C during training: KeyboardInterrupt within one epoch, the report kept, incomplete."""

import json
import os
import signal
import subprocess
import sys
import time

from conftest import CORA

SCRIPT = """
import json, sys, time, halo
ds = halo.Dataset.open(sys.argv[1])
def on_epoch(record):
    print(json.dumps({"epoch": record["epoch"], "at": time.monotonic()}), flush=True)
try:
    halo.train(ds, epochs=100000, hidden=128, report=sys.argv[2], on_epoch=on_epoch, progress=False)
except KeyboardInterrupt as e:
    print(json.dumps({"interrupted": len(e.run.history), "complete": e.run.complete}), flush=True)
    sys.exit(0)
sys.exit(3)
"""


def test_sigint_raises_keyboard_interrupt_within_an_epoch_and_keeps_the_report(tmp_path):
    report = tmp_path / "report.json"
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(CORA), str(report)], stdout=subprocess.PIPE, text=True
    )
    lines = []
    for line in child.stdout:
        lines.append(json.loads(line))
        if lines[-1]["epoch"] == 5:
            break
    sent = time.monotonic()
    os.kill(child.pid, signal.SIGINT)
    rest, _ = child.communicate(timeout=60)
    assert child.returncode == 0, rest
    records = lines + [json.loads(line) for line in rest.splitlines()]
    epochs = [r for r in records if "epoch" in r]
    outcome = records[-1]
    # The epoch that notices the signal may end before its callback prints it.
    assert outcome["complete"] is False and outcome["interrupted"] in (len(epochs), len(epochs) + 1)
    after = [r for r in epochs if r["at"] > sent]
    assert len(after) <= 1, f"{len(after)} epochs finished after SIGINT"
    kept = json.loads(report.read_text())
    assert kept["incomplete"] is True and len(kept["epochs"]) == outcome["interrupted"]
    assert kept["reason"].startswith("interrupted by KeyboardInterrupt"), kept["reason"]
