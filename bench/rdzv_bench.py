#!/usr/bin/env python3
"""The rendezvous at scale (docs/PERFORMANCE.md, "Rendezvous"): N simulated
node supervisors against one hub on this machine, and TorchElastic's c10d
rendezvous side by side.

trainctl: `trainctl rdzv-sim hub` (the hub, its own process: its CPU seconds
and peak RSS from getrusage) and `trainctl rdzv-sim nodes` processes, each
running up to --threads node supervisors as threads with the real client
(src/hub/rdzv_client.c: join, wait for the round to close, heartbeat); the
victim node is a process of its own.  Timed: from starting the node
processes until every node is in round 0 (process start included), and
from the victim's SIGKILL until every survivor is in round 1 (the hub
declares it lost after --lost-s without a heartbeat, then the survivors
rejoin).

c10d: torch.distributed.elastic's DynamicRendezvousHandler over a
C10dRendezvousBackend on a TCPStore on 127.0.0.1, one agent process per
node (each imports torch: timed from a start signal sent once every agent
is ready, so the imports are not counted).  After the SIGKILL the survivors
are told at once to rendezvous again (as an agent whose workers failed);
the round closes after the last call once the dead node's keep-alive ran
out.

Prints one JSON line per run and a table.
"""
import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time

JOB = "20261129-030000-000-bnch"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise SystemExit(f"rdzv_bench: timed out waiting for {what}")


def lines_in(paths, rnd):
    """each node's first time in round rnd or a later one (a loss declared
    falsely on a loaded machine starts another round: counted by rounds_seen)"""
    first = {}
    for p in paths:
        with open(p) as f:
            for line in f:
                if not line.endswith("\n"):
                    continue
                try:
                    o = json.loads(line)
                except ValueError:  # a line read while it was being written
                    continue
                if o["round"] >= rnd and o["node"] not in first:
                    first[o["node"]] = o["t"]
    return list(first.values())


def rounds_seen(paths):
    rs = set()
    for p in paths:
        with open(p) as f:
            for line in f:
                if line.endswith("\n"):
                    rs.add(json.loads(line)["round"])
    return len(rs)


