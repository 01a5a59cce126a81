"""Multi-node jobs (docs/hub.md): what their nodes leave behind reaches the
hub, as it does for `trainctl run` jobs.

* A root server's Slurm job whose server was stopped while it ran and
  ended: its supervisors give up waiting (TRAINCTL_HUB_WAIT) and leave their
  journals on the nodes; the restarted server pulls them (srun ... trainctl
  hub JOB --flush, as the job's account) before it records Slurm's end.
* A node's device health finding is a row of device_health with the node's
  name: `trainctl devices` and the server's GET /api/v1/devices show it.
* Nodes with disks of their own rotate their checkpoints by checkpoint.keep
  (the 3-host cluster of test_multihost.py).

Real localhost Slurm clusters (slurm_cluster.py), a real root server and a
real account (server_fixture.py), all removed at the end, also on failure.
"""
import json
import os
import sqlite3
import subprocess

import pytest

from conftest import wait_until
from mhost_cluster import COMPUTE
from mhost_jobs import (ckpt_files, digits_spec, mhost, node_ckpts, node_file, show,  # noqa: F401
                        submit, wait_end)  # (mhost: the fixture)
from server_fixture import start_server
from slurm_cluster import HUB_COUNTER, Cluster, have_slurm, root_slurm_server

STEPS = 30  # per rank before the server stops, and as many after

# the hub tests' two-phase counter (slurm_cluster.py); rank 0 also saves a checkpoint in the
# second half, while the server is away
COUNTER = HUB_COUNTER.replace('print("done", rank', r'''if rank == 0:
    d = os.environ["TRAINCTL_CKPT_DIR"]
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, ".step-%d.tmp" % (2 * STEPS)), "w") as f:
        f.write("weights " * 1000)
    os.rename(os.path.join(d, ".step-%d.tmp" % (2 * STEPS)), os.path.join(d, "step-%d.pt" % (2 * STEPS)))
    time.sleep(3)  # stable for a second, and seen by the driver's scan
print("done", rank''')


def rows(db, sql):
    try:
        with sqlite3.connect(db) as c:
            return c.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []


def points(db, job):
    r = rows(db, f"SELECT COALESCE(SUM(count), 0) FROM metric_chunks c JOIN metric_series s"
                 f" ON s.id = c.series_id WHERE s.job_id = '{job}'")
    return r[0][0] if r else 0


def processes_of(user, job):
    """the account's processes of the job (its supervisors, a flush): by the job's id in
    their command line (a uid reused from an account another test removed may still
    run that test's processes)"""
    p = subprocess.run(["pgrep", "-u", user, "-a"], capture_output=True, text=True)
    return [l for l in p.stdout.splitlines() if job in l]


@pytest.fixture(scope="module")
def rootsrv(trainctl):
    """A root server whose Slurm jobs' supervisors give up on it after 2 s, a
    real account and a localhost cluster, in a folder the account may pass
    through: (srv, user, cluster, base)."""
    with root_slurm_server(trainctl, "tc-mnleft-", "bob",
                           env={"TRAINCTL_HUB_WAIT": "2"}) as (srv, u, cluster, base):
        yield srv, u["bob"], cluster, base


