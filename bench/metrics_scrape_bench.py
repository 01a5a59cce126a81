#!/usr/bin/env python3
"""One Prometheus scrape (GET /metrics, as an admin: every series) with
--jobs jobs in the store, --devices fake gpus each held by a running job
that printed metrics, the rest queued: the server's CPU time per scrape,
side by side for two binaries on the same state folder.

    python3 bench/metrics_scrape_bench.py [--trainctl build/trainctl] [--baseline OLD/trainctl]
                                          [--jobs 10000] [--devices 64] [--reps 30]

The state folder is filled once through the API of --trainctl: --devices
jobs that print 50 metric lines (loss, ips) and then sleep, each on a gpu
of its own, and --jobs - --devices queued behind them.  Each binary then
serves that folder in turn (the running jobs keep running across servers,
as they do across a server's restart) and is scraped --reps times after a
warm-up; medians and bests of the server's CPU time (schedstat) and of the
wall time are printed with the load average.
"""
import argparse
import multiprocessing as mp
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from list_bench import cpu_ms, start_server, stop_server, submitter  # noqa: E402
from serverlib import connect, loadavg, request  # noqa: E402

WORKER = ('import json\n'
          'for i in range(50):\n'
          '    print("DLLL " + json.dumps({"type": "LOG", "step": [0, i], '
          '"data": {"train.loss": 1.0 / (i + 1), "train.ips": 100.0}}), flush=True)\n')


# the bench runs as root, as make check does: its jobs are root's own
ROOT_JOBS = ["--allow-root-jobs"] if os.geteuid() == 0 else []


def fill(tc, state, jobs, devices, worker):
    p, port = start_server(tc, state, f"gpu:{devices}", ROOT_JOBS)
    try:
        conn = connect(port, 120)
        cmd = f"python3 {worker} && sleep 3600"
        for i in range(devices):
            st, body = request(conn, "POST", "/api/v1/jobs", {"spec": {
                "name": f"running{i}", "command": cmd, "devices": {"type": "gpu", "per_node": 1}}})
            assert st == 201, body
        q = mp.Queue()
        procs = [mp.Process(target=submitter, args=(port, (jobs - devices) // 4, q)) for _ in range(4)]
        for pr in procs:
            pr.start()
        bad = [b for _ in procs for b in q.get()]
        for pr in procs:
            pr.join()
        assert not bad, f"{len(bad)} submissions failed: {bad[:3]}"
    except BaseException:
        stop_server(p, state)  # and the jobs it started
        raise
    return p, port


def running_with_metrics(port, want):
    st, body = request(connect(port, 120), "GET", "/metrics")
    return st == 200 and body.count(b"trainctl_job_metric{") >= want


def measure(tc, state, devices, reps, first=None):
    """(CPU ms, wall s, bytes) of reps scrapes, and the server, left running."""
    p, port = first or start_server(tc, state, f"gpu:{devices}", ROOT_JOBS)
    if first:  # this tree's binary, which fills: its jobs' metrics must have come in
        end = time.monotonic() + 600
        while not running_with_metrics(port, devices):
            assert time.monotonic() < end, "the running jobs' metrics never showed"
            time.sleep(0.5)
    conn = connect(port, 120)
    for _ in range(3):  # warm-up: page cache, prepared statements
        request(conn, "GET", "/metrics")
    cpu, wall, size = [], [], 0
    for _ in range(reps):
        c0 = cpu_ms(p.pid)
        t = time.perf_counter()
        st, body = request(conn, "GET", "/metrics")
        wall.append(time.perf_counter() - t)
        cpu.append(cpu_ms(p.pid) - c0)
        assert st == 200, body[:200]
        size = len(body)
    return (cpu, wall, size), p


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainctl", default=str(REPO / "build" / "trainctl"))
    ap.add_argument("--baseline", help="another trainctl binary, measured on the same folder")
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--devices", type=int, default=64)
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    tools = {"trainctl": os.path.abspath(a.trainctl)}
    if a.baseline:
        tools["baseline"] = os.path.abspath(a.baseline)
    tmp = Path(tempfile.mkdtemp(prefix="scrape-bench-"))
    state = tmp / "state"
    state.mkdir()
    worker = tmp / "worker.py"
    worker.write_text(WORKER)
    last = None  # the server running now
    try:
        t0 = time.perf_counter()
        first = fill(tools["trainctl"], state, a.jobs, a.devices, worker)
        last = first[0]
        print(f"# filled with {a.jobs} jobs ({a.devices} running) in {time.perf_counter() - t0:.1f} s",
              flush=True)
        loads = [loadavg()]
        res = {}
        for k, tc in tools.items():
            if last and k != "trainctl":  # one server per state folder; the jobs keep running
                os.killpg(last.pid, signal.SIGTERM)
                last.wait(timeout=120)
            res[k], last = measure(tc, state, a.devices, a.reps, first if k == "trainctl" else None)
        loads.append(loadavg())
        print(f"# {os.cpu_count()} cores, load average {loads[0]} before, {loads[1]} after; {a.reps} scrapes each")
        print(f"{'binary':10s}{'CPU median':>12s}{'best':>9s}{'wall median':>13s}{'best':>9s}{'bytes':>9s}")
        for k, (cpu, wall, size) in res.items():
            print(f"{k:10s}{statistics.median(cpu):9.2f} ms{min(cpu):6.2f} ms"
                  f"{statistics.median(wall) * 1e3:10.2f} ms{min(wall) * 1e3:6.2f} ms{size:9d}")
    finally:
        if last:
            stop_server(last, state)  # and the running jobs' supervisors
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
