"""A node cut off (docs/slurm.md, "A node cut off"): on the multi-host cluster
(mhost_cluster.py), c2's cable is pulled mid-job. Its heartbeats stop, the
hub declares it lost and ends the attempt's rendezvous round; the driver
reads that verdict, ends the srun step (which a node that cannot be reached
would keep waiting) and the attempt fails as a lost node, so that the job
goes on with one node (`nodes: {min: 1, max: 2}`). When the cable is back,
c2's old supervisor sends what it journaled (or, when Slurm killed it first,
`trainctl hub JOB --flush` sends its journal from c2's disk): refused by the
hub (fenced), nothing doubled. And the same loss with the hub SIGKILLed right
after it and `trainctl hub JOB` started again. Every wait is on a condition."""
import fcntl
import json
import os
import re
import signal
import time
from collections import Counter

from conftest import wait_until
from mhost_cluster import TRAINCTL_HOME
from mhost_jobs import (db_points, digits_spec, hub_env, log_points, mhost, node_file,  # noqa: F401
                        ns_pids, proc_file, rank_pid, show, submit, try_show, while_running)


def stored_round(mhost, job):
    """the hub's rendezvous round as it keeps it in login's database (hub/rdzv.h note 6),
    read on login (SQLite resolves /proc/PID/root to this host's /)"""
    p = mhost.run("login", ["/usr/bin/python3", "-c", READ_ROUND, TRAINCTL_HOME + "/trainctl.db", job],
                  timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout) if p.stdout.strip() else None


# python's own sqlite3 module (no sqlite3 program on a fresh machine), read-only
READ_ROUND = """import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=30)
row = db.execute("SELECT r.round FROM hub_rdzv r JOIN jobs j ON j.id = r.job_id WHERE j.name = ?",
                 (sys.argv[2],)).fetchone()
print(row[0] if row else "")
"""


def supervisor_pid(mhost, host, job):
    """the pid of the job's `trainctl supervise-node JOB-ID` on host, or None"""
    j = try_show(mhost, job)
    for pid in ns_pids(mhost, host) if j else ():
        argv = proc_file(pid, "cmdline")
        if b"supervise-node" in argv and j["id"].encode() in argv:
            return pid
    return None


def c2_log(mhost, job):
    """the tail of c2's own supervisor log, for a failure message"""
    f = node_file(mhost, job, "c2", "logs/supervisor-node1.log")
    return f.read_text()[-3000:] if f else "(no supervisor-node1.log on c2)"


def running_reasons(j):
    return [e["reason"] for e in j["events"] if e["state"] == "running" and "kind" not in e]


def cut_spec(mhost, job):
    """digits, two ranks a node, on 1 to 2 nodes (Slurm pinned to 2 at the start: slurm.extra)"""
    spec = digits_spec(mhost, job, epochs=12, restarts=2, sleep=0.3,
                       extra='slurm: {extra: ["--nodes=2"]}\n')
    f = mhost.path("login", spec)
    f.write_text(f.read_text().replace("\nnodes: 2\n", "\nnodes: {min: 1, max: 2}\n"))
    return spec


def one_node(mhost, job):
    """the job once its events say it went on with c1 alone"""
    j = try_show(mhost, job)
    r = running_reasons(j) if j else []
    return j if len(r) >= 2 and "going on with 1 node" in r[-1] else None


def epoch1_and_c2(mhost, job):
    return node_file(mhost, job, "c1", "output/checkpoints/epoch-1.pt") and supervisor_pid(mhost, "c2", job)


def assert_nothing_doubled(mhost, job):
    """every recorded point was printed, none twice; c2's ranks of the cut attempt may miss
    the points it printed after its last delivery (refused with the rest of its stream)"""
    printed = Counter()
    for r in (0, 1):
        printed += log_points(node_file(mhost, job, "c1", f"logs/rank-{r}.log").read_text(), r)
    for r in (2, 3):
        printed += log_points(node_file(mhost, job, "c2", f"logs/rank-{r}.log").read_text(), r)
    got = db_points(mhost, job)
    extra = got - printed
    assert not extra, f"recorded but not printed (doubled): {list(extra)[:5]}"
    missing = printed - got
    assert all(rank in (2, 3) for rank, *_ in missing), list(missing)[:5]
    # the second round trained on c1 alone and finished, resumed from a checkpoint
    assert node_file(mhost, job, "c1", "output/checkpoints/epoch-12.pt")
    text = mhost.tc("login", "logs", job, "--rank", 0, check=True).stdout
    assert re.search(r"resumed from \S+ at epoch [1-9]", text), text[-1000:]


def assert_lost_by_the_hubs_verdict(j):
    assert j["state"] == "succeeded" and j["restarts"] == 1, j["events"]
    restarting = [e["reason"] for e in j["events"] if e["state"] == "restarting" and "kind" not in e]
    assert len(restarting) == 1, j["events"]
    assert re.match(r"node 1 \(c2\) lost: no heartbeat for \d+ s", restarting[0]), restarting
    assert j["restarts_by_cause"] == {"node_lost": 1, "worker_failed": 0}, j
    lost = [e["reason"] for e in j["events"] if e.get("kind") == "node_lost"]
    assert len(lost) == 1 and re.match(r"node_lost: node 1 \(c2\) lost in attempt 0: no heartbeat for \d+ s;",
                                       lost[0]), lost
    assert "node 1 (c2) left out, no spare left: going on with 1 node" in running_reasons(j)[1]


