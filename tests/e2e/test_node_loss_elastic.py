"""An elastic job after a lost node (docs/slurm.md, "Fewer nodes"): the
attempt on fewer nodes gets the `parallel: auto` plan for its own node
count, the node left out is given back to Slurm (the running job shrunk),
and below nodes.min the job waits for a node to be usable again, up to
nodes.wait, or fails with the reason.

On a localhost Slurm cluster of its own (slurm_cluster.py: slurmd n1, n2,
n3 on one host). A node is lost as in test_node_loss.py (its supervisor's
tree SIGKILLed); a node is made unusable for real by stopping its slurmd,
and usable again by starting it. Every wait is on a condition."""
import json
import contextlib
import os
import signal
import subprocess

import pytest

from conftest import alive, job_id_in, notes, poll, rank_log, show, wait_until
from node_loss_helpers import kill_node, node_supervisor
from slurm_cluster import module_cluster, slurm_tc  # noqa: F401 (a fixture)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from module_cluster(tmp_path_factory, nodes=3)


# Each rank says its attempt, rank and plan; the first attempt then waits (the kill comes
# then); later attempts say so and end once the test lets them (the file GO exists).
WORKER = ('echo "attempt $TORCHELASTIC_RESTART_COUNT rank $RANK of $WORLD_SIZE'
          ' plan $TRAINCTL_DP $TRAINCTL_TP $TRAINCTL_PP";'
          ' if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then echo ready; exec sleep 300; fi;'
          ' echo again; i=0; while [ ! -e "$GO" ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done')


def start(trainctl, cluster, tmp_path, home, name, nodes, per_node=1, extra=""):
    go = tmp_path / f"{name}.go"
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(f"""
name: {name}
command: '{WORKER}'
env: {{GO: "{go}"}}
devices: {{type: cpu, per_node: {per_node}}}
nodes: {nodes}
backend: slurm
restart: {{max_restarts: 2, grace_seconds: 3}}
slurm: {{extra: ["--nodes=2"]}}
{extra}""")
    env = dict(os.environ, SLURM_CONF=str(cluster.conf), TRAINCTL_HOME=str(home))
    return subprocess.Popen([str(trainctl), "run", "-q", str(spec)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), go


@contextlib.contextmanager
def running(cluster, proc):
    """the run's end, and the cluster as it was: a stopped slurmd (down["host"]) started again"""
    down = {"host": None}
    try:
        yield down
    finally:
        if down["host"]:
            start_slurmd(cluster, down["host"])
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _log(job, rank):
    try:
        return rank_log(job, rank)
    except OSError:
        return ""


def first_attempt(proc, slurm_tc, cluster, home, ranks):
    """the job's id once each of `ranks` runs its first attempt and node 1's supervisor is there"""
    job = wait_until(lambda: job_id_in(home), timeout=120, what="the job's row")

    def ready():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early: {proc.communicate()}")
        j = show(slurm_tc, job)
        return all("ready" in _log(j, r) for r in ranks) and node_supervisor(job, 1)

    wait_until(ready, timeout=240, what=lambda: "the first attempt: " + cluster.squeue()
               + cluster.logs())
    return job


def finish(proc, timeout=400):
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def scontrol_job(cluster, sid):
    p = subprocess.run(["scontrol", "-o", "show", "job", sid], env=cluster.env,
                       capture_output=True, text=True)
    return dict(f.split("=", 1) for f in p.stdout.split() if "=" in f)


def node_state(cluster, name):
    p = subprocess.run(["sinfo", "-h", "-N", "-n", name, "-o", "%t"], env=cluster.env,
                       capture_output=True, text=True)
    return p.stdout.strip()


def running_reasons(j):
    return [e["reason"] for e in j["events"] if e["state"] == "running" and "kind" not in e]


def test_fewer_nodes_replans_and_gives_the_node_back(slurm_tc, cluster, tmp_path, home, trainctl):
    # nodes {min: 1, max: 2}, 2 workers a node, parallel: auto; node 1 lost -> the restart
    # runs on one node with the planner's plan for one node, and n2 is given back to Slurm
    par = "parallel: {strategy: auto, model: gpt2-small, global_batch: 16}\n"
    proc, go = start(trainctl, cluster, tmp_path, home, "replan", "{min: 1, max: 2}", per_node=2,
                     extra=par)
    with running(cluster, proc):
        job = first_attempt(proc, slurm_tc, cluster, home, (0, 2))
        kept, lost = node_host(job, 0), node_host(job, 1)
        kill_node(job, 1)
        wait_until(lambda: "again" in _log(show(slurm_tc, job), 0), timeout=240,
                   what=lambda: "the restart on one node: " + str(show(slurm_tc, job)["events"]))
        j = show(slurm_tc, job)
        # the job holds node 0's host alone now, and the lost one is free for others
        sj = scontrol_job(cluster, str(j["slurm"]["job"]))
        assert sj.get("NodeList") == kept and sj.get("NumNodes") == "1", sj
        assert poll(lambda: node_state(cluster, lost) == "idle", 60, 0.3), node_state(cluster, lost)
        go.write_text("")
        rc, err = finish(proc)
    assert rc == 0, err + cluster.logs()
    j = show(slurm_tc, job)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j["events"]

    def planned(devices, nodes):
        p = slurm_tc("plan", "strategy", "--model", "gpt2-small", "--devices", str(devices),
                     "--nodes", str(nodes), "--global-batch", "16", "--format", "json")
        assert p.returncode == 0, p.stderr
        c = json.loads(p.stdout)["candidates"][0]
        return c["dp"], c["tp"], c["pp"]

    two, one = planned(4, 2), planned(2, 1)
    assert two != one, (two, one)  # else the test could not tell them apart
    for r in (0, 1):
        log = rank_log(j, r)
        assert f"attempt 0 rank {r} of 4 plan {two[0]} {two[1]} {two[2]}" in log, log
        assert f"attempt 1 rank {r} of 2 plan {one[0]} {one[1]} {one[2]}" in log, log
    started = running_reasons(j)
    assert len(started) == 2, started
    assert f"node 1 ({lost}) left out, no spare left: going on with 1 node" in started[1], started
    assert f"{lost} released from the allocation" in started[1], started
    assert f"plan dp={one[0]} tp={one[1]} pp={one[2]} for 1 node" in started[1], started
    assert poll(cluster.nodes_idle, 120, 0.3), cluster.squeue()


def node_host(job, node):
    """the Slurm node (SLURMD_NODENAME) node `node`'s supervisor runs on"""
    pid = node_supervisor(job, node)
    env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    return next(v.split(b"=", 1)[1].decode() for v in env if v.startswith(b"SLURMD_NODENAME="))


def slurmd_pid(cluster, name):
    return int((cluster.root / f"slurmd-{name}.pid").read_text().strip())


def stop_slurmd(cluster, name):
    """stop node `name`'s slurmd (its host gone for Slurm): SIGTERM, until it is gone"""
    pid = slurmd_pid(cluster, name)
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not alive(pid), timeout=60, what=f"slurmd {name} to stop")


