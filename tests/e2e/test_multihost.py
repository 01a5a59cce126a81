"""backend: slurm across hosts that share no filesystem: a real multi-host
cluster on one machine (mhost_cluster.py: login + c1 + c2, each a network,
mount and UTS namespace with its own private /tmp holding $TRAINCTL_HOME),
started once for the module and deleted at its end, also when a test fails.

Needs root (namespaces); a machine where it cannot run fails the module
with the reason (scripts/install-deps.sh installs what it needs)."""
import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

from conftest import REPO, wait_until
from mhost_cluster import COMPUTE, HOSTS, MultiHostCluster, TRAINCTL_HOME, _netns_list, cleanup_leftovers
from mhost_jobs import (assert_db_only_on_login, ckpt_files, db_points, digits_spec, host_of,  # noqa: F401
                        hub_env, log_points, mhost, node_ckpts, node_file, ns_pids, proc_file,
                        rank_pid, show, submit, try_show, wait_end,
                        while_running)  # (mhost: the fixture)


def test_srun_runs_on_both_compute_hosts(mhost):
    p = mhost.run("login", ["srun", "-N2", "--ntasks-per-node=1", "-l", "sh", "-c",
                            'echo "$(hostname) $SLURMD_NODENAME $(ip -4 -o addr show eth0)"'],
                  timeout=120)
    assert p.returncode == 0, p.stderr + mhost.logs()
    lines = sorted(l.split(": ", 1)[1] for l in p.stdout.splitlines())
    assert len(lines) == 2, p.stdout
    for host, line in zip(COMPUTE, lines):
        name, node, addr = line.split(" ", 2)
        assert (name, node) == (host, host) and f"inet {mhost.addr(host)}/24" in addr, line


def test_each_host_has_its_own_state(mhost, trainctl):
    mark = f"mark-{uuid.uuid4().hex}"
    p = mhost.run("login", ["srun", "-N2", "--ntasks-per-node=1", "sh", "-c",
                            f'mkdir -p "$TRAINCTL_HOME" && hostname > "$TRAINCTL_HOME/{mark}"'],
                  timeout=120)
    assert p.returncode == 0, p.stderr + mhost.logs()
    for h in COMPUTE:
        assert mhost.path(h, f"{TRAINCTL_HOME}/{mark}").read_text() == f"{h}\n"
    assert not mhost.path("login", f"{TRAINCTL_HOME}/{mark}").exists()
    assert not Path(TRAINCTL_HOME, mark).exists()  # the machine's own /tmp neither
    # a job on the login host: its database is there and only there
    p = mhost.tc("login", "run", "--quiet", "--name", "local", "--", "/bin/sh", "-c", "echo hi",
                 timeout=120)
    assert p.returncode == 0, p.stderr
    assert mhost.path("login", f"{TRAINCTL_HOME}/trainctl.db").exists()
    for h in COMPUTE:
        assert not mhost.path(h, f"{TRAINCTL_HOME}/trainctl.db").exists()
    # only the repository (binary, workdir), the binary and Slurm's config are shared, read-only
    for path in (REPO / "tests" / "e2e", mhost.shared):
        p = mhost.run("c1", ["touch", path / mark])
        assert p.returncode != 0 and "Read-only file system" in p.stderr, (path, p.stderr)
    assert mhost.run("c1", [trainctl, "--version"]).returncode == 0


def test_network_exists_only_between_the_hosts(mhost):
    for h in HOSTS:
        routes = mhost.run(h, ["ip", "-4", "route"], check=True).stdout.splitlines()
        assert len(routes) == 1 and routes[0].startswith("10.87.0.0/24 dev eth0"), (h, routes)
        names = mhost.run(h, ["getent", "hosts", "login"], check=True).stdout.split()
        assert names[0] == mhost.addr("login"), names
        assert sorted(os.listdir(mhost.path(h, "/sys/class/net"))) == ["eth0", "lo"]
    mine = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    assert "10.87.0." not in mine


def test_teardown_leaves_nothing(trainctl):
    # a crashed run's leftovers (a pid that is gone) are deleted by the next start
    dead = subprocess.Popen(["true"])
    dead.wait()
    ns = f"tcmh{dead.pid}-1-login"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    left = Path(f"/var/tmp/tcmh{dead.pid}-1")
    left.mkdir(exist_ok=True)
    c = MultiHostCluster(trainctl)
    c.start()
    try:
        assert ns not in _netns_list() and not left.exists()
        assert c.leftovers() and c.nodes_idle()
    finally:
        c.stop()
    assert not c.leftovers(), c.leftovers()
    cleanup_leftovers()


# ---- jobs across the hosts, through the hub (the foreground `trainctl run` on login) ----