def test_a_node_cut_off_is_lost_fenced_and_the_job_goes_on_with_one(mhost, torch_available):
    job = "digits-cut"
    proc = submit(mhost, cut_spec(mhost, job))
    try:
        wait_until(while_running(proc, lambda: epoch1_and_c2(mhost, job)), 300,
                   lambda: "epoch 1 on c1: " + mhost.logs())
        old = supervisor_pid(mhost, "c2", job)
        # the hub's address and the job's secret as c2's supervisor has them (for its journal)
        env = dict(v.split(b"=", 1) for v in proc_file(old, "environ") if b"=" in v)
        flush_env = {k: env[k.encode()].decode() for k in ("TRAINCTL_HUB_URL", "TRAINCTL_HUB_SECRET")}
        mhost.link("c2", False)
        try:
            # the hub's verdict, the step ended, the job on c1 alone: its events say so
            wait_until(while_running(proc, lambda: one_node(mhost, job)), 240,
                           lambda: f"the job on one node: {try_show(mhost, job)}" + mhost.logs())
            # nothing could reach c2: its supervisor of attempt 0 still runs
            assert supervisor_pid(mhost, "c2", job) == old
        finally:
            mhost.link("c2", True)
        # c2's old supervisor, back on the network, sends what it journaled and what it
        # records now (its worker's end, if Slurm has not ended them first): refused (fenced)
        late = rank_pid(mhost, 3)
        if late:
            os.kill(late, signal.SIGKILL)
        up = time.time()

        flushed = []

        def fenced():
            ended = proc.poll() is not None
            if (stored_round(mhost, job) or {}).get("fenced", 0) > 0:
                return True
            if not ended and not flushed and not supervisor_pid(mhost, "c2", job):
                # it ended with records on its disk (Slurm killed it while a request to the hub
                # still hung from the cut): the journal of a node left behind, sent as a hub
                # that takes over sends it (`trainctl hub JOB --flush` on the node)
                flushed.append(mhost.tc("c2", "hub", show(mhost, job)["id"], "--flush",
                                        env=dict(flush_env, TRAINCTL_HUB_WAIT=30), timeout=120))
            if ended:
                raise AssertionError(f"the job ended {time.time() - up:.0f} s after the link came back "
                                     f"and c2's late events were not refused: {stored_round(mhost, job)}\n"
                                     + c2_log(mhost, job) + f"\nflush: {flushed}")
            return False

        wait_until(fenced, 240, lambda: f"c2's late events refused: {stored_round(mhost, job)}\n"
                   + c2_log(mhost, job))
        print(f"fenced {time.time() - up:.0f} s after the link came back")
        out, err = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err + mhost.logs()
    # the cause is the hub's: its heartbeats stopped
    assert_lost_by_the_hubs_verdict(show(mhost, job))
    # c2's old supervisor, back on the network, was refused: counted and said on the hub's console
    assert re.search(r"warning: hub: job \S+: stream node1\.a0\.\S+ is no member of rendezvous "
                     r"round \d+", err), err[-3000:]
    assert_nothing_doubled(mhost, job)


def hub_holds(mhost, jid):
    """a hub holds job jid on login (slurm_hub.c: its lock, taken before it listens)"""
    try:
        fd = os.open(mhost.path("login", f"{TRAINCTL_HOME}/hub/{jid}.lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_a_hub_restarted_during_the_round_change(mhost, torch_available):
    """the hub (the foreground run) SIGKILLed right after it declared c2 lost, then
    `trainctl hub JOB` started: the new round forms on c1, the job succeeds, nothing doubled"""
    job = "digits-cut-hub"
    proc = submit(mhost, cut_spec(mhost, job))
    hub = None
    try:
        wait_until(while_running(proc, lambda: epoch1_and_c2(mhost, job)), 300,
                   lambda: "epoch 1 on c1: " + mhost.logs())
        mhost.link("c2", False)
        try:
            # the loss, as the hub keeps it: round 0 ended, round 1 joining with c1's rank kept
            r = wait_until(while_running(proc, lambda: (lambda r: r if r and r["round"] >= 1 else None)(
                stored_round(mhost, job))), 240, lambda: f"round 1: {stored_round(mhost, job)}")
            assert "node c2 (rank 1) lost" in r["why"], r
            # nothing between the kill and the new hub: a reader (show) would revive one itself
            jid = show(mhost, job)["id"]
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
            hub = mhost.popen("login", [mhost.trainctl, "hub", jid], env=hub_env(mhost))
            # a reader (one_node's show) revives a hub of its own while none answers: wait until
            # ours holds the job, or the two race and ours may be the one that leaves
            wait_until(while_running(hub, lambda: hub_holds(mhost, jid)), 60, "the new hub's hold on the job")
            wait_until(while_running(hub, lambda: one_node(mhost, job)), 240,
                       lambda: f"the job on one node: {try_show(mhost, job)}" + mhost.logs())
        finally:
            mhost.link("c2", True)
        wait_until(while_running(hub, lambda: (try_show(mhost, job) or {}).get("state") == "succeeded"),
                   400, lambda: f"the job's end: {try_show(mhost, job)}" + mhost.logs())
        hub.communicate(timeout=120)  # it exits once the job is final and every node acked
    finally:
        for p in (proc, hub):
            if p and p.poll() is None:
                p.kill()
                p.communicate()
    assert_lost_by_the_hubs_verdict(show(mhost, job))
    r = stored_round(mhost, job)
    assert r["round"] == 1 and r["state"] == "closed" and [m["node"] for m in r["members"]] == ["c1"], r
    assert_nothing_doubled(mhost, job)
