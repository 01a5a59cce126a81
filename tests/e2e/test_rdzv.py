"""Rendezvous rounds in the hub (docs/hub.md, "Rendezvous"): simulated node
supervisors (`trainctl rdzv-sim nodes`, the real client) join a hub
(`trainctl rdzv-sim hub`); a node of round 0 whose records arrive after
round 1 began is refused (sent with curl, as a journal line is replayed);
a lost node ends the round and the survivors form the next; a hub killed
during a round change comes back with the rounds it had."""
import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import time

from conftest import wait_until

JOB = "20261129-020000-000-rdzv"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sim:
    def __init__(self, trainctl, home, tmp_path):
        self.trainctl, self.home, self.tmp = trainctl, str(home), tmp_path
        self.secret = secrets.token_hex(32)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(os.environ, TRAINCTL_HOME=self.home, TRAINCTL_HUB_SECRET=self.secret,
                        TRAINCTL_HUB_URL=self.url)
        self.procs = []
        self.hub = None

    def start_hub(self, name):
        out = open(self.tmp / f"{name}.out", "w")
        err = open(self.tmp / f"{name}.err", "w")
        p = subprocess.Popen([self.trainctl, "rdzv-sim", "hub", JOB, "--port", str(self.port)],
                             env=self.env, stdout=out, stderr=err)
        self.procs.append(p)
        self.hub = p
        wait_until(lambda: "port" in (self.tmp / f"{name}.out").read_text(), 30,
                   f"the hub's port in {name}.out")
        return p

    def nodes(self, name, count, first=0, rnd=0):
        out = open(self.tmp / f"{name}.out", "w")
        p = subprocess.Popen([self.trainctl, "rdzv-sim", "nodes", JOB, "--count", str(count),
                              "--first", str(first), "--round", str(rnd)],
                             env=self.env, stdout=out, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def open(self, rnd, lo, hi, beat="0.2", lost="1.5"):
        r = subprocess.run([self.trainctl, "rdzv-sim", "open", JOB, "--round", str(rnd),
                            "--min", str(lo), "--max", str(hi), "--beat-s", beat,
                            "--lost-s", lost], env=self.env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def in_round(self, name, rnd):
        """{node: (rank, world)} of the lines saying a node is in round rnd"""
        got = {}
        for line in (self.tmp / f"{name}.out").read_text().splitlines():
            o = json.loads(line)
            if o["round"] == rnd:
                got[o["node"]] = (o["rank"], o["world"])
        return got

    def curl(self, *args):
        r = subprocess.run(["curl", "-sS", "-H", f"X-Trainctl-Hub-Secret: {self.secret}",
                            *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def events(self, stream, lines):
        body = "".join(json.dumps(l, separators=(",", ":")) + "\n" for l in lines)
        return json.loads(self.curl("-X", "POST", "-H", "Content-Type: application/x-ndjson",
                                    "--data-binary", body,
                                    f"{self.url}/api/v1/hub/{JOB}/events?stream={stream}"))

    def status(self):
        return json.loads(self.curl(f"{self.url}/api/v1/hub/{JOB}/status"))

    def end(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.kill()
                p.wait()


def ckpt(seq, step):
    # the line a node's journal holds for a checkpoint on its own disk (event.c)
    return {"seq": seq, "ev": "ckpt", "node": 1, "name": f"ck-{step}", "dir": "/c", "step": step,
            "epoch": -1, "layout": 0, "nfiles": 0, "bytes": 0, "sum": "", "files": "[]",
            "state": "complete"}


def node_ckpts(home):
    db = sqlite3.connect(os.path.join(str(home), "trainctl.db"))
    try:
        return [r[0] for r in db.execute(
            "SELECT step FROM checkpoint_nodes WHERE job_id=? ORDER BY step", (JOB,))]
    finally:
        db.close()


def test_old_round_is_fenced_and_a_hub_restart_keeps_the_rounds(trainctl, home, tmp_path):
    sim = Sim(trainctl, home, tmp_path)
    try:
        sim.start_hub("hub1")
        assert sim.open(0, 2, 2)["state"] == "joining"
        sim.nodes("a", 2)
        wait_until(lambda: len(sim.in_round("a", 0)) == 2, 60, "both nodes in round 0")
        assert sorted(v[1] for v in sim.in_round("a", 0).values()) == [2, 2]
        # node 1's stream of round 0 is a member's: its checkpoint is applied
        assert sim.events("node1.a0.sim", [ckpt(1, 10)])["acked"] == 1
        assert node_ckpts(home) == [10]

        # the driver's next attempt: round 1; the nodes join it on their next heartbeat
        sim.open(1, 2, 2)
        wait_until(lambda: len(sim.in_round("a", 1)) == 2, 60, "both nodes in round 1")
        # round 0's late records: acknowledged (the sender stops resending), never applied
        assert sim.events("node1.a0.sim", [ckpt(2, 20), ckpt(3, 30)])["acked"] == 3
        assert node_ckpts(home) == [10]
        rd = sim.status()["rdzv"]
        assert (rd["round"], rd["state"], rd["fenced"]) == (1, "closed", 2)
        # round 1's member is not fenced
        assert sim.events("node1.a1.sim", [ckpt(1, 40)])["acked"] == 1
        assert node_ckpts(home) == [10, 40]

        # a round change: the driver opens round 2 for 3 nodes; the hub is killed mid-join
        sim.open(2, 3, 3)
        wait_until(lambda: sim.status()["rdzv"]["round"] == 2, 30, "round 2 open")
        sim.hub.send_signal(signal.SIGKILL)
        sim.hub.wait()
        sim.start_hub("hub2")
        rd = sim.status()["rdzv"]
        assert (rd["round"], rd["state"], rd["fenced"]) == (2, "joining", 2)
        # the fence held over the restart
        assert sim.events("node1.a0.sim", [ckpt(4, 50)])["acked"] == 4
        assert node_ckpts(home) == [10, 40]
        # a third node: the round closes with all three, ranks kept for the two before
        sim.nodes("b", 1, first=2, rnd=2)
        wait_until(lambda: len(sim.in_round("a", 2)) == 2 and len(sim.in_round("b", 2)) == 1,
                   60, "three nodes in round 2")
        ranks = {**sim.in_round("a", 2), **sim.in_round("b", 2)}
        assert ranks["sim-0"][0] == sim.in_round("a", 1)["sim-0"][0]
        assert ranks["sim-1"][0] == sim.in_round("a", 1)["sim-1"][0]
        assert ranks["sim-2"] == (2, 3)
    finally:
        sim.end()
    err = (tmp_path / "hub1.err").read_text()
    assert err.count("node1.a0.sim is no member of rendezvous round") == 1, err


def three_nodes(sim, beat, lost):
    """a hub, round 0 of 2 to 3 nodes, nodes sim-0 and sim-1 ("a") and the victim sim-2 ("v")
    in it; the victim's process"""
    sim.start_hub("hub")
    sim.open(0, 2, 3, beat=beat, lost=lost)
    sim.nodes("a", 2)
    victim = sim.nodes("v", 1, first=2)
    wait_until(lambda: len(sim.in_round("a", 0)) == 2 and len(sim.in_round("v", 0)) == 1,
               60, "three nodes in round 0")
    return victim


def test_a_lost_node_ends_the_round_and_the_survivors_form_the_next(trainctl, home, tmp_path):
    sim = Sim(trainctl, home, tmp_path)
    try:
        victim = three_nodes(sim, beat="0.2", lost="1.5")
        before = {**sim.in_round("a", 0), **sim.in_round("v", 0)}
        victim.send_signal(signal.SIGKILL)  # a node's supervisor dies: no more heartbeats
        victim.wait()
        wait_until(lambda: len(sim.in_round("a", 1)) == 2, 60, "the survivors in round 1")
        rd = sim.status()["rdzv"]
        assert rd["round"] == 1 and rd["state"] == "closed"
        assert "node sim-2" in rd["why"] and "lost" in rd["why"], rd["why"]
        after = sim.in_round("a", 1)
        assert sorted(after.values()) == [(0, 2), (1, 2)]
        # the order of the ranks is kept
        order = sorted(after, key=lambda n: before[n][0])
        assert [after[n][0] for n in order] == [0, 1]
    finally:
        sim.end()


def test_a_killed_member_is_lost_at_once_not_after_the_heartbeat_timeout(trainctl, home, tmp_path):
    # its connection to the hub is its lease (docs/hub.md): the kernel closes a
    # SIGKILLed supervisor's socket and the hub declares it lost then, where the
    # heartbeat rule (lost_s 120 here) would take two minutes
    sim = Sim(trainctl, home, tmp_path)
    try:
        victim = three_nodes(sim, beat="0.5", lost="120")
        rank = sim.in_round("v", 0)["sim-2"][0]
        t0 = time.monotonic()
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        wait_until(lambda: len(sim.in_round("a", 1)) == 2, 60, "the survivors in round 1")
        took = time.monotonic() - t0
        rd = sim.status()["rdzv"]
        assert (rd["round"], rd["state"]) == (1, "closed")
        assert f"node sim-2 (rank {rank}) lost: its connection to the hub closed" in rd["why"], \
            rd["why"]
        assert took < 60, took
        assert sorted(sim.in_round("a", 1).values()) == [(0, 2), (1, 2)]
    finally:
        sim.end()