def test_server_stopped_while_its_slurm_job_ends_pulls_what_the_nodes_left(rootsrv):
    srv, user, cluster, base = rootsrv
    db = os.path.join(srv.state, "trainctl.db")
    script = os.path.join(base, "counter.py")
    with open(script, "w") as f:
        f.write(COUNTER.replace("STEPS", str(STEPS)))
    os.chmod(script, 0o644)
    go = os.path.join(base, "go")
    spec = {"name": "pulled", "workdir": "/tmp", "backend": "slurm", "nodes": 2,
            "command": ["/usr/bin/python3", script, go],
            "devices": {"type": "cpu", "per_node": 1}}
    job = srv.submit(spec)
    wait_until(lambda: points(db, job) == 2 * STEPS, timeout=240,
               what=lambda: f"{2 * STEPS} points through the server, have {points(db, job)}: "
               + srv.log()[-2000:] + srv.run_logs(job))
    run_dir, slurm_job = rows(db, f"SELECT run_dir, slurm_job FROM jobs WHERE id = '{job}'")[0]
    # the server stops (its jobs go on), the job ends meanwhile
    srv.stop()
    with open(go, "w") as f:
        f.write("go")

    def slurm_done():
        p = subprocess.run(["squeue", "-h", "-j", slurm_job], env=cluster.env, capture_output=True,
                           text=True)
        return p.returncode == 0 and not p.stdout.strip()

    wait_until(slurm_done, timeout=240, what=lambda: f"Slurm job {slurm_job} over: {cluster.squeue()}")
    # every supervisor gave up waiting (2 s) and left its journal on the node
    journal = os.path.join(run_dir, "journal")
    left = [n for n in os.listdir(journal) if n.endswith(".jsonl")]
    assert left, os.listdir(journal)
    assert points(db, job) == 2 * STEPS
    assert rows(db, f"SELECT state FROM jobs WHERE id = '{job}'")[0][0] == "running"
    assert not processes_of(user, job), processes_of(user, job)
    srv.start()
    j = srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=300)
    # the driver's own end, not Slurm's: it came with the journals
    assert j["state"] == "succeeded", (j["state"], srv.log()[-3000:])
    ev = rows(db, f"SELECT state, reason FROM events WHERE job_id = '{job}' ORDER BY rowid")
    states = [s for s, r in ev if not r.startswith("round: ")]  # a round note is no change
    assert states.count("running") == 1 and states.count("succeeded") == 1, ev
    assert [r for s, r in ev if s == "succeeded"] == ["every worker on every node exited 0"], ev
    log = srv.log()
    assert f"job {job}: Slurm is done with it: taking what its nodes" in log and \
        f"journals, as {user}" in log, log[-3000:]
    # every point once, every worker, the checkpoint rank 0 saved while the server was away
    wait_until(lambda: points(db, job) == 4 * STEPS, timeout=120,
               what=lambda: f"{4 * STEPS} points, have {points(db, job)}: " + srv.log()[-2000:])
    assert sorted(rows(db, f"SELECT attempt, rank FROM workers WHERE job_id = '{job}'")) == [(0, 0), (0, 1)]
    ck = rows(db, f"SELECT name, step, state FROM checkpoints WHERE job_id = '{job}'")
    assert ck == [(f"step-{2 * STEPS}.pt", 2 * STEPS, "complete")], ck
    p = srv.cli("ckpt", "list", job)
    assert f"step-{2 * STEPS}.pt" in p.stdout, p.stdout + p.stderr
    # sent to their ends, and the flush ran as the account (its files, its processes)
    wait_until(lambda: all(n.endswith(".jsonl.done") for n in os.listdir(journal)), timeout=120,
               what=lambda: f"every journal sent: {os.listdir(journal)}")
    wait_until(lambda: f"job {job}: the nodes' journals: taken" in srv.log(), timeout=240,
               what=lambda: "the flush's end in the server's log: " + srv.log()[-3000:])
    assert not [n for n in os.listdir(os.path.join(srv.state, "hub")) if n.endswith(".pull.out")]
    # the node processes are gone (the flush too), none of them left waiting
    wait_until(lambda: not processes_of(user, job), timeout=120,
               what=lambda: f"no process of {user}: {processes_of(user, job)}")
    p = subprocess.run(["squeue", "-h", "-u", user], env=cluster.env, capture_output=True, text=True)
    assert not p.stdout.strip(), p.stdout


# ---- a node's device health ----


