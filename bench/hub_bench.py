#!/usr/bin/env python3
"""The hub's event channel under load (docs/PERFORMANCE.md, "The hub").

Builds bench/hub_bench.c against build/libtc.a (run `make build` first) and
measures, each next to its alternative:

  throughput  POINTS metric points from one node through the channel
              (remote sink: journal + HTTP to a hub process) against the
              same points written straight into the store by one process;
  fan-in      NODES simulated nodes x RANKS ranks, each rank printing a
              DLLogger step line every PERIOD ms, into one hub: the hub's
              CPU and the lag from a batch's append to its acknowledgement;
  overhead    one node at 10,000 points/s (8 ranks, a line of 2 points every
              1.6 ms each): the node process's CPU (line parsing included),
              through the hub against writing its own store.

CPU times are getrusage's; on a loaded machine compare them, not wall times.
    python3 bench/hub_bench.py [--points N] [--nodes N] [--seconds S]
                               [--only throughput|fanin|overhead] [--baseline OLD] [--rounds N]

--baseline OLD: a checkout built before (OLD/build/libtc.a); the overhead is
then measured for both, alternating, --rounds times each (the median), and
their ratio printed.  Each side is built from its own tree's bench/hub_bench.c
and library, so each runs its own supervisor's read loop (workers.c).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = "20261126-000000-000-beef"


def build(root=REPO):
    exe = os.path.join(root, "build", "hub_bench")
    src = os.path.join(root, "bench", "hub_bench.c")  # the tree's own model of its supervisor
    lib = os.path.join(root, "build", "libtc.a")
    if not os.path.exists(lib):
        sys.exit(f"{lib} is missing: run `make build` there first")
    if not os.path.exists(exe) or os.path.getmtime(exe) < max(os.path.getmtime(src), os.path.getmtime(lib)):
        libs = subprocess.run(["pkg-config", "--libs", "jansson", "sqlite3", "yaml-0.1"],
                              capture_output=True, text=True, check=True).stdout.split()
        subprocess.run(["cc", "-O2", "-std=c17", "-D_GNU_SOURCE", "-I" + os.path.join(root, "src"),
                        src, lib, *libs, "-ldl", "-lm", "-lpthread", "-o", exe], check=True)
    return exe


def kv(text):
    out = {}
    for line in text.splitlines():
        w = line.split()
        for i in range(0, len(w) - 1, 2):
            try:
                out[w[i]] = float(w[i + 1])
            except ValueError:
                pass
    return out


class Hub:
    def __init__(self, exe, home):
        self.p = subprocess.Popen([exe, "hub", home, JOB], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.port = int(self.p.stdout.readline().split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.p.stdin.close()
        return kv(self.p.stdout.read())["cpu"]


def node_runs(exe, urls, home, ranks, period_ms, seconds):
    """One `gen | ranks` pair per url (a node: its ranks and its supervisor)."""
    pairs = []
    for n, url in enumerate(urls):
        g = subprocess.Popen([exe, "gen", str(ranks), str(period_ms), str(seconds)],
                             stdout=subprocess.PIPE)
        r = subprocess.Popen([exe, "ranks", url, home, JOB, f"node{n}"], stdin=g.stdout,
                             stdout=subprocess.PIPE, text=True)
        g.stdout.close()
        pairs.append((g, r))
    out = []
    for g, r in pairs:
        out.append(kv(r.communicate()[0]))
        g.wait()
    return out


def overhead(exe, tmp, tag, seconds):
    """one node at 10k points/s: (cpu % through the hub, cpu % writing its own store, points/s)"""
    home = os.path.join(tmp, f"overhead-{tag}-d")
    os.makedirs(home)
    dd = node_runs(exe, ["direct"], home, 8, 1.6, seconds)[0]
    home = os.path.join(tmp, f"overhead-{tag}-h")
    os.makedirs(home)
    hub = Hub(exe, home)
    rr = node_runs(exe, [hub.url], home, 8, 1.6, seconds)[0]
    hub.stop()
    return 100 * rr["cpu"] / seconds, 100 * dd["cpu"] / seconds, 2 * rr["lines"] / seconds, rr


def compare(exe, old, tmp, seconds, rounds):
    """the overhead of this tree's library and OLD's, alternating, median of rounds"""
    import statistics
    res = {"new": [], "old": []}
    for i in range(rounds):
        for tag, e in (("new", exe), ("old", old)):
            res[tag].append(overhead(e, tmp, f"{tag}{i}", seconds))
    print(f"\noverhead: one node, 8 ranks, 10,000 points/s, {seconds} s x {rounds} rounds each, "
          "median of the node process's cpu (% of one core)")
    print(f"  {'build':10} {'through the hub':>16} {'own store':>10}")
    med = {}
    for tag in ("old", "new"):
        h = statistics.median(r[0] for r in res[tag])
        d = statistics.median(r[1] for r in res[tag])
        med[tag] = (h, d)
        print(f"  {tag:10} {h:15.2f}% {d:9.2f}%")
    print(f"  new / old: through the hub {med['new'][0] / max(med['old'][0], 1e-9):.2f},"
          f" own store {med['new'][1] / max(med['old'][1], 1e-9):.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=2_000_000)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--period-ms", type=float, default=100)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--only", choices=["throughput", "fanin", "overhead"])
    ap.add_argument("--baseline", help="a checkout built before: OLD/build/libtc.a")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    exe = build()
    tmp = tempfile.mkdtemp(prefix="hub-bench-")
    try:
        print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cpus)")
        if a.baseline:
            compare(exe, build(os.path.abspath(a.baseline)), tmp, a.seconds, a.rounds)
            print(f"\nload average after: {os.getloadavg()[0]:.2f}")
            return
        if a.only == "overhead":
            h, d, pps, rr = overhead(exe, tmp, "only", a.seconds)
            print(f"\noverhead: one node, 8 ranks, {pps:.0f} points/s for {a.seconds} s")
            print(f"  node process cpu through the hub: {h:.2f}% of one core"
                  f" (lag mean {rr['lag_avg_ms']:.1f} ms)")
            print(f"  node process cpu writing its own store: {d:.2f}% of one core")
            print(f"\nload average after: {os.getloadavg()[0]:.2f}")
            return
        # throughput
        home = os.path.join(tmp, "direct")
        os.makedirs(home)
        d = kv(subprocess.run([exe, "direct", home, JOB, str(a.points)], capture_output=True,
                              text=True, check=True).stdout)
        home = os.path.join(tmp, "hub")
        os.makedirs(home)
        hub = Hub(exe, home)
        s = kv(subprocess.run([exe, "send", hub.url, home, JOB, "node0", str(a.points)],
                              capture_output=True, text=True, check=True).stdout)
        hub_cpu = hub.stop()
        print(f"\nthroughput, {a.points} points from one node")
        print(f"  {'path':34} {'wall s':>8} {'points/s':>11} {'cpu s':>7} {'points/cpu-s':>13}")
        print(f"  {'direct (the store, one process)':34} {d['seconds']:8.2f} {a.points / d['seconds']:11.0f}"
              f" {d['cpu']:7.2f} {a.points / max(d['cpu'], 1e-9):13.0f}")
        print(f"  {'hub: sender':34} {s['seconds']:8.2f} {a.points / s['seconds']:11.0f}"
              f" {s['cpu']:7.2f} {a.points / max(s['cpu'], 1e-9):13.0f}")
        print(f"  {'hub: the hub process':34} {'':8} {'':11} {hub_cpu:7.2f} {a.points / max(hub_cpu, 1e-9):13.0f}")
        print(f"  hub path / direct, wall: {d['seconds'] / s['seconds']:.2f}x")
        # fan-in
        home = os.path.join(tmp, "fanin")
        os.makedirs(home)
        hub = Hub(exe, home)
        t0 = time.monotonic()
        res = node_runs(exe, [hub.url] * a.nodes, home, a.ranks, a.period_ms, a.seconds)
        wall = time.monotonic() - t0
        hub_cpu = hub.stop()
        lines = sum(r["lines"] for r in res)
        print(f"\nfan-in: {a.nodes} nodes x {a.ranks} ranks, a step line (2 points) every"
              f" {a.period_ms:g} ms each, {a.seconds} s")
        print(f"  lines {lines:.0f} ({lines / a.seconds:.0f}/s), points {2 * lines:.0f}")
        print(f"  hub cpu {hub_cpu:.2f} s = {100 * hub_cpu / wall:.1f}% of one core over {wall:.1f} s")
        print(f"  lag (append -> ack): mean of node means {sum(r['lag_avg_ms'] for r in res) / len(res):.1f} ms,"
              f" max {max(r['lag_max_ms'] for r in res):.1f} ms")
        print(f"  node cpu: mean {100 * sum(r['cpu'] for r in res) / len(res) / a.seconds:.2f}% of one core")
        # overhead at 10k points/s
        home = os.path.join(tmp, "overhead")
        os.makedirs(home)
        dd = node_runs(exe, ["direct"], home, 8, 1.6, a.seconds)[0]
        hub = Hub(exe, home)
        rr = node_runs(exe, [hub.url], home, 8, 1.6, a.seconds)[0]
        hub.stop()
        print(f"\noverhead: one node, 8 ranks, {2 * rr['lines'] / a.seconds:.0f} points/s for {a.seconds} s")
        print(f"  node process cpu through the hub: {100 * rr['cpu'] / a.seconds:.2f}% of one core"
              f" (lag mean {rr['lag_avg_ms']:.1f} ms)")
        print(f"  node process cpu writing its own store: {100 * dd['cpu'] / a.seconds:.2f}% of one core")
        print(f"  ratio hub / direct: {rr['cpu'] / max(dd['cpu'], 1e-9):.2f}")
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
