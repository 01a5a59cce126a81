#!/usr/bin/python3
"""Launch benchmark: how long it takes to start, run and reap a 2-rank gloo job.

The job (bench/allreduce_worker.py) joins a gloo group, does one all_reduce of
a small tensor and leaves. It is started, in alternating order, by

  trainctl        build/trainctl run --quiet --nproc 2 -- /usr/bin/python3 worker
  torchrun        torchrun --standalone --nproc_per_node 2 worker (defaults)
  torchrun-fast   the same with --monitor_interval 0.1 (torchrun polls its
                  workers every 5 s by default; this shows what is left
                  without that sleep)
  bare            this script starting the two workers itself, with RANK,
                  WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and a
                  free MASTER_PORT set by hand: the floor

and the median wall time of each is printed with the ratios against trainctl.

    /usr/bin/python3 bench/launch.py --runs 10
    /usr/bin/python3 bench/launch.py --only torchrun,bare     # no trainctl needed

The trainctl binary is $TRAINCTL or build/trainctl; it runs with
TRAINCTL_HOME set to a temporary folder. torchrun is run through
tests/e2e/torchrun_wrapper.py (Debian's torch 1.13 torchrun needs a fix-up on
Python 3.11). Every launcher's workers get OMP_NUM_THREADS=1.
"""
import argparse
import json
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
PYTHON = "/usr/bin/python3"
WRAPPER = REPO / "tests" / "e2e" / "torchrun_wrapper.py"
WORKER = REPO / "bench" / "allreduce_worker.py"
METHODS = ["trainctl", "torchrun", "torchrun-fast", "bare"]
NPROC = 2


def trainctl_binary():
    return Path(os.environ.get("TRAINCTL", REPO / "build" / "trainctl")).resolve()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(home):
    env = dict(os.environ)
    env["TRAINCTL_HOME"] = str(home)
    env["OMP_NUM_THREADS"] = "1"
    return env


def launcher_argv(method, worker_argv):
    """argv of a launcher that starts NPROC copies of worker_argv (a list)."""
    if method == "trainctl":
        return [str(trainctl_binary()), "run", "--quiet", "--nproc", str(NPROC), "--"] + worker_argv
    if method == "torchrun":
        return [PYTHON, str(WRAPPER), "--standalone", "--nproc_per_node", str(NPROC), "--no_python"] + worker_argv
    if method == "torchrun-fast":
        return [PYTHON, str(WRAPPER), "--standalone", "--nproc_per_node", str(NPROC),
                "--monitor_interval", "0.1", "--no_python"] + worker_argv
    raise ValueError(method)


