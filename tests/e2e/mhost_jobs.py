"""The multi-host cluster as a pytest fixture, and the jobs the tests run on
it (test_multihost.py, test_multinode_leftovers.py, test_endpoint_relay.py,
test_watchdog_multinode.py, test_mhost_node_loss.py): digits across the hosts through the foreground
`trainctl run` on login, its JSON, the files and checkpoints on each host's
own disk, the processes of a host's namespace."""
import json
import os
import subprocess
from collections import Counter

import pytest

from conftest import DIGITS, ENV_DUMP
from mhost_cluster import COMPUTE, MultiHostCluster, TRAINCTL_HOME, have_multihost


@pytest.fixture(scope="module")
def mhost(trainctl):
    why = have_multihost()
    if why:
        pytest.fail(f"the multi-host cluster cannot run here: {why}", pytrace=False)
    c = MultiHostCluster(trainctl).start()
    try:
        yield c
    finally:
        c.stop()
    assert not c.leftovers(), c.leftovers()


# ---- jobs across the hosts, through the hub (the foreground `trainctl run` on login) ----


def hub_env(mhost):
    """where the foreground `trainctl run` on login listens for the nodes"""
    return {"TRAINCTL_HUB_LISTEN": mhost.addr("login")}


def digits_spec(mhost, name, epochs, restarts=0, sleep=0.05, args="", extra=""):
    return mhost.write("login", f"/tmp/home/specs/{name}.yaml", f"""
name: {name}
command: 'mkdir -p "$ENV_DUMP_DIR" && /usr/bin/python3 {ENV_DUMP} && exec /usr/bin/python3 {DIGITS}/train.py "$@"'
workdir: {DIGITS}
args: {{epochs: {epochs}, sleep-per-step: {sleep}, seed: 1234{args}}}
devices: {{type: cpu, per_node: 2}}
env: {{OMP_NUM_THREADS: "1", ENV_DUMP_DIR: /tmp/env/{name}}}
nodes: 2
backend: slurm
restart: {{max_restarts: {restarts}, grace_seconds: 5}}
{extra}""")


def submit(mhost, spec):
    """`trainctl run` on login, in the background (its pid is trainctl's own)"""
    return mhost.popen("login", [mhost.trainctl, "run", "--quiet", spec], env=hub_env(mhost))


def host_of(rank):
    return COMPUTE[rank // 2]


def rank_pid(mhost, rank):
    """the pid of the python worker of global rank `rank`, on its host"""
    for pid in ns_pids(mhost, host_of(rank)):
        cmd, env = proc_file(pid, "cmdline"), proc_file(pid, "environ")
        if f"RANK={rank}".encode() in env and any(a.endswith(b"train.py") for a in cmd) \
                and b"python" in cmd[0]:
            return pid
    return None


def log_points(text, rank):
    """the metric points a worker printed (its DLLL lines), as trainctl records them"""
    points = Counter()
    for line in text.splitlines():
        if not line.startswith("DLLL "):
            continue
        rec = json.loads(line[5:])
        if rec.get("type") != "LOG" or not isinstance(rec.get("step"), list):
            continue
        for k, v in rec["data"].items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                points[(rank, k, tuple(rec["step"]), round(float(v), 9))] += 1
    return points


def db_points(mhost, job):
    p = mhost.tc("login", "metrics", job, "--format", "json", timeout=120)
    assert p.returncode == 0, p.stderr
    return Counter((m["rank"], m["metric"], tuple(json.loads(m["step"])), round(float(m["value"]), 9))
                   for m in json.loads(p.stdout))


def while_running(proc, pred):
    """pred() while the foreground run is alive; its failure, at once, when it is gone"""
    def check():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"trainctl run ended ({proc.returncode}) first: {err[-3000:]}")
        return pred()
    return check


def show(mhost, job):
    p = mhost.tc("login", "show", job, "--json", timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def try_show(mhost, job):
    p = mhost.tc("login", "show", job, "--json", timeout=120)
    return json.loads(p.stdout) if p.returncode == 0 else None


def node_file(mhost, job, host, rel):
    """a file of the job's run folder on host's own disk (None while it is not there)"""
    j = try_show(mhost, job)
    if not j:
        return None
    f = mhost.path(host, f"{j['run_dir']}/{rel}")
    return f if f.exists() else None


def ns_pids(mhost, host):
    p = subprocess.run(["ip", "netns", "pids", mhost.ns(host)], capture_output=True, text=True)
    return [int(x) for x in p.stdout.split()]


def proc_file(pid, name):
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def assert_db_only_on_login(mhost):
    assert mhost.path("login", f"{TRAINCTL_HOME}/trainctl.db").exists()
    for h in COMPUTE:
        home = mhost.path(h, TRAINCTL_HOME)
        dbs = [str(p) for p in home.rglob("*.db*")]
        assert not dbs, (h, dbs)


def wait_end(mhost, proc, timeout=400):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


# ---- checkpoints on the nodes' own disks ----


def node_ckpts(mhost, job):
    """`ckpt list --nodes` on login: {(node, step): state} ({} before the job is recorded)"""
    p = mhost.tc("login", "ckpt", "list", "--nodes", job, timeout=120)
    rows = {}
    if p.returncode != 0:
        assert "no job" in p.stderr, p.stderr
        return rows
    for line in p.stdout.splitlines()[1:]:
        cells = line.split()
        if len(cells) >= 8 and cells[0].isdigit():
            rows[(int(cells[0]), int(cells[1]))] = cells[3]
    return rows


def ckpt_files(mhost, job, host):
    d = node_file(mhost, job, host, "output/checkpoints")
    return sorted(n for n in os.listdir(d) if n.endswith(".pt")) if d else []
