#!/usr/bin/env python3
"""`trainctl show` of a job with many metric points: wall time and peak
memory (max RSS) of the command, side by side for two binaries.

    python3 bench/show_bench.py [--trainctl build/trainctl] [--baseline OLD/trainctl]
                                [--lines 1000000] [--reps 7]

Each binary runs its own job, `trainctl run -q -- cat LINES` over the same
--lines DLLogger lines (two metrics a line: 2 points per line, the shape of
bench/ingest.py), into its own TRAINCTL_HOME, so each stores its points its
own way; the time and CPU of that run are printed too (ingestion must not
get slower).  Then `trainctl show JOB` and `trainctl show --json JOB` run
--reps times each, alternating between the binaries; medians and bests of
the wall time, the largest max RSS, and a check that both print the same
summary numbers.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from ingest import make_lines  # noqa: E402


def timed(argv, env):
    """Run argv; wall seconds, max RSS in MB (this child only), CPU seconds, stdout."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed")
    return wall, ru.ru_maxrss / 1024, ru.ru_utime + ru.ru_stime, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainctl", default=str(REPO / "build" / "trainctl"))
    ap.add_argument("--baseline", help="another trainctl binary, measured side by side")
    ap.add_argument("--lines", type=int, default=1000000)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    tools = {"trainctl": os.path.abspath(a.trainctl)}
    if a.baseline:
        tools["baseline"] = os.path.abspath(a.baseline)
    tmp = Path(tempfile.mkdtemp(prefix="show-bench-"))
    try:
        lines = tmp / "lines.txt"
        make_lines(lines, a.lines)
        envs = {}
        for k, tc in tools.items():
            envs[k] = dict(os.environ, TRAINCTL_HOME=str(tmp / k))
            envs[k].pop("TRAINCTL_SERVER", None)
            wall, _, cpu, _ = timed([tc, "run", "-q", "--name", "big", "--", "cat", str(lines)], envs[k])
            print(f"# {k}: run of {a.lines} lines ({2 * a.lines} points): {wall:.2f} s wall,"
                  f" {cpu:.2f} s CPU (supervisor and cat)", flush=True)
        loads = [os.getloadavg()[0]]
        res = {(k, c): [] for k in tools for c in ("text", "json")}
        outs = {}
        for i in range(a.reps):
            order = list(tools) if i % 2 == 0 else list(tools)[::-1]
            for c, extra in (("text", []), ("json", ["--json"])):
                for k in order:
                    wall, rss, _, out = timed([tools[k], "show"] + extra + ["big"], envs[k])
                    res[(k, c)].append((wall, rss))
                    outs[(k, c)] = out
        loads.append(os.getloadavg()[0])
        print(f"# {os.cpu_count()} cores, load average {loads[0]:.1f} before, {loads[1]:.1f} after;"
              f" {a.reps} runs each, alternating")
        print(f"{'':26s} {'median':>9s} {'best':>9s} {'max RSS':>9s}")
        for (k, c), v in res.items():
            w = [x[0] for x in v]
            print(f"{k + ' show' + (' --json' if c == 'json' else ''):26s} {statistics.median(w) * 1e3:6.0f} ms"
                  f" {min(w) * 1e3:6.0f} ms {max(x[1] for x in v):6.1f} MB")
        if len(tools) == 2:
            m = [json.loads(outs[(k, "json")])["metrics"] for k in tools]
            for key in ("throughput", "accuracy"):
                assert m[0][key] == m[1][key] or abs(m[0][key] - m[1][key]) <= 1e-9 * abs(m[1][key]), key
            strip = [[{x: v for x, v in s.items()} for s in mm["metrics"]] for mm in m]
            assert len(strip[0]) == len(strip[1])
            for s0, s1 in zip(*strip):
                for x in ("name", "rank", "kind", "count", "last", "best", "min", "max", "last_step", "best_step"):
                    assert s0[x] == s1[x], (x, s0[x], s1[x])
                assert abs(s0["mean"] - s1["mean"]) <= 1e-9 * abs(s1["mean"])
            print("# both print the same summary")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
