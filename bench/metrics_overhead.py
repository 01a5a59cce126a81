#!/usr/bin/env python3
"""metrics_overhead.py -- does reading metrics slow the job?  The digits
example (examples/digits/job.yaml, 2 CPU ranks) is run N times with metrics
reading on and N times with --no-metrics, alternating, and its own throughput
(the train.ips of its final `[]` DLLogger record, averaged over the ranks,
read from the rank logs in both cases) is compared.

Usage: python3 bench/metrics_overhead.py [--runs 5] [--epochs 10] [--trainctl PATH]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def job_ips(home):
    """train.ips of the newest job's final summary records, mean over ranks."""
    runs = sorted((Path(home) / "runs").iterdir())
    vals = []
    for log in sorted((runs[-1] / "logs").glob("rank-*.log")):
        for line in log.read_text().splitlines():
            if line.startswith("DLLL "):
                rec = json.loads(line[5:])
                if rec.get("type") == "LOG" and rec.get("step") == [] and "train.ips" in rec["data"]:
                    vals.append(rec["data"]["train.ips"])
    assert vals, f"no summary train.ips in {runs[-1]}"
    return sum(vals) / len(vals)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--trainctl", default=os.environ.get("TRAINCTL",
                                                         str(ROOT / "build-metrics" / "trainctl")))
    a = ap.parse_args()
    on, off = [], []
    with tempfile.TemporaryDirectory() as d:
        spec = Path(d) / "job.yaml"
        text = (ROOT / "examples" / "digits" / "job.yaml").read_text()
        spec.write_text(text + f"workdir: {ROOT / 'examples' / 'digits'}\n")
        env = dict(os.environ, TRAINCTL_HOME=str(Path(d) / "home"))
        for i in range(2 * a.runs):
            flag = [] if i % 2 == 0 else ["--no-metrics"]
            subprocess.run([a.trainctl, "run", "-q", "--name", "ovh", *flag, str(spec)],
                           env=env, check=True, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            (on if not flag else off).append(job_ips(env["TRAINCTL_HOME"]))
    mon, moff = statistics.median(on), statistics.median(off)
    print("train.ips with metrics:    " + " ".join(f"{x:.0f}" for x in on) + f"  median {mon:.0f}")
    print("train.ips with --no-metrics: " + " ".join(f"{x:.0f}" for x in off) + f"  median {moff:.0f}")
    print(f"difference of medians: {100 * (mon - moff) / moff:+.2f}% "
          f"(run-to-run spread: {100 * statistics.pstdev(on + off) / statistics.mean(on + off):.1f}%)")


if __name__ == "__main__":
    sys.exit(main())