def test_a_nodes_bad_device_is_in_devices_with_the_nodes_name(trainctl, home, tmp_path, nvml):
    """nodes: 2, one GPU each; node n2's GPU fails its check: the job fails, and the hub
    (the foreground run) records the device as n2's in device_health: `trainctl devices`
    and the server's API show it, and the submit host's own devices stay as they are."""
    if not have_slurm():
        pytest.fail("Slurm is not installed (scripts/install-deps.sh)", pytrace=False)
    _, env = nvml
    (tmp_path / "nvml-.conf").write_text("count 1\n")    # the submitting host
    (tmp_path / "nvml-n1.conf").write_text("count 1\n")
    (tmp_path / "nvml-n2.conf").write_text("count 1\n0 remap_pending\n")
    env = dict(env, TRAINCTL_FAKE_NVML=str(tmp_path / "nvml-{node}.conf"))
    full = dict(os.environ, TRAINCTL_HOME=str(home), TRAINCTL_HUB_LISTEN="127.0.0.1")
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    spec = tmp_path / "job.yaml"
    spec.write_text("""
name: sick-n2
command: ["sh", "-c", "echo ran on $SLURMD_NODENAME"]
devices: {type: gpu, per_node: 1}
nodes: 2
backend: slurm
slurm: {gres: none}
""")
    cluster = Cluster(tmp_path / "slurm").start()
    try:
        full["SLURM_CONF"] = str(cluster.conf)
        p = subprocess.run([str(trainctl), "run", str(spec)], env=full, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode != 0, p.stdout + p.stderr
        db = os.path.join(home, "trainctl.db")
        (job, state), = rows(db, "SELECT id, state FROM jobs")
        assert state == "failed", (state, p.stderr + cluster.logs())
        sick = rows(db, "SELECT node, device_type, device_id, reason, job_id FROM device_health")
        assert sick == [("n2", "gpu", 0, "row remapping pending (reset the GPU)", job)], sick
        # the CLI on the submit host: its own GPU is fine, n2's is not
        p = subprocess.run([str(trainctl), "devices"], env=full, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        assert f"node n2: gpu 0: row remapping pending (reset the GPU) (found by job {job})" \
            in p.stdout, p.stdout
        p = subprocess.run([str(trainctl), "devices", "--json", "--health"], env=full,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        devs = json.loads(p.stdout)
        assert [d for d in devs if d.get("node")] == [
            {"type": "gpu", "id": 0, "node": "n2", "health": "row remapping pending (reset the GPU)",
             "since": devs[-1]["since"], "job": job}], devs
        assert [d["health"] for d in devs if d["type"] == "gpu" and not d.get("node")] == ["ok"], devs
        # the server's devices API, on the same state folder
        srv = start_server(trainctl, home, fake="gpu:1")
        try:
            st, body = srv.call("GET", "/api/v1/devices")
            assert st == 200, body
            assert [(n["node"], n["type"], n["id"], n["unhealthy"], n["job"]) for n in body["nodes"]] \
                == [("n2", "gpu", 0, "row remapping pending (reset the GPU)", job)], body
            assert all("unhealthy" not in d for d in body["devices"]), body
        finally:
            srv.stop()
    finally:
        cluster.stop()


# ---- checkpoint.keep on every node's own disk (the 3-host cluster) ----

def test_every_node_keeps_its_newest_checkpoints(mhost, torch_available):  # noqa: F811
    """2 hosts x 2 ranks, every node saves on its own disk, keep: 2, 5 epochs: each node
    ends with the newest 2; node 1's supervisor removed the older ones itself and the hub
    has them as removed (the driver rotates node 0's disk, its own host's)"""
    job = "digits-keep"
    proc = submit(mhost, digits_spec(mhost, job, epochs=5, args=", ckpt-every-node: null",
                                     extra="checkpoint: {keep: 2}\n"))
    rc, out, err = wait_end(mhost, proc)
    assert rc == 0, err + mhost.logs()
    j = show(mhost, job)
    assert j["state"] == "succeeded", j
    for h in COMPUTE:
        assert ckpt_files(mhost, job, h) == ["epoch-4.pt", "epoch-5.pt"], (h, ckpt_files(mhost, job, h))
    nodes = node_ckpts(mhost, job)
    assert [nodes.get((1, s)) for s in range(1, 6)] == ["removed"] * 3 + ["complete"] * 2, nodes
    # node 0's own records of its disk agree with what the driver removed there, even a
    # removal after node 0's attempt ended (its own last scan could no longer see it)
    assert [nodes.get((0, s)) for s in range(1, 6)] == ["removed"] * 3 + ["complete"] * 2, nodes
    # node 0's disk is the driver's: the job's own rows say what it removed (its last
    # removal may come after node 0's attempt ended, so its own rows can lag)
    p = mhost.tc("login", "ckpt", "list", job, timeout=120)
    states = {l.split()[0]: l.split()[2] for l in p.stdout.splitlines()[1:] if l.split()}
    assert all(states.get(str(s)) == "removed" for s in (1, 2, 3)), p.stdout
    sup = node_file(mhost, job, "login", "logs/supervisor-node1.log").read_text()
    assert "node 1: checkpoint epoch-1.pt (step 1) removed from this node's disk: keeping the newest 2" \
        in sup, sup[-3000:]
    # the driver's host: rotated by the driver (the job's rows), not twice
    sup0 = node_file(mhost, job, "login", "logs/supervisor-node0.log").read_text()
    assert "removed from this node's disk" not in sup0, sup0[-3000:]