ENDED = ("succeeded", "failed", "killed", "lost")


def assert_hub_private(mhost, job):
    """The job's secret reaches the nodes through the environment only (not argv, not the
    batch script); the hub listens on login's address only."""
    secrets = {v.split(b"=", 1)[1] for h in COMPUTE for pid in ns_pids(mhost, h)
               for v in proc_file(pid, "environ") if v.startswith(b"TRAINCTL_HUB_SECRET=")}
    assert len(secrets) == 1, f"one secret for the job's supervisors, not {len(secrets)}"
    secret = secrets.pop()
    for h in HOSTS:
        for pid in ns_pids(mhost, h):
            assert not any(secret in a for a in proc_file(pid, "cmdline")), (h, pid)
    sbatch = node_file(mhost, job, "login", "job.sbatch")
    assert sbatch and secret.decode() not in sbatch.read_text()
    # nor in any file: journals, run folders, the database (which keeps its hash)
    for h in HOSTS:
        for f in mhost.path(h, TRAINCTL_HOME).rglob("*"):
            if f.is_file():
                assert secret not in f.read_bytes(), (h, f)
    ss = mhost.run("login", ["ss", "-Hltnp"], check=True).stdout
    hub = [l for l in ss.splitlines() if '"trainctl"' in l]
    assert hub and all(l.split()[3].startswith(mhost.addr("login") + ":") for l in hub), ss


def worker_points(mhost, job):
    """every point of every rank, read from the rank logs on the nodes' own disks"""
    total = Counter()
    for r in range(4):
        f = node_file(mhost, job, host_of(r), f"logs/rank-{r}.log")
        assert f, f"no rank-{r}.log on {host_of(r)}"
        total += log_points(f.read_text(), r)
    return total


def assert_exactly_once(mhost, job):
    """every point the workers printed is in the database once, and nothing else"""
    want, got = worker_points(mhost, job), db_points(mhost, job)
    missing, extra = want - got, got - want
    assert not missing and not extra, (f"{sum(want.values())} points printed, {sum(got.values())} "
                                       f"recorded; missing {list(missing)[:5]}, extra {list(extra)[:5]}")
    # checkpoint records: one per file rank 0 wrote (on c1's disk), each once
    files = sorted(int(m.group(1)) for n in os.listdir(node_file(mhost, job, "c1", "output/checkpoints"))
                   if (m := re.fullmatch(r"epoch-(\d+)\.pt", n)))
    listed = mhost.tc("login", "ckpt", "list", job, check=True).stdout.splitlines()[1:]
    steps = [int(l.split()[0]) for l in listed]
    assert steps == files, (steps, files)


def ended(mhost, job):
    j = try_show(mhost, job)
    return j if j and j["state"] in ENDED else None


def test_digits_across_hosts_restart_and_resume(mhost, torch_available):
    """test 1: 2 hosts x 2 ranks over gloo; rank 3 (c2) killed after a checkpoint; every
    node restarts and resumes; login sees everything, logs -f included"""
    job = "digits-mh"
    # every node keeps its own copy of each checkpoint (disks are the nodes' own);
    # an epoch lasts ~4 s, so that rank 3 dies while both nodes have epoch 1 only
    proc = submit(mhost, digits_spec(mhost, job, epochs=4, restarts=1, sleep=0.3,
                                     args=", ckpt-every-node: null"))
    # follow the logs from login while it runs
    wait_until(while_running(proc, lambda: try_show(mhost, job)), 120, "the job recorded on login")
    follow = mhost.popen("login", [mhost.trainctl, "logs", job, "-f"])

    def ckpts(host):
        d = node_file(mhost, job, host, "output/checkpoints")
        return sorted(n for n in os.listdir(d) if n.endswith(".pt")) if d else []

    pid = wait_until(while_running(proc, lambda: all(ckpts(h) == ["epoch-1.pt"] for h in COMPUTE)
                                   and rank_pid(mhost, 3)), 300,
                     lambda: f"epoch 1 on both nodes, rank 3: {ckpts('c1')} {ckpts('c2')}"
                     + mhost.logs())
    assert_hub_private(mhost, job)
    os.kill(pid, signal.SIGKILL)
    assert ckpts("c1") == ckpts("c2") == ["epoch-1.pt"]  # still: the kill came in epoch 2
    rc, out, err = wait_end(mhost, proc)
    assert rc == 0, err + mhost.logs()
    fout, ferr = follow.communicate(timeout=120)  # -f ends with the job
    assert follow.returncode == 0, ferr
    j = show(mhost, job)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j
    restart = [e for e in j["events"] if e["state"] == "restarting"]
    assert len(restart) == 1 and "node 1" in restart[0]["reason"] \
        and "rank 3 was killed by signal 9" in restart[0]["reason"], restart
    running = [e["reason"] for e in j["events"] if e["state"] == "running"]
    assert any("restart 1 of 1" in r and "resuming from" in r for r in running), running
    # rendezvous through Slurm/the hub: every rank met c1's address, each on its own host
    for r in range(4):
        env = json.loads(mhost.path(host_of(r), f"/tmp/env/{job}/rank-{r}.json").read_text())
        assert env["MASTER_ADDR"] == mhost.addr("c1") and env["SLURMD_NODENAME"] == host_of(r)
    # everything of both nodes, seen from login: logs (also -f), metrics, checkpoints
    for r in range(4):
        text = mhost.tc("login", "logs", job, "--rank", r, check=True).stdout
        assert re.search(r"resumed from \S+ at epoch [1-9]", text), (r, text[-500:])
        assert f"[{r}] DLLL " in fout, (r, fout[-2000:], ferr[-2000:])
    assert_exactly_once(mhost, job)
    assert_db_only_on_login(mhost)


