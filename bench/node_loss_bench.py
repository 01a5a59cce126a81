"""Time from a node's SIGKILL to the first training step of the next round
(issue 30's benchmark; docs/PERFORMANCE.md, "A lost node: recovery time"),
side by side in one run on one localhost Slurm cluster (tests/e2e/
slurm_cluster.py: slurmd n1, n2, n3 on this host):

  spare     trainctl, nodes: 2, spares: 1 (n3 takes node 1's rank)
  fewer     trainctl, nodes: {min: 1, max: 2}, no spare (goes on with 1 node)
  torchrun  torchrun --nnodes=1:2 --nproc-per-node=1 --rdzv-backend=c10d
            --max-restarts=2, two agents on this host (a "node" is one agent's
            process tree; not under Slurm)

All three run bench/node_loss_worker.py (torch, gloo, a checkpoint each
step, resumed from it).  Once both ranks stepped a few times, every process
of node 1 is SIGKILLed (for trainctl: its `supervise-node` and all below,
as tests/e2e/test_node_loss.py's kill_node); the time is from the kill to
the first step line of the new round (TORCHELASTIC_RESTART_COUNT moved on)
written by any rank.

    bench/node_loss_bench.sh [--reps 3] [--impls spare,fewer,torchrun]
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
from conftest import job_id_in  # noqa: E402
from slurm_cluster import Cluster, have_slurm  # noqa: E402
from test_node_loss import kill_node, node_supervisor, process_tree  # noqa: E402

WORKER = os.path.join(HERE, "node_loss_worker.py")
PY = "/usr/bin/python3"


def wait(pred, timeout, what, step=0.05):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


def steps(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.endswith("\n")]
    except FileNotFoundError:
        return []


def first_new_step(path, t_kill, rnd):
    later = [s for s in steps(path) if s["t"] > t_kill and s["round"] > rnd]
    return min(later, key=lambda s: s["t"]) if later else None


def ready(path):
    """both ranks of round 0 stepped 5 times"""
    got = {}
    for s in steps(path):
        if s["round"] == 0:
            got[s["rank"]] = got.get(s["rank"], 0) + 1
    return len(got) == 2 and min(got.values()) >= 5


def row(impl, rep, s, t_kill, rc, folder):
    """s: the first step of the new round; its process's start splits the time in two"""
    return {"impl": impl, "rep": rep, "recovery_s": round(s["t"] - t_kill, 3),
            "to_worker_start_s": round(s["start"] - t_kill, 3),
            "worker_start_to_step_s": round(s["t"] - s["start"], 3),
            "import_s": s["import_s"], "init_s": s["init_s"], "ckpt_load_s": s["load_s"],
            "world": s["world"], "exit": rc, "folder": folder}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spec_text(name, kind, out, ckpt, stop):
    nodes = "nodes: 2\nspares: 1\n" if kind == "spare" else \
        'nodes: {min: 1, max: 2}\nslurm: {extra: ["--nodes=2"]}\n'
    return (f"name: {name}\ncommand: '{PY} {WORKER} {out} {ckpt} {stop}'\n"
            f"devices: {{type: cpu, per_node: 1}}\n{nodes}backend: slurm\n"
            f"restart: {{max_restarts: 2}}\n")


def run_trainctl(trainctl, cluster, kind, rep, tmp):
    d = tempfile.mkdtemp(prefix=f"{kind}{rep}-", dir=tmp)
    out, ckpt, stop = (os.path.join(d, n) for n in ("steps.jsonl", "ckpt.pt", "stop"))
    spec = os.path.join(d, "job.yaml")
    with open(spec, "w") as f:
        f.write(spec_text(f"nl-{kind}{rep}", kind, out, ckpt, stop))
    home = os.path.join(d, "home")
    env = dict(os.environ, SLURM_CONF=str(cluster.conf), TRAINCTL_HOME=home)
    log = open(os.path.join(d, "run.log"), "w")
    p = subprocess.Popen([trainctl, "run", "-q", spec], env=env, stdout=log, stderr=log)
    try:
        job = wait(lambda: job_id_in(home), 120, "the job's row")
        wait(lambda: ready(out) and node_supervisor(job, 1), 300, "both ranks stepping")
        t_kill = time.time()
        kill_node(job, 1)
        s = wait(lambda: first_new_step(out, t_kill, 0), 300, "a step of the next round")
        open(stop, "w").close()
        p.wait(timeout=300)
    finally:
        open(stop, "w").close()
        if p.poll() is None:
            p.kill()
            p.wait()
            subprocess.run(["scancel", "--name", f"nl-{kind}{rep}"], env=env)
    return row(f"trainctl {kind}", rep, s, t_kill, p.returncode, d)


