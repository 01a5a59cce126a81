"""Helpers of the lost-node tests (test_node_loss.py, test_node_loss_digits.py): a localhost
Slurm cluster of 3 slurmd (n1..n3: a 2-node job and its spare), a node's processes killed as
when its host dies, and what the driver recorded of a node's attempt."""
import json
import os
import signal

import pytest

from conftest import job_id_in, wait_until
from slurm_cluster import module_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from module_cluster(tmp_path_factory, nodes=3)


@pytest.fixture
def slurm_tc(run_tc, cluster):
    def run(*args, env=None, **kw):
        return run_tc(*args, env=dict(env or {}, SLURM_CONF=cluster.conf), **kw)
    return run


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def node_supervisor(job, node):
    """pid of `trainctl supervise-node JOB` running as srun's task `node` (SLURM_NODEID), or None"""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        argv = _read(f"/proc/{name}/cmdline").split(b"\0")
        if b"supervise-node" not in argv or job.encode() not in argv:
            continue
        env = _read(f"/proc/{name}/environ").split(b"\0")
        if f"SLURM_NODEID={node}".encode() in env:
            return int(name)
    return None


def process_tree(pid):
    """pid and every process below it"""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _read(f"/proc/{name}/stat").decode(errors="replace")
        try:
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def kill_node(job, node):
    """SIGKILL node `node`'s supervisor and everything under it at once, as when its host dies"""
    pid = node_supervisor(job, node)
    assert pid, f"no supervise-node {job} for node {node}"
    for p in process_tree(pid):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pid


def node_result(job, attempt, node):
    return json.load(open(os.path.join(job["run_dir"], "attempts", str(attempt), f"node-{node}.json")))


def kill_node_1_when(proc, home, cluster, ready, what):
    """`trainctl run` proc going with home's one job: once ready(job id)'s predicate holds,
    SIGKILL node 1, wait for the run's end; (job id, run's exit, stderr)"""
    try:
        job = wait_until(lambda: job_id_in(home), timeout=120, what="the job's row")
        holds = ready(job)

        def check():
            if proc.poll() is not None:
                raise AssertionError(f"the run ended early: {proc.communicate()}")
            return holds()

        wait_until(check, timeout=240, what=lambda: f"{what}: " + cluster.squeue() + cluster.logs())
        kill_node(job, 1)
        _, err = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return job, proc.returncode, err
