#!/usr/bin/python3
"""trainctl's own cost per job: two workers that do nothing (/bin/true),
started by `trainctl run --nproc 2` and bare (the same two processes started
by this script with the variables set by hand), in rotating order, N runs
each.  What remains after subtracting bare is the supervisor: spec,
database, run folder, environment, logs, watchdog, end-of-job records.
Torch jobs add seconds of imports on top of this and drown it in noise
(bench/launch.py).

A second series measures the start alone: the worker is `date +%s%N`, and
"to exec" is from just before the command is started to the time the first
worker read the clock (the latency `run` adds before a worker runs).

    TRAINCTL=build/trainctl /usr/bin/python3 bench/overhead.py [--runs 51]
    /usr/bin/python3 bench/overhead.py --trainctl build/trainctl --baseline OLD/trainctl

With --baseline, the two binaries run side by side in the same rotation
(each with its own TRAINCTL_HOME), so that a change is measured before and
after under the same load.
"""
import argparse
import glob
import os
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


CPU = []  # CPU seconds (user + system) of the last call, children included


def reap(p):
    """Wait for p; its CPU seconds, with every descendant it waited for."""
    _, _, ru = os.wait4(p.pid, 0)
    p.returncode = 0
    return ru.ru_utime + ru.ru_stime


def bare(argv):
    """Two workers started directly; returns the first worker's stdout."""
    env = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="29999")
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE,
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r))) for r in (0, 1)]
    outs = [p.stdout.read() for p in procs]
    CPU[:] = [sum(reap(p) for p in procs)]
    return outs[0]


def trainctl(tc, home, argv):
    """`trainctl run` of two workers; returns rank 0's log of the new job."""
    env = dict(os.environ, TRAINCTL_HOME=home)
    before = set(os.listdir(os.path.join(home, "runs"))) if os.path.isdir(os.path.join(home, "runs")) else set()
    p = subprocess.Popen([tc, "run", "--quiet", "--nproc", "2", "--"] + argv, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = 0
    if status != 0:
        raise SystemExit(f"{tc} run failed: status {status}")
    CPU[:] = [ru.ru_utime + ru.ru_stime]
    new = sorted(set(os.listdir(os.path.join(home, "runs"))) - before)
    if len(new) != 1:
        return b""
    with open(os.path.join(home, "runs", new[0], "logs", "rank-0.log"), "rb") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=51)
    ap.add_argument("--trainctl", default=os.environ.get("TRAINCTL", os.path.join(REPO, "build", "trainctl")))
    ap.add_argument("--baseline", help="another trainctl binary to run side by side (before a change)")
    args = ap.parse_args()
    tools = {"trainctl": os.path.abspath(args.trainctl)}
    if args.baseline:
        tools["baseline"] = os.path.abspath(args.baseline)
    homes = {k: tempfile.mkdtemp(prefix=f"tc-overhead-{k}-") for k in tools}
    names = list(tools) + ["bare"]
    total = {k: [] for k in names}
    cpu = {k: [] for k in names}
    start = {k: [] for k in names}
    loads = []
    true_argv, date_argv = ["/bin/true"], ["/bin/date", "+%s%N"]

    def one(k, argv):
        if k == "bare":
            return bare(argv)
        return trainctl(tools[k], homes[k], argv)

    # one warm-up each: page cache, the database's first migration
    for k in names:
        one(k, true_argv)
    for i in range(args.runs):
        loads.append(os.getloadavg()[0])
        order = names[i % len(names):] + names[:i % len(names)]
        for k in order:
            t0 = time.perf_counter()
            one(k, true_argv)
            total[k].append(time.perf_counter() - t0)
            cpu[k].append(CPU[0])
        for k in order:
            w0 = time.time_ns()
            out = one(k, date_argv)
            try:
                start[k].append((int(out.split()[0]) - w0) / 1e9)
            except (ValueError, IndexError):
                pass
    print(f"2 workers, {args.runs} runs each in rotation, load average {min(loads):.1f}-{max(loads):.1f}"
          f" (median {statistics.median(loads):.1f}) on {os.cpu_count()} cores")
    print(f"{'':10s} {'/bin/true median':>17s} {'min':>8s}   {'to exec median':>15s} {'min':>8s}"
          f"   {'CPU median':>11s} {'min':>8s}")
    for k in names:
        print(f"{k:10s} {statistics.median(total[k]) * 1e3:14.1f} ms {min(total[k]) * 1e3:5.1f} ms"
              f"   {statistics.median(start[k]) * 1e3:12.1f} ms {min(start[k]) * 1e3:5.1f} ms"
              f"   {statistics.median(cpu[k]) * 1e3:8.1f} ms {min(cpu[k]) * 1e3:5.1f} ms")
    for k in tools:
        print(f"{k} - bare: /bin/true median {(statistics.median(total[k]) - statistics.median(total['bare'])) * 1e3:+.1f} ms,"
              f" min {(min(total[k]) - min(total['bare'])) * 1e3:+.1f} ms;"
              f" to exec median {(statistics.median(start[k]) - statistics.median(start['bare'])) * 1e3:+.1f} ms,"
              f" min {(min(start[k]) - min(start['bare'])) * 1e3:+.1f} ms;"
              f" CPU median {(statistics.median(cpu[k]) - statistics.median(cpu['bare'])) * 1e3:+.1f} ms,"
              f" min {(min(cpu[k]) - min(cpu['bare'])) * 1e3:+.1f} ms")


if __name__ == "__main__":
    main()
