#!/usr/bin/env python3
"""trainctl server benchmarks (results in docs/PERFORMANCE.md, "## server").

    python3 bench/server_bench.py [--trainctl build/trainctl] [--jobs 10000]
                                  [--clients 4] [--points 1000000] [--slurm]

1. submissions per second through POST /api/v1/jobs, from --clients
   processes each on one keep-alive connection, with the queue filling to
   --jobs: a job holding the only gpu runs all along, so every submission
   stays queued behind it (and the scheduler decides over the whole queue);
2. listing with --jobs jobs in the database: the default page (100) and all
   of them in one answer;
3. one scheduling decision with --jobs queued, from /metrics
   (trainctl_scheduler_decision_seconds and _decisions_total, differenced
   over a quiet interval);
4. a --points-point metric series served downsampled to 2,000 points;
5. with --slurm: sbatch submissions per second on the localhost cluster of
   tests/e2e/slurm_cluster.py (held jobs, so they stay queued), next to
   `trainctl submit` one process per job, the way sbatch is used.

Prints one line per measure and the machine's load average before each.
"""
import argparse
import json
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
    return "load %s" % loadavg()


def submitter(port, n, start, q):
    conn = connect(port, 60)
    spec = {"spec": {"name": "queued", "command": "true", "devices": {"type": "gpu", "per_node": 1}}}
    start.wait()
    t0 = time.perf_counter()
    bad, why = 0, ""
    for _ in range(n):
        st, body = request(conn, "POST", "/api/v1/jobs", spec)
        if st != 201:
            bad += 1
            why = why or f"{st} {body[:300]!r}"
    q.put((t0, time.perf_counter(), bad, why))


def timed(conn, path, reps):
    times, size = [], 0
    for _ in range(reps):
        t0 = time.perf_counter()
        st, body = request(conn, "GET", path)
        times.append(time.perf_counter() - t0)
        assert st == 200, body[:200]
        size = len(body)
    return statistics.median(times), min(times), size


