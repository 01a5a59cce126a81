#!/usr/bin/env python3
"""ingest.py -- metrics ingestion: lines stored per second by trainctl against
what a user would otherwise write (a Python loop: json.loads plus sqlite3
executemany in batches), on the same DLLogger lines, side by side.

trainctl side: `trainctl run -q -- cat LINES` -- one worker printing the lines
as fast as the pipe takes them; the supervisor parses every line, stores the
points in its database (batched) and writes TensorBoard files, as in any run.
Measured: wall time of the whole `trainctl run`, and its CPU time (the
supervisor is one thread; the CPU time also holds `cat`'s, so it overstates
what the supervisor spends).  On a shared machine the CPU figures are the
steadier ones: wall times move with whoever else runs.
Python side: read the same file, parse each line with json.loads, insert one
row per value with executemany in batches of 10,000 (WAL, synchronous=NORMAL,
like trainctl's database).

Usage: python3 bench/ingest.py [--lines N] [--trainctl PATH]
(default N = 1,000,000; PATH = $TRAINCTL or build-metrics/trainctl)
"""
import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_lines(path, n):
    """Lines as NVIDIA's JSONStreamBackend writes them (the digits example's shape)."""
    with open(path, "w") as f:
        t0 = 1700000000.0
        for i in range(n):
            t = t0 + i * 0.05
            f.write('DLLL {"timestamp": "%.6f", "datetime": "2023-11-14 22:13:20.123456+00:00", '
                    '"elapsedtime": "%.6f", "type": "LOG", "step": [%d, %d], '
                    '"data": {"train.loss": %.6f, "train.ips": %.3f}}\n'
                    % (t, i * 0.05, i // 1000, i % 1000, 2.3 / (1 + i * 1e-4), 500 + i % 17))


def run_trainctl(binary, lines_path, home):
    env = dict(os.environ, TRAINCTL_HOME=home)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([binary, "run", "-q", "--name", "ingest", "--", "cat", lines_path], env=env,
                   check=True, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = subprocess.run([binary, "show", "--json", "ingest"], env=env, check=True,
                         capture_output=True, text=True).stdout
    m = json.loads(out)["metrics"]
    stored_lines = sum(r["lines"] for r in m["ranks"])
    stored_points = sum(x["count"] for x in m["metrics"])
    return wall, cpu, stored_lines, stored_points


def run_python(lines_path, db_path):
    t = time.perf_counter()
    c = time.process_time()
    db = sqlite3.connect(db_path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE points (job TEXT, rank INTEGER, epoch INTEGER, iteration INTEGER,"
               " step TEXT, metric TEXT, value REAL, wall_time REAL)")
    sql = "INSERT INTO points VALUES (?,?,?,?,?,?,?,?)"
    batch, lines, points = [], 0, 0
    with open(lines_path) as f:
        for line in f:
            if not line.startswith("DLLL "):
                continue
            rec = json.loads(line[5:])
            step = rec.get("step")
            epoch = step[0] if isinstance(step, list) and step else None
            it = step[1] if isinstance(step, list) and len(step) > 1 else None
            wall = float(rec["timestamp"])
            for k, v in rec["data"].items():
                batch.append(("ingest", 0, epoch, it, json.dumps(step), k, v, wall))
            lines += 1
            if len(batch) >= 10000:
                db.executemany(sql, batch)
                db.commit()
                points += len(batch)
                batch = []
    if batch:
        db.executemany(sql, batch)
        db.commit()
        points += len(batch)
    db.close()
    return time.perf_counter() - t, time.process_time() - c, lines, points


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1000000)
    ap.add_argument("--trainctl", default=os.environ.get("TRAINCTL",
                                                         os.path.join(ROOT, "build-metrics", "trainctl")))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "lines.txt")
        make_lines(path, a.lines)
        size = os.path.getsize(path)
        wall, cpu, tl, tp = run_trainctl(a.trainctl, path, os.path.join(d, "home"))
        pwall, pcpu, pl, pp = run_python(path, os.path.join(d, "py.db"))
    assert tl == a.lines and pl == a.lines, (tl, pl)
    assert tp == pp == 2 * a.lines, (tp, pp)
    print(f"lines: {a.lines} DLLL lines ({size / 1e6:.1f} MB), {tp} points")
    print(f"trainctl run:  {wall:.2f} s wall, {cpu:.2f} s CPU = {a.lines / wall:,.0f} lines/s "
          f"({a.lines / cpu:,.0f} lines per CPU second)")
    print(f"python loop:   {pwall:.2f} s wall, {pcpu:.2f} s CPU = {a.lines / pwall:,.0f} lines/s "
          f"({a.lines / pcpu:,.0f} lines per CPU second)")
    print(f"ratio trainctl/python: {pwall / wall:.1f}x wall, {pcpu / cpu:.1f}x CPU")


if __name__ == "__main__":
    sys.exit(main())
