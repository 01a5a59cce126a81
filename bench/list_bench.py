#!/usr/bin/env python3
"""One listing of every job, with --jobs jobs in the database: through the
API (`GET /api/v1/jobs?limit=N`, the whole answer in one response) and
through `trainctl ps --all --json` (the local store), side by side for two
binaries on copies of the same state folder.

    python3 bench/list_bench.py [--trainctl build/trainctl] [--baseline OLD/trainctl]
                                [--jobs 10000] [--reps 15]

The state folder is filled once, through the API of the oldest binary given
(--baseline, else --trainctl): --jobs gpu jobs queued behind one that holds
the only (fake) gpu.  Each binary then serves its own copy (a newer binary
migrates it on open) with no gpu at all, so that every job stays queued
while the listings are timed, alternating between the binaries, --reps
times each; medians and bests are printed with the load average.
"""
import argparse
import multiprocessing as mp
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from serverlib import SOCKET_OF_PORT, connect, free_port, loadavg, request  # noqa: E402


def load():
    return loadavg()


def start_server(tc, state, devices, args=()):
    port = free_port()
    env = dict(os.environ, TRAINCTL_HOME=str(state), TRAINCTL_FAKE_DEVICES=devices)
    SOCKET_OF_PORT[port] = str(state / "server.sock")
    env.pop("TRAINCTL_SERVER", None)
    env.pop("TRAINCTL_TOKEN", None)
    log = open(state.parent / f"server-{port}.log", "w")
    p = subprocess.Popen([tc, "server", "--listen", f"127.0.0.1:{port}", "--quiet", "--cpu-slots", "1",
                          "--sample-seconds", "600"] + list(args), env=env, stdout=log, stderr=log, start_new_session=True)
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return p, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the server did not start")


def stop_server(p, state):
    os.killpg(p.pid, signal.SIGTERM)
    p.wait(timeout=120)
    import sqlite3
    db = sqlite3.connect(str(state / "trainctl.db"))
    for (pid,) in db.execute("SELECT sup_pid FROM jobs WHERE state IN ('starting','running') AND sup_pid > 0"):
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    db.close()