def run_bare(worker_argv, env, timeout):
    """Start NPROC workers directly; return (exit codes, stderr tail)."""
    port = free_port()
    procs = []
    for rank in range(NPROC):
        e = dict(env, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(NPROC),
                 LOCAL_WORLD_SIZE=str(NPROC), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen(worker_argv, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    codes, errs = [], []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        codes.append(p.returncode)
        errs.append(err.decode(errors="replace"))
    return codes, "".join(errs)[-2000:]


def run_launcher(argv, env, timeout):
    """Run a launcher in its own session; on timeout kill the whole session's
    process group (its workers too) and raise TimeoutExpired."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        raise
    return p.returncode, err.decode(errors="replace")


def run_once(method, env, timeout):
    """Wall seconds of one launch of the all_reduce job; raises on failure."""
    worker_argv = [PYTHON, str(WORKER)]
    t0 = time.perf_counter()
    if method == "bare":
        codes, err = run_bare(worker_argv, env, timeout)
        wall = time.perf_counter() - t0
        if any(codes):
            raise RuntimeError(f"bare: exit codes {codes}\n{err}")
        return wall
    rc, err = run_launcher(launcher_argv(method, worker_argv), env, timeout)
    wall = time.perf_counter() - t0
    if rc != 0:
        raise RuntimeError(f"{method}: exit code {rc}\n{err[-2000:]}")
    return wall


def check_methods(methods):
    for m in methods:
        if m not in METHODS:
            sys.exit(f"launch.py: unknown method {m!r} (choose from {', '.join(METHODS)})")
    if "trainctl" in methods and not os.access(trainctl_binary(), os.X_OK):
        sys.exit(f"launch.py: no trainctl binary at {trainctl_binary()} (build it, set TRAINCTL, "
                 f"or use --only torchrun,bare)")


def median_ms(xs):
    return statistics.median(xs) * 1000.0


def report(title, methods, times):
    print(f"\n{title}")
    print(f"{'method':<14} {'runs':>4} {'median ms':>10} {'min ms':>9} {'max ms':>9}")
    for m in methods:
        xs = times[m]
        if xs:
            print(f"{m:<14} {len(xs):>4} {median_ms(xs):>10.1f} {min(xs) * 1000:>9.1f} {max(xs) * 1000:>9.1f}")
    med = {m: median_ms(times[m]) for m in methods if times[m]}
    lines = []
    if "trainctl" in med:
        for other in ("torchrun", "torchrun-fast"):
            if other in med:
                lines.append(f"trainctl / {other}: {med['trainctl'] / med[other]:.3f}  "
                             f"({other} / trainctl: {med[other] / med['trainctl']:.2f}x)")
        if "bare" in med:
            lines.append(f"trainctl - bare: {med['trainctl'] - med['bare']:+.1f} ms")
    for other in ("torchrun", "torchrun-fast"):
        if other in med and "bare" in med:
            lines.append(f"{other} - bare: {med[other] - med['bare']:+.1f} ms; "
                         f"{other} / bare: {med[other] / med['bare']:.2f}")
    for line in lines:
        print(line)
    return med


def main(argv=None):
    ap = argparse.ArgumentParser(description="2-rank launch benchmark: trainctl vs torchrun vs bare")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per method (default 10)")
    ap.add_argument("--only", default=",".join(METHODS),
                    help=f"comma-separated subset of {','.join(METHODS)}")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per launch before giving up")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed first launch of each method")
    ap.add_argument("--json", metavar="FILE", help="also write the raw times and medians as JSON")
    args = ap.parse_args(argv)
    methods = [m for m in args.only.split(",") if m]
    check_methods(methods)

    home = Path(tempfile.mkdtemp(prefix="trainctl-bench-"))
    env = base_env(home)
    times = {m: [] for m in methods}
    failures = {m: [] for m in methods}
    try:
        if not args.no_warmup:  # fill the page cache (torch import) and create the trainctl db
            for m in methods:
                try:
                    run_once(m, env, args.timeout)
                except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                    print(f"warm-up: {m} failed: {str(e).strip().splitlines()[-1][:300]}", file=sys.stderr)
        for i in range(args.runs):
            # rotate the order so no method always runs first (or right after another)
            order = methods[i % len(methods):] + methods[:i % len(methods)]
            for m in order:
                try:
                    times[m].append(run_once(m, env, args.timeout))
                except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                    # a launcher that fails is counted and reported, not timed
                    failures[m].append(str(e))
                    print(f"run {i + 1}: {m} FAILED: {str(e).strip().splitlines()[-1][:300]}",
                          file=sys.stderr, flush=True)
            print(f"run {i + 1}/{args.runs}: " + "  ".join(
                f"{m} {times[m][-1] * 1000:.0f} ms" if times[m] else f"{m} -" for m in methods),
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)

    med = report(f"launch: {NPROC} ranks, gloo init + 1 all_reduce + destroy, {args.runs} runs each "
                 f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs)", methods, times)
    for m in methods:
        if failures[m]:
            print(f"{m}: {len(failures[m])} of {args.runs} launches FAILED (not timed); first error:\n{failures[m][0][-1500:]}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"runs": args.runs, "times_s": times, "median_ms": med, "failures": failures}, indent=1))
    return 1 if any(failures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