def prometheus(conn):
    st, body = request(conn, "GET", "/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def wait_state(conn, job, state, timeout=600):
    end = time.time() + timeout
    while time.time() < end:
        st, body = request(conn, "GET", f"/api/v1/jobs/{job}")
        if json.loads(body)["state"] == state:
            return
        time.sleep(0.2)
    raise SystemExit(f"job {job} not {state} in {timeout} s")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainctl", default=str(REPO / "build" / "trainctl"))
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--points", type=int, default=1000000)
    ap.add_argument("--slurm", action="store_true")
    ap.add_argument("--slurm-jobs", type=int, default=300)
    ap.add_argument("--keep", action="store_true", help="keep the state folder (printed)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="server-bench-"))
    port = free_port()
    env = dict(os.environ, TRAINCTL_HOME=str(tmp / "state"), TRAINCTL_FAKE_DEVICES="gpu:1")
    SOCKET_OF_PORT[port] = str(tmp / "state" / "server.sock")
    env.pop("TRAINCTL_SERVER", None)
    env.pop("TRAINCTL_TOKEN", None)
    log = open(tmp / "server.log", "w")
    srv = subprocess.Popen([a.trainctl, "server", "--listen", f"127.0.0.1:{port}", "--quiet",
                            "--cpu-slots", "1", "--sample-seconds", "60"],
                           env=env, stdout=log, stderr=log, start_new_session=True)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        conn = connect(port, 120)
        # the job that holds the gpu from start to end
        st, body = request(conn, "POST", "/api/v1/jobs", {"spec": {
            "name": "holder", "command": "sleep 3600", "devices": {"type": "gpu", "per_node": 1}}})
        holder = json.loads(body)["id"]
        wait_state(conn, holder, "running")

        # 1. submissions
        print(f"# {os.cpu_count()} cores, {load()}", flush=True)
        start = mp.Event()
        q = mp.Queue()
        per = a.jobs // a.clients
        procs = [mp.Process(target=submitter, args=(port, per, start, q)) for _ in range(a.clients)]
        for p in procs:
            p.start()
        time.sleep(0.5)  # let the clients connect
        start.set()
        res = [q.get() for _ in procs]
        for p in procs:
            p.join()
        t0 = min(r[0] for r in res)
        t1 = max(r[1] for r in res)
        bad = sum(r[2] for r in res)
        why = "; ".join(r[3] for r in res if r[3])
        n = per * a.clients
        print(f"submit: {n} jobs from {a.clients} keep-alive clients in {t1 - t0:.2f} s = "
              f"{n / (t1 - t0):.0f}/s ({bad} not 201{': ' + why if why else ''}; target >= 1000/s)", flush=True)

        # 2. listing
        time.sleep(1)
        print(f"# {load()}", flush=True)
        med, best, size = timed(conn, "/api/v1/jobs", 20)
        print(f"list default page (100 of {n + 1}): median {med * 1e3:.2f} ms, best {best * 1e3:.2f} ms, "
              f"{size} bytes", flush=True)
        med, best, size = timed(conn, f"/api/v1/jobs?limit={n + 1}", 10)
        print(f"list all {n + 1} jobs in one answer: median {med * 1e3:.1f} ms, best {best * 1e3:.1f} ms, "
              f"{size / 1e6:.1f} MB (target <= 20 ms)", flush=True)
        med, best, size = timed(conn, "/api/v1/jobs?state=queued&limit=100&offset=5000", 20)
        print(f"list filtered (state=queued, offset 5000): median {med * 1e3:.2f} ms", flush=True)

        # 3. one decision with the queue full: difference /metrics over a quiet interval
        m1 = prometheus(conn)
        time.sleep(5)
        m2 = prometheus(conn)
        c1, c2 = m1["trainctl_scheduler_decisions_total"], m2["trainctl_scheduler_decisions_total"]
        s1 = m1["trainctl_scheduler_decision_seconds"] * c1
        s2 = m2["trainctl_scheduler_decision_seconds"] * c2
        print(f"schedule: {m2['trainctl_queue_length']:.0f} queued, {c2 - c1:.0f} decisions in 5 s, "
              f"mean {(s2 - s1) / max(1, c2 - c1) * 1e6:.0f} us per decision (target <= 1 ms); "
              f"since start mean {m2['trainctl_scheduler_decision_seconds'] * 1e6:.0f} us", flush=True)

        # 4. a long metric series, downsampled
        gen = tmp / "gen.py"
        gen.write_text(
            "import sys\nw = sys.stdout.write\nn = int(sys.argv[1])\n"
            "for i in range(n):\n"
            "    w('DLLL {\"type\": \"LOG\", \"step\": [0, %d], \"data\": {\"loss\": %.6f}}\\n' % (i, 1.0 / (i + 1)))\n")
        st, body = request(conn, "POST", "/api/v1/jobs", {"spec": {
            "name": "long-series", "command": ["python3", str(gen), str(a.points)],
            "devices": {"type": "cpu", "per_node": 1}, "workdir": str(tmp)}})
        long_job = json.loads(body)["id"]
        t0 = time.perf_counter()
        wait_state(conn, long_job, "succeeded", timeout=1800)
        print(f"# the {a.points}-point job ran and was ingested in {time.perf_counter() - t0:.1f} s; {load()}",
              flush=True)
        path = f"/api/v1/jobs/{long_job}/metrics/points?name=loss&points=2000"
        med, best, size = timed(conn, path, 10)
        st, body = request(conn, "GET", path)
        s = json.loads(body)["series"][0]
        print(f"points: {s['n']} points served as {len(s['x'])}: median {med * 1e3:.1f} ms, "
              f"best {best * 1e3:.1f} ms, {size} bytes (target <= 50 ms)", flush=True)
        med, best, _ = timed(conn, path + f"&xmin={a.points // 2}&xmax={a.points // 2 + 10000}", 10)
        print(f"points zoomed (10,001-step window): median {med * 1e3:.1f} ms", flush=True)

        # 5. sbatch against trainctl submit, one process per job
        if a.slurm:
            bench_slurm(a, tmp, port, env)
    finally:
        os.killpg(srv.pid, signal.SIGTERM)
        srv.wait(timeout=60)
        stop_detached(tmp / "state")
        if a.keep:
            print(f"# kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def stop_detached(state):
    """SIGTERM the supervisors the server left running (recorded in runs/*/)."""
    import sqlite3
    try:
        db = sqlite3.connect(str(state / "trainctl.db"))
        pids = [r[0] for r in db.execute(
            "SELECT sup_pid FROM jobs WHERE state IN ('starting','running','restarting') AND sup_pid > 0")]
    except sqlite3.Error:
        pids = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass


def bench_slurm(a, tmp, port, env):
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    try:
        from slurm_cluster import Cluster, have_slurm
    except ImportError as e:
        print(f"sbatch: skipped ({e})")
        return
    if not have_slurm():
        print("sbatch: skipped (slurm-wlm and munge are not installed)")
        return
    cl = Cluster(tmp / "slurm")
    try:
        cl.start()
    except Exception as e:  # report, do not hide the other numbers
        print(f"sbatch: the localhost cluster did not start: {e}")
        return
    try:
        n = a.slurm_jobs
        print(f"# {load()}", flush=True)
        t0 = time.perf_counter()
        for _ in range(n):
            subprocess.run(["sbatch", "--hold", "-p", "debug", "--wrap", "true"], env=cl.env,
                           check=True, stdout=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        print(f"sbatch: {n} held jobs, one sbatch process each, in {dt:.2f} s = {n / dt:.0f}/s", flush=True)
        spec = tmp / "q.yaml"
        spec.write_text("name: q\ncommand: \"true\"\ndevices: {type: gpu, per_node: 1}\n")
        e = dict(env, TRAINCTL_SERVER=f"http://127.0.0.1:{port}")
        t0 = time.perf_counter()
        for _ in range(n):
            subprocess.run([a.trainctl, "submit", str(spec)], env=e, check=True, stdout=subprocess.DEVNULL)
        dt2 = time.perf_counter() - t0
        print(f"trainctl submit: {n} jobs, one process each, in {dt2:.2f} s = {n / dt2:.0f}/s "
              f"({dt / dt2:.1f}x sbatch)", flush=True)
    finally:
        subprocess.run(["scancel", "--user", os.environ.get("USER", "root")], env=cl.env, check=False)
        cl.stop()


if __name__ == "__main__":
    main()
