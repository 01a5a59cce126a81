#!/usr/bin/python3
"""Teardown benchmark: how fast a launcher notices a dead rank and ends the job.

Two ranks; rank 1 exits with code 1 after --fail-after seconds (writing
time.time() to a stamp file just before), rank 0 sleeps forever (and dies at
once on SIGTERM). Measured: rank 1's death -> the launcher's exit, which must
come after the last rank is gone (checked: rank 0's pid must not be alive
once the launcher has exited). Median over --runs, alternating launchers:

  trainctl        build/trainctl run --quiet --nproc 2 -- worker
  torchrun        torchrun --standalone --nproc_per_node 2 (defaults: it
                  polls its workers every 5 s)
  torchrun-fast   the same with --monitor_interval 0.1

    /usr/bin/python3 bench/teardown.py --runs 10
    /usr/bin/python3 bench/teardown.py --only torchrun,torchrun-fast

The workers import no torch (this measures the launcher, not torch's import).
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import launch  # noqa: E402  (same folder: binary paths, launcher argv)

METHODS = ["trainctl", "torchrun", "torchrun-fast"]


def worker(args):
    rank = int(os.environ["RANK"])
    stamp_dir = Path(args.stamp_dir)
    if rank == 1:
        time.sleep(args.fail_after)
        tmp = stamp_dir / "died.tmp"
        tmp.write_text(repr(time.time()))
        os.replace(tmp, stamp_dir / "died")  # the stamp is written just before exiting
        os._exit(1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # even if started with SIGTERM ignored
    (stamp_dir / f"pid-{rank}").write_text(str(os.getpid()))
    while True:
        time.sleep(3600)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_once(method, env, fail_after, timeout):
    stamp_dir = Path(tempfile.mkdtemp(prefix="teardown-"))
    try:
        worker_argv = [launch.PYTHON, str(Path(__file__).resolve()), "worker",
                       "--stamp-dir", str(stamp_dir), "--fail-after", str(fail_after)]
        rc, err = launch.run_launcher(launch.launcher_argv(method, worker_argv), env, timeout)
        t_exit = time.time()
        if rc == 0:
            raise RuntimeError(f"{method}: exited 0 although rank 1 failed")
        died = stamp_dir / "died"
        if not died.exists():
            raise RuntimeError(f"{method}: rank 1 never ran (exit {rc})\n{err[-2000:]}")
        leftover = []
        for p in stamp_dir.glob("pid-*"):
            pid = int(p.read_text())
            if alive(pid):
                leftover.append(pid)
                os.kill(pid, signal.SIGKILL)
        return t_exit - float(died.read_text()), rc, leftover
    finally:
        shutil.rmtree(stamp_dir, ignore_errors=True)


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["worker"]:
        wp = argparse.ArgumentParser(prog="teardown.py worker")
        wp.add_argument("--stamp-dir", required=True)
        wp.add_argument("--fail-after", type=float, default=1.0)
        return worker(wp.parse_args(argv[1:]))

    ap = argparse.ArgumentParser(description="2-rank teardown benchmark: rank 1 dies, how soon is the job over")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--only", default=",".join(METHODS), help=f"comma-separated subset of {','.join(METHODS)}")
    ap.add_argument("--fail-after", type=float, default=1.0, help="seconds rank 1 lives (default 1)")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args(argv)
    methods = [m for m in args.only.split(",") if m]
    for m in methods:
        if m not in METHODS:
            sys.exit(f"teardown.py: unknown method {m!r} (choose from {', '.join(METHODS)})")
    launch.check_methods(methods)

    home = Path(tempfile.mkdtemp(prefix="trainctl-bench-"))
    env = launch.base_env(home)
    times = {m: [] for m in methods}
    codes = {m: set() for m in methods}
    leftovers = {m: 0 for m in methods}
    failures = {m: [] for m in methods}
    try:
        for i in range(args.runs):
            order = methods[i % len(methods):] + methods[:i % len(methods)]
            for m in order:
                try:
                    dt, rc, left = run_once(m, env, args.fail_after, args.timeout)
                except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                    failures[m].append(str(e))  # counted and reported, not timed
                    print(f"run {i + 1}: {m} FAILED: {str(e).strip().splitlines()[-1][:300]}",
                          file=sys.stderr, flush=True)
                    continue
                times[m].append(dt)
                codes[m].add(rc)
                leftovers[m] += len(left)
            print(f"run {i + 1}/{args.runs}: " + "  ".join(
                f"{m} {times[m][-1] * 1000:.0f} ms" if times[m] else f"{m} -" for m in methods),
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)

    print(f"\nteardown: rank 1 exits 1 after {args.fail_after} s, rank 0 sleeps; "
          f"rank 1's death -> launcher exit, {args.runs} runs each")
    print(f"{'method':<14} {'median ms':>10} {'min ms':>9} {'max ms':>9}  exit codes  ranks left alive")
    for m in methods:
        xs = times[m]
        if not xs:
            print(f"{m:<14} {'-':>10}")
            continue
        print(f"{m:<14} {statistics.median(xs) * 1000:>10.1f} {min(xs) * 1000:>9.1f} {max(xs) * 1000:>9.1f}"
              f"  {','.join(map(str, sorted(codes[m]))):<10}  {leftovers[m]}")
    med = {m: statistics.median(times[m]) * 1000 for m in methods if times[m]}
    if "trainctl" in med:
        for other in ("torchrun", "torchrun-fast"):
            if other in med:
                print(f"{other} / trainctl: {med[other] / med['trainctl']:.1f}x  "
                      f"({other} - trainctl: {med[other] - med['trainctl']:+.1f} ms)")
    for m in methods:
        if failures[m]:
            print(f"{m}: {len(failures[m])} of {args.runs} runs FAILED (not timed); first error:\n"
                  f"{failures[m][0][-1500:]}")
    return 1 if any(leftovers.values()) or any(failures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
