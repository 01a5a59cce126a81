#!/usr/bin/python3
"""trainctl's own cost per job: two workers that do nothing (/bin/true),
started by `trainctl run --nproc 2` and bare (the same two processes started
by this script with the variables set by hand), alternating, N runs each.
What remains after subtracting bare is the supervisor: spec, database, run
folder, environment, logs, watchdog, end-of-job records.  Torch jobs add
seconds of imports on top of this and drown it in noise (bench/launch.py).

    TRAINCTL=build/trainctl /usr/bin/python3 bench/overhead.py [--runs 51]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bare():
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29999")
    procs = [subprocess.Popen(["/bin/true"], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in (0, 1)]
    for p in procs:
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=51)
    args = ap.parse_args()
    tc = os.environ.get("TRAINCTL", os.path.join(REPO, "build", "trainctl"))
    home = tempfile.mkdtemp(prefix="tc-overhead-")
    env = dict(os.environ, TRAINCTL_HOME=home)
    cmd = [tc, "run", "--quiet", "--nproc", "2", "--", "/bin/true"]
    times = {"trainctl": [], "bare": []}
    for _ in range(args.runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times["trainctl"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        bare()
        times["bare"].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    lo = {k: min(v) * 1000 for k, v in times.items()}
    print(f"2 workers of /bin/true, {args.runs} runs each, load {os.getloadavg()[0]:.1f}")
    for k in times:
        print(f"{k:9s} median {med[k]:7.1f} ms   min {lo[k]:7.1f} ms")
    print(f"trainctl - bare: median {med['trainctl'] - med['bare']:+.1f} ms, min {lo['trainctl'] - lo['bare']:+.1f} ms")


if __name__ == "__main__":
    main()