def run_trainctl(trainctl, n, threads, beat, lost):
    tmp = tempfile.mkdtemp(prefix="rdzv-bench-")
    env = dict(os.environ, TRAINCTL_HOME=tmp, TRAINCTL_HUB_SECRET=secrets.token_hex(32))
    port = free_port()
    env["TRAINCTL_HUB_URL"] = f"http://127.0.0.1:{port}"
    hub_out = os.path.join(tmp, "hub.out")
    hub = subprocess.Popen([trainctl, "rdzv-sim", "hub", JOB, "--port", str(port)], env=env,
                           stdout=open(hub_out, "w"), stderr=open(os.path.join(tmp, "hub.err"), "w"))
    procs = []
    try:
        wait(lambda: os.path.getsize(hub_out) > 0, 30, "the hub")
        subprocess.run([trainctl, "rdzv-sim", "open", JOB, "--round", "0", "--min", "1",
                        "--max", str(n), "--window-s", "60", "--beat-s", str(beat),
                        "--lost-s", str(lost)],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        outs = []
        t0 = time.time()
        first = 0
        while first < n - 1:
            k = min(threads, n - 1 - first)
            out = os.path.join(tmp, f"nodes-{first}.out")
            outs.append(out)
            procs.append(subprocess.Popen(
                [trainctl, "rdzv-sim", "nodes", JOB, "--count", str(k), "--first", str(first)],
                env=env, stdout=open(out, "w"), stderr=subprocess.DEVNULL))
            first += k
        vout = os.path.join(tmp, "victim.out")
        victim = subprocess.Popen(
            [trainctl, "rdzv-sim", "nodes", JOB, "--count", "1", "--first", str(n - 1)],
            env=env, stdout=open(vout, "w"), stderr=subprocess.DEVNULL)
        procs.append(victim)
        ts = wait(lambda: (lambda v: v if len(v) == n else None)(lines_in(outs + [vout], 0)),
                  120, f"{n} nodes in round 0")
        first_round = max(ts) - t0
        time.sleep(2 * beat)  # the round runs: heartbeats flow
        tk = time.time()
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        ts = wait(lambda: (lambda v: v if len(v) == n - 1 else None)(lines_in(outs, 1)),
                  120, f"{n - 1} survivors in round 1")
        change = max(ts) - tk
        rounds = rounds_seen(outs + [vout])
        # when the hub declared the loss (round 1 opened): the rest is the rendezvous itself
        st = json.loads(subprocess.run(
            ["curl", "-sS", "-H", "X-Trainctl-Hub-Secret: " + env["TRAINCTL_HUB_SECRET"],
             f"http://127.0.0.1:{port}/api/v1/hub/{JOB}/status"], capture_output=True,
            text=True, check=True).stdout)["rdzv"]
        rejoin = max(ts) - st["opened"] if st["round"] == 1 else None
    finally:
        hub.send_signal(signal.SIGTERM)
        hub.wait(timeout=60)
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait()
    with open(hub_out) as f:
        use = json.loads(f.read().splitlines()[-1])
    return {"impl": "trainctl", "nodes": n, "first_round_s": round(first_round, 3),
            "round_change_s": round(change, 3),
            "after_loss_declared_s": round(rejoin, 3) if rejoin is not None else None,
            "lost_s": lost, "beat_s": beat,
            "hub_cpu_s": use["cpu_s"], "hub_maxrss_mb": round(use["maxrss_kb"] / 1024, 1),
            "node_processes": len(procs), "rounds": rounds}


C10D_AGENT = r'''
import os, sys, json, time, signal
from datetime import timedelta
from torch.distributed import TCPStore
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
    DynamicRendezvousHandler, RendezvousSettings, RendezvousTimeout,
    _BackendRendezvousStateHolder)
port, n, idx, go, again, lastcall, ka, kam = sys.argv[1:9]
n, idx = int(n), int(idx)
store = TCPStore("127.0.0.1", int(port), is_master=False, timeout=timedelta(seconds=300))
backend = C10dRendezvousBackend(store, "bench")
# DynamicRendezvousHandler.from_backend, with the keep-alive of trainctl's heartbeat
settings = RendezvousSettings(
    "bench", 1, n,
    RendezvousTimeout(join=timedelta(seconds=600), last_call=timedelta(seconds=float(lastcall)),
                      close=timedelta(seconds=30)),
    keep_alive_interval=timedelta(seconds=float(ka)), keep_alive_max_attempt=int(kam))
h = DynamicRendezvousHandler(DynamicRendezvousHandler._node_desc_generator.generate(),
                             settings, backend.name, store,
                             _BackendRendezvousStateHolder(backend, settings))
print(json.dumps({"ready": idx}), flush=True)
while not os.path.exists(go):
    time.sleep(0.005)
_, rank, world = h.next_rendezvous()
print(json.dumps({"node": idx, "round": 0, "rank": rank, "world": world, "t": time.time()}), flush=True)
while not os.path.exists(again):
    time.sleep(0.005)
_, rank, world = h.next_rendezvous()
print(json.dumps({"node": idx, "round": 1, "rank": rank, "world": world, "t": time.time()}), flush=True)
time.sleep(3600)
'''


def run_c10d(python, n, lastcall, ka, kam):
    from torch.distributed import TCPStore  # the store's server, in this process
    from datetime import timedelta
    tmp = tempfile.mkdtemp(prefix="rdzv-c10d-")
    port = free_port()
    server = TCPStore("127.0.0.1", port, is_master=True, timeout=timedelta(seconds=300))
    agent = os.path.join(tmp, "agent.py")
    with open(agent, "w") as f:
        f.write(C10D_AGENT)
    go, again = os.path.join(tmp, "go"), os.path.join(tmp, "again")
    procs, outs = [], []
    try:
        for i in range(n):
            out = os.path.join(tmp, f"a{i}.out")
            outs.append(out)
            procs.append(subprocess.Popen(
                [python, agent, str(port), str(n), str(i), go, again, str(lastcall), str(ka),
                 str(kam)], stdout=open(out, "w"), stderr=open(out + ".err", "w")))

        def ready():
            return sum(1 for o in outs if '"ready"' in open(o).read()) == n
        wait(ready, 900, f"{n} c10d agents ready")
        t0 = time.time()
        open(go, "w").close()
        ts = wait(lambda: (lambda v: v if len(v) == n else None)(lines_in_c10d(outs, 0)),
                  300, f"{n} agents in round 0")
        first_round = max(ts) - t0
        time.sleep(2 * ka)
        tk = time.time()
        procs[-1].send_signal(signal.SIGKILL)
        procs[-1].wait()
        open(again, "w").close()  # the survivors' workers failed: rendezvous again
        ts = wait(lambda: (lambda v: v if len(v) == n - 1 else None)(lines_in_c10d(outs[:-1], 1)),
                  300, f"{n - 1} agents in round 1")
        change = max(ts) - tk
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        del server
    return {"impl": "c10d", "nodes": n, "first_round_s": round(first_round, 3),
            "round_change_s": round(change, 3), "last_call_s": lastcall,
            "keep_alive_s": ka, "keep_alive_max_attempt": kam}


def lines_in_c10d(paths, rnd):
    ts = []
    for p in paths:
        with open(p) as f:
            for line in f:
                if line.endswith("\n") and '"round"' in line:
                    o = json.loads(line)
                    if o["round"] == rnd:
                        ts.append(o["t"])
    return ts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainctl", default="build/trainctl")
    ap.add_argument("--nodes", default="8,64,256,1024")
    ap.add_argument("--threads", type=int, default=128, help="node threads per process")
    ap.add_argument("--beat", type=float, default=1.0)
    ap.add_argument("--lost", type=float, default=4.0)
    ap.add_argument("--c10d-nodes", default="8,16,32")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--last-call", type=float, default=0.5)
    args = ap.parse_args()
    rows = []
    for n in [int(x) for x in args.nodes.split(",") if x]:
        r = run_trainctl(os.path.abspath(args.trainctl), n, args.threads, args.beat, args.lost)
        print(json.dumps(r), flush=True)
        rows.append(r)
    for n in [int(x) for x in args.c10d_nodes.split(",") if x]:
        # keep-alive as trainctl's beat; lost after 4 missed: about trainctl's lost_s
        r = run_c10d(args.python, n, args.last_call, args.beat, int(round(args.lost / args.beat)))
        print(json.dumps(r), flush=True)
        rows.append(r)
    print(f"{'impl':9} {'nodes':>6} {'first round s':>14} {'round change s':>15} {'after declared s':>17}")
    for r in rows:
        print(f"{r['impl']:9} {r['nodes']:>6} {r['first_round_s']:>14} {r['round_change_s']:>15}"
              f" {str(r.get('after_loss_declared_s', '-')):>17}")


if __name__ == "__main__":
    sys.exit(main())
