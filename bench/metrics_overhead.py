#!/usr/bin/env python3
"""metrics_overhead.py -- does reading metrics slow the job?  The digits
example (examples/digits/job.yaml, 2 CPU ranks) is run N times with metrics
reading on and N times with --no-metrics, alternating, and its own throughput
(the train.ips of its final `[]` DLLogger record, averaged over the ranks,
read from the rank logs in both cases) is compared.  On a shared machine
that number moves by more than the effect, so the supervisor's own CPU time
(utime + stime of the trainctl process itself, children excluded, sampled
from /proc every 20 ms until it exits) is reported too: it is what reading
metrics costs, and the job's cores are not where it is spent.

Usage: python3 bench/metrics_overhead.py [--runs 5] [--epochs 10] [--trainctl PATH]
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


def run_and_sample(argv, env):
    """Run argv; return the process's own CPU seconds (children excluded)."""
    tick = os.sysconf("SC_CLK_TCK")
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu = 0.0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except (OSError, IndexError):
            pass
        time.sleep(0.02)
    assert p.returncode == 0, argv
    return cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--trainctl", default=os.environ.get("TRAINCTL",
                                                         str(ROOT / "build-metrics" / "trainctl")))
    a = ap.parse_args()
    on, off, cpu_on, cpu_off = [], [], [], []
    with tempfile.TemporaryDirectory() as d:
        spec = Path(d) / "job.yaml"
        text = (ROOT / "examples" / "digits" / "job.yaml").read_text()
        spec.write_text(text + f"workdir: {ROOT / 'examples' / 'digits'}\n")
        env = dict(os.environ, TRAINCTL_HOME=str(Path(d) / "home"))
        for i in range(2 * a.runs):
            flag = [] if i % 2 == 0 else ["--no-metrics"]
            cpu = run_and_sample([a.trainctl, "run", "-q", "--name", "ovh", *flag, str(spec)], env)
            (on if not flag else off).append(job_ips(env["TRAINCTL_HOME"]))
            (cpu_on if not flag else cpu_off).append(cpu)
    mon, moff = statistics.median(on), statistics.median(off)
    print("train.ips with metrics:    " + " ".join(f"{x:.0f}" for x in on) + f"  median {mon:.0f}")
    print("train.ips with --no-metrics: " + " ".join(f"{x:.0f}" for x in off) + f"  median {moff:.0f}")
    print(f"difference of medians: {100 * (mon - moff) / moff:+.2f}% "
          f"(run-to-run spread: {100 * statistics.pstdev(on + off) / statistics.mean(on + off):.1f}%)")
    print(f"supervisor CPU per run: {1000 * statistics.mean(cpu_on):.0f} ms with metrics, "
          f"{1000 * statistics.mean(cpu_off):.0f} ms with --no-metrics")


if __name__ == "__main__":
    sys.exit(main())
