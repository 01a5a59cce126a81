#!/usr/bin/env python3
"""joblog_bench.py -- trainctl.job.log against printing DLLL lines, both under
`trainctl run`, side by side.

One rank logs N records of two values in a tight loop, once with
`print("DLLL " + json.dumps(...))` (what a script using DLLogger's JSON
format does) and once with `job.log(values, step=s)`, alternating for
--runs rounds.  Each worker times its own loop (records/s as the script
sees them: what logging costs the step); the whole run is timed too (until
`trainctl run` returns: every record read and stored), and the stored
points are counted.  Prints both and the ratio.

Usage: python3 bench/joblog_bench.py [--records 1000000] [--runs 3] [--trainctl PATH]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WORKER = r'''
import json, os, sys, time
sys.path.insert(0, os.environ["PYDIR"])
from trainctl import job
mode, n = sys.argv[1], int(sys.argv[2])
t0, c0 = time.perf_counter(), time.process_time()
if mode == "print":
    for s in range(n):
        print("DLLL " + json.dumps({"timestamp": time.time(), "type": "LOG", "step": s,
                                    "data": {"train.loss": 1.0 / (s + 1), "lr": 0.001}}))
    sys.stdout.flush()
else:
    for s in range(n):
        job.log({"train.loss": 1.0 / (s + 1), "lr": 0.001}, step=s)
    job.flush()
dt, dc = time.perf_counter() - t0, time.process_time() - c0
with open(os.environ["BENCH_OUT"], "w") as f:
    f.write(f"{n / dt} {n / dc}")
'''


def one(trainctl, d, mode, n, i):
    home = Path(d) / f"home-{mode}-{i}"
    out = Path(d) / f"rate-{mode}-{i}"
    worker = Path(d) / "worker.py"
    env = dict(os.environ, TRAINCTL_HOME=str(home), PYDIR=str(ROOT / "python"),
               BENCH_OUT=str(out))
    t0 = time.perf_counter()
    p = subprocess.run([trainctl, "run", "-q", "--name", f"jl-{mode}", "--",
                        sys.executable, str(worker), mode, str(n)],
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    assert p.returncode == 0, p.stderr
    s = subprocess.run([trainctl, "show", f"jl-{mode}", "--json"], env=env,
                       capture_output=True, text=True)
    stored = sum(m["count"] for m in json.loads(s.stdout)["metrics"]["metrics"])
    assert stored == 2 * n, (mode, stored)
    rate, cpu_rate = (float(x) for x in out.read_text().split())
    return rate, cpu_rate, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1000000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--trainctl", default=os.environ.get("TRAINCTL", str(ROOT / "build" / "trainctl")))
    a = ap.parse_args()
    res = {"print": [], "log": []}
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "worker.py").write_text(WORKER)
        for i in range(a.runs):
            for mode in ("print", "log"):
                res[mode].append(one(a.trainctl, d, mode, a.records, i))
    med = {m: [statistics.median(x[i] for x in res[m]) for i in range(3)] for m in res}
    for mode, label in (("print", "print(DLLL line)"), ("log", "job.log()")):
        print(f"{label:18s} in-loop records/s: " + " ".join(f"{x[0]:,.0f}" for x in res[mode])
              + f" (median {med[mode][0]:,.0f}; per CPU second {med[mode][1]:,.0f});"
              + "  trainctl run wall s: " + " ".join(f"{x[2]:.2f}" for x in res[mode])
              + f" (median {med[mode][2]:.2f})")
    print(f"job.log / print: {med['log'][0] / med['print'][0]:.2f}x the records/s in the loop "
          f"({med['log'][1] / med['print'][1]:.2f}x per CPU second), "
          f"{med['print'][2] / med['log'][2]:.2f}x faster end to end "
          f"({a.records:,} records of 2 values)")


if __name__ == "__main__":
    sys.exit(main())