def test_hub_killed_and_restarted(mhost, torch_available):
    """test 2: the hub (the foreground run) SIGKILLed mid-job, then started again: every
    state change, point and checkpoint record in the database exactly once"""
    job = "digits-hubkill"
    proc = submit(mhost, digits_spec(mhost, job, epochs=5))
    wait_until(while_running(proc, lambda: try_show(mhost, job) and sum(db_points(mhost, job).values())),
               300, lambda: "points on login: " + mhost.logs())
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    # the job goes on without its hub: a checkpoint is written while it is down
    wait_until(lambda: node_file(mhost, job, "c1", "output/checkpoints/epoch-2.pt"), 300,
               "epoch 2 on c1 while the hub is down")
    hub = mhost.popen("login", [mhost.trainctl, "hub", job], env=hub_env(mhost))
    try:
        j = wait_until(lambda: ended(mhost, job), 400, lambda: "the job's end: " + mhost.logs())
        assert j["state"] == "succeeded", j
        hub.communicate(timeout=120)  # it exits once the job is final and every node acked
    finally:
        if hub.poll() is None:
            hub.kill()
            hub.communicate()
    states = [e["state"] for e in j["events"] if "kind" not in e]  # notes (a round) are no change
    assert states.count("running") == 1 and states.count("succeeded") == 1, states
    assert_exactly_once(mhost, job)


def test_compute_link_down_10s(mhost, torch_available):
    """test 3: c2's cable out for 10 s mid-job: the job survives, nothing lost or doubled"""
    job = "digits-linkdown"
    proc = submit(mhost, digits_spec(mhost, job, epochs=5, restarts=1))
    wait_until(while_running(proc, lambda: node_file(mhost, job, "c1", "output/checkpoints/epoch-1.pt")),
               300, lambda: "epoch 1: " + mhost.logs())
    mhost.link("c2", False)
    try:
        time.sleep(10)  # the outage itself is what is tested, not a wait for something
    finally:
        mhost.link("c2", True)
    rc, out, err = wait_end(mhost, proc)
    assert rc == 0, err + mhost.logs()
    j = show(mhost, job)
    assert j["state"] == "succeeded", j
    assert_exactly_once(mhost, job)


def test_terminal_closed_job_completes(mhost, torch_available):
    """test 4: `trainctl run --backend slurm` killed; the job finishes; later ps and show on
    login report it complete with all its metrics"""
    job = "digits-noterm"
    proc = submit(mhost, digits_spec(mhost, job, epochs=3))
    wait_until(while_running(proc, lambda: rank_pid(mhost, 0) and rank_pid(mhost, 3)), 300,
               lambda: "the workers: " + mhost.logs())
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)

    def done_on_nodes():
        for r in range(4):
            f = node_file(mhost, job, host_of(r), f"logs/rank-{r}.log")
            if not f or '"train.time"' not in f.read_text():
                return False
        return True

    wait_until(done_on_nodes, 400, "every worker's last record on its node")
    ps = mhost.tc("login", "ps", check=True).stdout
    assert job in ps, ps
    j = wait_until(lambda: ended(mhost, job), 300, lambda: "the end on login: " + mhost.logs())
    assert j["state"] == "succeeded", j
    ps = mhost.tc("login", "ps", check=True).stdout
    assert re.search(rf"{job}.*succeeded|succeeded.*{job}", ps), ps
    assert_exactly_once(mhost, job)


# ---- checkpoints on the nodes' own disks: every node's records reach the hub ----