def cpu_ms(pid):
    """CPU time of a process so far, in ms: the sum over its threads of the
    scheduler's run time (/proc/PID/task/*/schedstat, nanoseconds; the ticks of
    /proc/PID/stat are 10 ms, too coarse for one request)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e6


def submitter(port, n, q):
    conn = connect(port, 60)
    spec = {"spec": {"name": "queued", "command": "true", "devices": {"type": "gpu", "per_node": 1}}}
    bad = []
    for _ in range(n):
        st, body = request(conn, "POST", "/api/v1/jobs", spec)
        if st == 500:  # a binary from before unique ids: two submissions in a ms, one id
            st, body = request(conn, "POST", "/api/v1/jobs", spec)
        if st != 201:
            bad.append(f"{st} {body[:200]!r}")
    q.put(bad)


def fill(tc, state, jobs):
    # as root, the server refuses to run a job as root unless told it may
    p, port = start_server(tc, state, "gpu:1", ["--allow-root-jobs"] if os.geteuid() == 0 else [])
    try:
        conn = connect(port, 120)
        st, body = request(conn, "POST", "/api/v1/jobs", {"spec": {
            "name": "holder", "command": "sleep 3600", "devices": {"type": "gpu", "per_node": 1}}})
        assert st == 201, body
        q = mp.Queue()
        procs = [mp.Process(target=submitter, args=(port, jobs // 4, q)) for _ in range(4)]
        for pr in procs:
            pr.start()
        bad = [b for _ in procs for b in q.get()]
        for pr in procs:
            pr.join()
        assert not bad, f"{len(bad)} submissions failed: {bad[:3]}"
    finally:
        stop_server(p, state)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainctl", default=str(REPO / "build" / "trainctl"))
    ap.add_argument("--baseline", help="another trainctl binary, measured side by side")
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    tools = {"trainctl": os.path.abspath(a.trainctl)}
    if a.baseline:
        tools["baseline"] = os.path.abspath(a.baseline)
    tmp = Path(tempfile.mkdtemp(prefix="list-bench-"))
    servers = {}
    try:
        seed = tmp / "seed" / "state"
        seed.parent.mkdir()
        t0 = time.perf_counter()
        fill(tools.get("baseline", tools["trainctl"]), seed, a.jobs)
        print(f"# filled with {a.jobs} queued jobs in {time.perf_counter() - t0:.1f} s", flush=True)
        for k, tc in tools.items():
            state = tmp / k / "state"
            shutil.copytree(seed, state, ignore=shutil.ignore_patterns("runs"))
            servers[k] = (state,) + start_server(tc, state, "")
        conns = {k: connect(v[2], 120) for k, v in servers.items()}
        cases = [("GET /api/v1/jobs?limit=ALL", f"/api/v1/jobs?limit={a.jobs + 1}"),
                 ("GET ?state=queued&offset=5000", "/api/v1/jobs?state=queued&limit=100&offset=5000"),
                 ("GET /api/v1/jobs (page of 100)", "/api/v1/jobs")]
        times = {(c, k): [] for c, _ in cases for k in tools}
        cpus = {(c, k): [] for c, _ in cases for k in tools}
        ps = {k: [] for k in tools}
        ps_cpu = {k: [] for k in tools}
        sizes = {}
        loads = [load()]
        for k in tools:  # warm-up: page cache, the migration, prepared statements
            for _, path in cases:
                request(conns[k], "GET", path)
        for i in range(a.reps):
            order = list(tools) if i % 2 == 0 else list(tools)[::-1]
            for c, path in cases:
                for k in order:
                    c0 = cpu_ms(servers[k][1].pid)
                    t = time.perf_counter()
                    st, body = request(conns[k], "GET", path)
                    times[(c, k)].append(time.perf_counter() - t)
                    cpus[(c, k)].append(cpu_ms(servers[k][1].pid) - c0)
                    assert st == 200, body[:200]
                    sizes[(c, k)] = len(body)
            for k in order:
                env = dict(os.environ, TRAINCTL_HOME=str(servers[k][0]))
                env.pop("TRAINCTL_SERVER", None)
                t = time.perf_counter()
                p = subprocess.Popen([tools[k], "ps", "--all", "--json"], env=env, stdout=subprocess.PIPE)
                out = p.stdout.read()
                _, status, ru = os.wait4(p.pid, 0)
                ps[k].append(time.perf_counter() - t)
                ps_cpu[k].append((ru.ru_utime + ru.ru_stime) * 1e3)
                assert os.waitstatus_to_exitcode(status) == 0
                sizes[("ps", k)] = len(out)
        loads.append(load())
        print(f"# {os.cpu_count()} cores, load average {loads[0]} before, {loads[1]} after; "
              f"{a.reps} runs each, alternating")
        print("wall: the request (or command) as the client sees it; CPU: the server's own CPU time during"
              " the request (/proc/PID/task/*/schedstat), or the command's (rusage)")
        print(f"{'listing':34s}" + "".join(f"{k + ' wall median':>22s}{'best':>9s}{'CPU':>9s}" for k in tools)
              + "    bytes")
        rows = [(c, [(times[(c, k)], cpus[(c, k)]) for k in tools], sizes[(c, list(tools)[0])]) for c, _ in cases]
        rows.append(("trainctl ps --all --json (local)", [(ps[k], ps_cpu[k]) for k in tools],
                     sizes[("ps", list(tools)[0])]))
        for c, series, size in rows:
            print(f"{c:34s}" + "".join(f"{statistics.median(w) * 1e3:19.1f} ms{min(w) * 1e3:6.1f} ms"
                                       f"{statistics.median(cp):6.1f} ms" for w, cp in series) + f"  {size:>8d}")
    finally:
        for k, v in servers.items():
            stop_server(v[1], v[0])
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