def start_slurmd(cluster, name):
    p = subprocess.run(["slurmd", "-f", str(cluster.conf), "-N", name], env=cluster.env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    wait_until(lambda: node_state(cluster, name).rstrip("*") in ("idle", "alloc", "mix")
               and not node_state(cluster, name).endswith("*"), timeout=120,
               what=lambda: f"slurmd {name} back: {node_state(cluster, name)}")


def lose_node_and_its_slurmd(job, cluster):
    """node 1's host gone: its slurmd stopped, its supervisor's tree SIGKILLed; its name"""
    host = node_host(job, 1)
    stop_slurmd(cluster, host)
    kill_node(job, 1)
    return host


def test_below_min_waits_for_the_node_to_come_back(slurm_tc, cluster, tmp_path, home, trainctl):
    # nodes {min: 2, max: 3} on 2 nodes: node 1's host goes away, so the restart would be
    # below min: the job waits (a wait_nodes event) until the node is usable again, then
    # runs on both nodes
    proc, go = start(trainctl, cluster, tmp_path, home, "waits", "{min: 2, max: 3, wait: 5m}")
    with running(cluster, proc) as down:
        job = first_attempt(proc, slurm_tc, cluster, home, (0, 1))
        host = down["host"] = lose_node_and_its_slurmd(job, cluster)
        waiting = wait_until(lambda: notes(show(slurm_tc, job), "wait_nodes"), timeout=240,
                             what=lambda: "the wait for nodes: " + str(show(slurm_tc, job)["events"]))
        assert waiting[0]["reason"] == (
            f"wait_nodes: node 1 ({host}) is left out and no spare is left: 1 node up, nodes.min"
            f" is 2; waiting up to 5m for {host} to be usable again"), waiting
        # the driver looked and found the node not usable (a step on it fails, or Slurm says it
        # does not respond); still waiting: nothing started without the node
        log = os.path.join(show(slurm_tc, job)["run_dir"], "logs", "supervisor.log")
        wait_until(lambda: f"{host} is not usable yet: " in open(log).read(), timeout=120,
                   what=lambda: "a look at the node: " + open(log).read())
        assert len(running_reasons(show(slurm_tc, job))) == 1
        start_slurmd(cluster, host)
        down["host"] = None
        wait_until(lambda: all("again" in _log(show(slurm_tc, job), r) for r in (0, 1)),
                   timeout=240, what=lambda: "the restart on both nodes: "
                   + str(show(slurm_tc, job)["events"]))
        go.write_text("")
        rc, err = finish(proc)
    assert rc == 0, err + cluster.logs()
    j = show(slurm_tc, job)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j["events"]
    started = running_reasons(j)
    assert len(started) == 2 and started[1].startswith("restart 1 of 2: 2 workers started on 2 nodes"), running
    assert f"{host} usable again after a wait for nodes" in started[1], started
    assert "attempt 1 rank 1 of 2" in rank_log(j, 1), rank_log(j, 1)
    assert poll(cluster.nodes_idle, 120, 0.3), cluster.squeue()


def test_below_min_fails_when_the_wait_ends(slurm_tc, cluster, tmp_path, home, trainctl):
    proc, _ = start(trainctl, cluster, tmp_path, home, "waitsout", "{min: 2, max: 3, wait: 15s}")
    with running(cluster, proc) as down:
        job = first_attempt(proc, slurm_tc, cluster, home, (0, 1))
        host = down["host"] = lose_node_and_its_slurmd(job, cluster)
        rc, err = finish(proc)
    assert rc == 1, err
    j = show(slurm_tc, job)
    assert j["state"] == "failed", j["events"]
    assert notes(j, "wait_nodes"), j["events"]
    assert j["root_cause"].startswith(f"waited 15s for nodes: 1 node up, nodes.min is 2 ({host}: "), \
        j["root_cause"]
    assert poll(cluster.nodes_idle, 180, 0.3), cluster.squeue()


def test_nodes_wait_must_be_a_duration(run_tc, tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("command: [true]\nbackend: slurm\nnodes: {min: 1, max: 2, wait: 5}\n")
    p = run_tc("run", spec)
    assert p.returncode == 2, p.stderr
    assert "bad.yaml:3: nodes.wait: must be a duration" in p.stderr, p.stderr