def resumed_from(j):
    running = [e["reason"] for e in j["events"] if e["state"] == "running"]
    r = [x for x in running if "restart 1 of 1" in x]
    assert len(r) == 1 and "resuming from " in r[0], running
    return r[0].split("resuming from ", 1)[1]


def test_only_rank0_saves_and_every_node_resumes(mhost, torch_available):
    """digits as it comes: rank 0 alone saves, on c1's disk; c2 writes no checkpoint, so it
    does not count against the resume (only nodes that write checkpoints do): the restart
    resumes from c1's newest, and c2's ranks get rank 0's copy"""
    job = "digits-rank0"
    proc = submit(mhost, digits_spec(mhost, job, epochs=3, restarts=1, sleep=0.3))
    pid = wait_until(while_running(proc, lambda: ckpt_files(mhost, job, "c1") == ["epoch-1.pt"]
                                   and rank_pid(mhost, 3)), 300,
                     lambda: f"epoch 1 on c1, rank 3: {ckpt_files(mhost, job, 'c1')}" + mhost.logs())
    wait_until(while_running(proc, lambda: node_ckpts(mhost, job).get((0, 1)) == "complete"), 120,
               lambda: f"node 0's record of epoch 1 on login: {node_ckpts(mhost, job)}")
    os.kill(pid, signal.SIGKILL)
    rc, out, err = wait_end(mhost, proc)
    assert rc == 0, err + mhost.logs()
    j = show(mhost, job)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j
    assert resumed_from(j).endswith("/epoch-1.pt"), j["events"]
    assert ckpt_files(mhost, job, "c2") == []
    for r in range(4):
        text = mhost.tc("login", "logs", job, "--rank", r, check=True).stdout
        line = re.search(r"resumed from \S+epoch-1\.pt at epoch 1(.*)", text)
        assert line, (r, text[-500:])
        assert ("rank 0's copy" in line.group(1)) == (host_of(r) == "c2"), (r, line.group(0))
    # the hub has node 0's records of its own disk, and none of node 1's
    nodes = node_ckpts(mhost, job)
    assert {n for n, _ in nodes} == {0} and nodes[(0, 1)] == "complete", nodes
    assert_exactly_once(mhost, job)


def test_a_nodes_damaged_newest_resumes_from_the_older_common_step(mhost, torch_available):
    """both nodes save (disks of their own); c2's newest checkpoint is truncated on its disk
    after it was recorded: the hub marks node 1's copy damaged, and the restart resumes from
    the newest step every node has whole, the older one"""
    job = "digits-trunc"
    # ~13 steps of 1 s an epoch: room to truncate and kill within epoch 3
    proc = submit(mhost, digits_spec(mhost, job, epochs=3, restarts=1, sleep=1.0,
                                     args=", ckpt-every-node: null"))
    wait_until(while_running(proc, lambda: node_ckpts(mhost, job).get((1, 2)) == "complete"
                             and node_ckpts(mhost, job).get((0, 2)) == "complete"), 400,
               lambda: f"epoch 2 recorded for both nodes: {node_ckpts(mhost, job)}" + mhost.logs())
    pid = rank_pid(mhost, 3)
    assert pid and ckpt_files(mhost, job, "c2") == ["epoch-1.pt", "epoch-2.pt"]
    f = node_file(mhost, job, "c2", "output/checkpoints/epoch-2.pt")
    os.truncate(f, f.stat().st_size // 2)
    wait_until(while_running(proc, lambda: node_ckpts(mhost, job).get((1, 2)) == "damaged"), 120,
               lambda: f"node 1's epoch 2 damaged on login: {node_ckpts(mhost, job)}")
    assert "epoch-3.pt" not in ckpt_files(mhost, job, "c1")  # still in epoch 3
    os.kill(pid, signal.SIGKILL)
    rc, out, err = wait_end(mhost, proc)
    assert rc == 0, err + mhost.logs()
    j = show(mhost, job)
    assert j["state"] == "succeeded" and j["restarts"] == 1, j
    assert resumed_from(j).endswith("/epoch-1.pt"), j["events"]
    for r in range(4):
        text = mhost.tc("login", "logs", job, "--rank", r, check=True).stdout
        assert re.search(r"resumed from \S+epoch-1\.pt at epoch 1", text), (r, text[-500:])
        assert "rank 0's copy" not in text
    # node 1 saved epoch 2 again after the resume: its record is whole again
    nodes = node_ckpts(mhost, job)
    assert all(nodes.get((n, s)) == "complete" for n in (0, 1) for s in (1, 2, 3)), nodes
    sup = node_file(mhost, job, "login", "logs/supervisor-node1.log").read_text()
    assert "checkpoint epoch-2.pt (step 2) changed on this node's disk" in sup, sup[-2000:]
    assert_exactly_once(mhost, job)
