#!/usr/bin/env python3
"""The progress watchdog's cost and detection latency (docs/diagnostics.md,
docs/PERFORMANCE.md).

    bench/watchdog_bench.py [--trainctl build/trainctl] [--seconds 10] [--rate 10000]
                            [--reps 3] [--timeouts 2,5,10]

1. Cost: one rank prints RATE step records a second (DLLogger lines) for
   SECONDS; the same job runs with `watchdog:` and without, in alternation,
   REPS times each.  The supervisor's CPU time is the trainctl process's
   (wait4's rusage, which includes the workers it reaped) less the
   worker's own (it prints its getrusage at the end).  The watchdog's cost
   is the difference, as a share of one core over the job's wall time.
2. Latency: a rank makes 30 steps of 20 ms, then sleeps inside a step;
   for each configured timeout (min_seconds, with factor 1) the silence the
   supervisor measured when it declared the hang, and the time from the
   last step record to the recorded hang event (stack dumps included),
   against the timeout -- and against what the job would otherwise wait:
   PyTorch's default collective timeout, 1800 s.
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

REPO = Path(__file__).resolve().parents[1]
PYTHON = "/usr/bin/python3"

RATE_WORKER = r'''
import os, resource, sys, time
rate, seconds = int(sys.argv[1]), float(sys.argv[2])
out = sys.stdout
t0 = time.monotonic()
n = 0
tick = 0.01
while True:
    now = time.monotonic() - t0
    if now >= seconds:
        break
    want = int(min(now + tick, seconds) * rate)
    lines = []
    while n < want:
        n += 1
        lines.append('DLLL {"type": "LOG", "step": %d, "data": {"loss": 0.5}}\n' % n)
    out.write("".join(lines))
    out.flush()
    time.sleep(max(0.0, (now + tick) - (time.monotonic() - t0)))
ru = resource.getrusage(resource.RUSAGE_SELF)
print("WORKER_CPU %.6f %d" % (ru.ru_utime + ru.ru_stime, n), flush=True)
'''

HANG_WORKER = r'''
import json, os, sys, time
for s in range(1, 31):
    time.sleep(0.02)
    print('DLLL ' + json.dumps({"type": "LOG", "step": s, "data": {"loss": 1.0}}), flush=True)
with open(os.path.join(os.environ["TRAINCTL_OUTPUT_DIR"], "last_step"), "w") as f:
    f.write(repr(time.time()))
while True:
    time.sleep(1000)
'''


def run_job(trainctl, home, spec):
    """Run `trainctl run -q spec`; (wall s, CPU s of trainctl and everything it reaped)."""
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    t0 = time.monotonic()
    p = subprocess.Popen([str(trainctl), "run", "-q", str(spec)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode()
    p.stderr.close()
    return p.returncode, wall, ru.ru_utime + ru.ru_stime, err


def job_json(trainctl, home, ref):
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    out = subprocess.run([str(trainctl), "show", "--json", ref], env=env, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def cost(args, tmp):
    w = tmp / "rate.py"
    w.write_text(RATE_WORKER)
    rows = {True: [], False: []}
    for rep in range(args.reps):
        for on in (False, True) if rep % 2 == 0 else (True, False):
            home = tmp / f"cost-{rep}-{on}"
            home.mkdir()
            spec = home / "job.yaml"
            spec.write_text(f'name: rate\ncommand: ["{PYTHON}", "{w}", "{args.rate}", "{args.seconds}"]\n'
                            + ("watchdog: {warmup_steps: 10, min_seconds: 60}\n" if on else ""))
            rc, wall, cpu, err = run_job(args.trainctl, home, spec)
            if rc != 0:
                sys.exit(f"the rate job failed ({rc}): {err}")
            j = job_json(args.trainctl, home, "rate")
            log = open(os.path.join(j["run_dir"], "logs", "rank-0.log")).read()
            wline = [x for x in log.splitlines() if x.startswith("WORKER_CPU ")][-1].split()
            wcpu, records = float(wline[1]), int(wline[2])
            sup = cpu - wcpu
            rows[on].append((wall, sup, records))
            if on:
                d = j.get("diagnostics") or {}
                assert d.get("steps") == records, (d.get("steps"), records)
    print(f"cost: 1 rank, {args.rate} step records/s for {args.seconds:g} s, {args.reps} runs each, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"  {'watchdog':10} {'records':>9} {'wall s':>8} {'supervisor CPU s':>17} {'% of a core':>12}")
    med = {}
    for on in (False, True):
        walls = [r[0] for r in rows[on]]
        sups = [r[1] for r in rows[on]]
        med[on] = (statistics.median(walls), statistics.median(sups))
        print(f"  {'on' if on else 'off':10} {rows[on][0][2]:>9} {med[on][0]:>8.2f} {med[on][1]:>17.3f} "
              f"{100 * med[on][1] / med[on][0]:>11.2f}%")
    extra = med[True][1] - med[False][1]
    print(f"  the watchdog's own cost: {extra:+.3f} CPU s over {med[True][0]:.1f} s = "
          f"{100 * extra / med[True][0]:+.2f}% of one core "
          f"(supervisor CPU with/without: {med[True][1] / med[False][1]:.2f}x)")


def latency(args, tmp):
    w = tmp / "hang.py"
    w.write_text(HANG_WORKER)
    print(f"latency: a rank silent after 30 steps of 20 ms; load average {os.getloadavg()[0]:.1f}")
    print(f"  {'timeout s':>9} {'silence at detection s':>23} {'last step -> hang event s':>26} "
          f"{'overshoot s':>12} {'vs torch 1800 s':>16}")
    for t in args.timeouts:
        home = tmp / f"lat-{t}"
        home.mkdir()
        spec = home / "job.yaml"
        spec.write_text(f'name: hang\ncommand: ["{PYTHON}", "{w}"]\n'
                        f"watchdog: {{warmup_steps: 5, min_seconds: {t}, factor: 1}}\n")
        rc, wall, _, err = run_job(args.trainctl, home, spec)
        j = job_json(args.trainctl, home, "hang")
        assert j["state"] == "failed" and j["root_cause"].startswith("hang detected"), (rc, err)
        h = j["diagnostics"]["hangs"][0]
        last = float(open(os.path.join(j["run_dir"], "output", "last_step")).read())
        ev = [e for e in j["events"] if e.get("kind") == "hang"][0]["time"]
        print(f"  {t:>9g} {h['silent_seconds']:>23.3f} {ev - last:>26.3f} {ev - last - t:>12.3f} "
              f"{1800 / (ev - last):>15.0f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trainctl", default=str(REPO / "build" / "trainctl"))
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rate", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeouts", default="2,5,10")
    ap.add_argument("--skip-cost", action="store_true")
    ap.add_argument("--skip-latency", action="store_true")
    args = ap.parse_args()
    args.trainctl = Path(args.trainctl).resolve()
    args.timeouts = [float(x) for x in args.timeouts.split(",")]
    with tempfile.TemporaryDirectory(prefix="watchdog-bench-") as d:
        tmp = Path(d)
        if not args.skip_cost:
            cost(args, tmp)
        if not args.skip_latency:
            latency(args, tmp)


if __name__ == "__main__":
    main()