def run_torchrun(rep, tmp):
    d = tempfile.mkdtemp(prefix=f"torchrun{rep}-", dir=tmp)
    out, ckpt, stop = (os.path.join(d, n) for n in ("steps.jsonl", "ckpt.pt", "stop"))
    port = free_port()
    # torch 1.13's spelling (underscores) of --nproc-per-node and the others
    # Debian's torch 1.13 on Python 3.11 needs the tests' fix-up wrapper (torchrun_wrapper.py)
    argv = [PY, os.path.join(HERE, "..", "tests", "e2e", "torchrun_wrapper.py"), "--nnodes=1:2", "--nproc_per_node=1", "--rdzv_backend=c10d",
            f"--rdzv_endpoint=127.0.0.1:{port}", f"--rdzv_id=nl{rep}", "--max_restarts=2",
            WORKER, out, ckpt, stop]
    agents = []
    try:
        for i in range(2):
            log = open(os.path.join(d, f"agent{i}.log"), "w")
            # its own session: "a node" is this agent's process tree
            agents.append(subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True))
            if i == 0:
                # agent 0 hosts the c10d store (the first to bind the port); agent 1 is the victim
                wait(lambda: subprocess.run(["ss", "-Hltn", f"sport = :{port}"],
                                            capture_output=True, text=True).stdout.strip(),
                     120, "agent 0's store")
        wait(lambda: ready(out), 300, "both ranks stepping")
        t_kill = time.time()
        for pid in process_tree(agents[1].pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        s = wait(lambda: first_new_step(out, t_kill, 0), 600, "a step of the next round")
        open(stop, "w").close()
        agents[0].wait(timeout=300)
    finally:
        open(stop, "w").close()
        for a in agents:
            if a.poll() is None:
                os.killpg(a.pid, signal.SIGKILL)
                a.wait()
    return row("torchrun c10d", rep, s, t_kill, agents[0].returncode, d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainctl", default="build/trainctl")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--impls", default="spare,fewer,torchrun")
    args = ap.parse_args()
    # a SIGTERM (or SIGINT, which a background job ignores) ends the run through the finally
    # clauses: the jobs cancelled, the cluster stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    if not have_slurm():
        sys.exit("node_loss_bench: Slurm is not installed (scripts/install-deps.sh)")
    trainctl = os.path.abspath(args.trainctl)
    impls = args.impls.split(",")
    tmp = tempfile.mkdtemp(prefix="node-loss-bench-")
    cluster = Cluster(os.path.join(tmp, "slurm"), nodes=3).start()
    rows = []
    try:
        for rep in range(args.reps):
            for kind in impls:
                r = run_torchrun(rep, tmp) if kind == "torchrun" else \
                    run_trainctl(trainctl, cluster, kind, rep, tmp)
                print(json.dumps(r), flush=True)
                rows.append(r)
    finally:
        cluster.stop()
    med = {}
    for r in rows:
        med.setdefault(r["impl"], []).append(r["recovery_s"])
    print(f"{'impl':18} {'reps':>4} {'median s':>9} {'min s':>7} {'max s':>7}"
          f" {'to start s':>11} {'start to step s':>16}")
    for k, v in med.items():
        mine = [r for r in rows if r["impl"] == k]
        a = statistics.median(r["to_worker_start_s"] for r in mine)
        b = statistics.median(r["worker_start_to_step_s"] for r in mine)
        print(f"{k:18} {len(v):>4} {statistics.median(v):>9.2f} {min(v):>7.2f} {max(v):>7.2f}"
              f" {a:>11.2f} {b:>16.2f}")
    tr = med.get("torchrun c10d")
    for k, v in med.items():
        if tr and k != "torchrun c10d":
            print(f"torchrun / {k}: {statistics.median(tr) / statistics.median(v):.2f}")


if __name__ == "__main__":
    sys.exit(main())
