"""trainctl server's scheduler with real jobs: priority order, all-or-nothing
allocation, preemption with resume from a checkpoint, quotas, pause and
resume.  Devices are declared with TRAINCTL_FAKE_DEVICES (the workers are
small shell scripts that do not touch a GPU)."""
import os
import signal
import subprocess

import pytest

from conftest import holds_for, wait_until
from server_fixture import counter, held, start_server, sleeper, wait_for  # noqa: F401  (counter: the fixture)


def starts(job):
    """time of the event that gave the job its devices"""
    return [e["time"] for e in job["events"] if e["state"] == "starting" and e["reason"].startswith("scheduled")]


def ends(job):
    return [e["time"] for e in job["events"] if e["state"] in ("succeeded", "failed", "killed", "preempted", "paused")]


def test_priority_order_and_all_or_nothing(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2")
    try:
        release = tmp_path / "release-a"
        a = srv.submit(held(release, name="a"))                             # 1 gpu, until released
        srv.wait_state(a, "running")
        big = srv.submit(sleeper(0.5, name="big", devices={"type": "gpu", "per_node": 2}))
        small = srv.submit(sleeper(0.5, name="small"))                      # fits, but waits behind big
        low = srv.submit(sleeper(0.5, name="low", priority=5))
        high = srv.submit(sleeper(0.5, name="high", priority=900))
        release.touch()  # all four are queued by now, however long the submits took
        for j in (big, small, low, high):
            srv.wait_state(j, "succeeded")
        ja, jbig, jsmall, jlow, jhigh = (srv.job(x) for x in (a, big, small, low, high))
        # high priority went first even though submitted last; big needed both devices
        assert starts(jhigh)[0] < starts(jbig)[0]
        assert starts(jbig)[0] >= ends(ja)[0]                 # all or nothing: waited for a
        assert starts(jsmall)[0] >= starts(jbig)[0]           # no backfill past big
        assert starts(jlow)[0] >= starts(jsmall)[0]           # lowest priority last
        assert jbig["devices"] == "0,1"
        # never double-booked: intervals on the same device never overlap
        spans = []
        for j in (ja, jbig, jsmall, jlow, jhigh):
            for d in j["devices"].split(","):
                spans.append((d, starts(j)[0], ends(j)[-1]))
        for i, (d1, s1, e1) in enumerate(spans):
            for d2, s2, e2 in spans[i + 1:]:
                assert d1 != d2 or e1 <= s2 or e2 <= s1, spans
    finally:
        srv.stop()


def test_preemption_resumes_from_checkpoint(trainctl, tmp_path, counter):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2")
    try:
        release = tmp_path / "release-low"
        low = srv.submit({"name": "low", "command": [counter, "25"], "preemptible": True, "priority": 10,
                          "devices": {"type": "gpu", "per_node": 2}, "restart": {"grace_seconds": 5},
                          "env": {"HOLD_AT": "3", "RELEASE": str(release)}})
        srv.wait_state(low, "running")
        # it waits at step 3 (checkpoints 1-3 written) until released: preempted there
        wait_until(lambda: len(srv.job(low)["checkpoints"]) >= 3, what="3 checkpoints of low")
        high = srv.submit(sleeper(1, name="high", priority=500))
        srv.wait_state(high, "succeeded")
        release.touch()
        j = srv.wait_state(low, "succeeded", timeout=180)
        states = [e["state"] for e in j["events"]]
        assert "preempted" in states, states
        i = states.index("preempted")
        assert states[i + 1] == "queued" and "running" in states[i + 1:]
        jh = srv.job(high)
        # high started only once low had given its devices back
        pre = [e["time"] for e in j["events"] if e["state"] == "preempted"][0]
        assert starts(jh)[0] >= pre
        st, log = srv.call("GET", f"/api/v1/jobs/{low}/logs?rank=0")
        resumed = [l for l in log.splitlines() if l.startswith("resumed at ")]
        assert resumed and int(resumed[0].split()[-1]) >= 3, log
        assert log.rstrip().endswith("finished at 25")
        # the resumed run did not start over: fewer than 25 steps after the resume
        after = log.split(resumed[0])[1]
        assert after.count("step ") == 25 - int(resumed[0].split()[-1])
    finally:
        srv.stop()


def test_stop_right_after_the_start_is_not_lost(trainctl, tmp_path):
    """A stop that reaches a supervisor the server has only just started (a
    clone stopped at once) ends the job killed: the signal used to run the
    server's own handler in the new process before its exec, and the job ran
    on to succeed."""
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2", args=["--cpu-slots", "2"])
    try:
        ids = []
        for i in range(8):
            job = srv.submit({"name": f"s{i}", "command": "sleep 20",
                              "devices": {"type": "cpu", "per_node": 1}})
            assert wait_for(lambda: srv.job(job)["state"] != "queued", timeout=60, step=0.005)
            st, body = srv.call("POST", f"/api/v1/jobs/{job}/stop", {})
            assert st == 200, body
            ids.append(job)
        for job in ids:
            j = srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=60)
            assert j["state"] == "killed", (j["state"], j["events"])
    finally:
        srv.stop()


def test_non_preemptible_and_higher_priority_are_not_preempted(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:1")
    try:
        release = tmp_path / "release-keep"
        keep = srv.submit(held(release, name="keep", priority=10))          # not preemptible
        srv.wait_state(keep, "running")
        other = srv.submit(sleeper(0.2, name="other", priority=900))
        holds_for(lambda: srv.job(other)["state"] == "queued", 1.0, "'other' queued behind 'keep'")
        release.touch()
        j = srv.wait_state(keep, "succeeded")
        assert "preempted" not in [e["state"] for e in j["events"]]
        srv.wait_state(other, "succeeded")
    finally:
        srv.stop()


def test_quota(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2", args=["--quota", "*=1"])
    try:
        release = tmp_path / "release-q1"
        a = srv.submit(held(release, name="q1"))
        b = srv.submit(sleeper(0.2, name="q2"))
        srv.wait_state(a, "running")
        # a device is free, the quota is not: b waits as long as a runs
        holds_for(lambda: srv.job(b)["state"] == "queued", 1.0, "q2 queued while q1 holds the quota")
        release.touch()
        srv.wait_state(b, "succeeded")
        ja, jb = srv.job(a), srv.job(b)
        assert starts(jb)[0] >= ends(ja)[0]
        st, text = srv.call("GET", "/metrics")
        assert "trainctl_queue_length 0" in text
    finally:
        srv.stop()


def test_pause_and_resume(trainctl, tmp_path, counter):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:1")
    try:
        release = tmp_path / "release"
        job = srv.submit({"name": "pausable", "command": [counter, "15"], "devices": {"type": "gpu", "per_node": 1},
                          "env": {"HOLD_AT": "2", "RELEASE": str(release)}})
        srv.wait_state(job, "running")
        wait_until(lambda: len(srv.job(job)["checkpoints"]) >= 2, what="2 checkpoints")  # then it waits
        p = srv.cli("pause", job)
        assert p.returncode == 0, p.stderr
        srv.wait_state(job, "paused")
        holds_for(lambda: srv.job(job)["state"] == "paused", 1.0, "paused")  # held, not requeued
        # its device comes back when the server's loop applies the pause (a round may come late under load)
        wait_until(lambda: all(d["job"] is None for d in srv.call("GET", "/api/v1/devices")[1]["devices"]),
                   what="the paused job's device free")
        release.touch()
        p = srv.cli("resume", job)
        assert p.returncode == 0, p.stderr
        j = srv.wait_state(job, "succeeded")
        st, log = srv.call("GET", f"/api/v1/jobs/{job}/logs")
        assert "resumed at " in log and log.rstrip().endswith("finished at 15")
        assert [e["state"] for e in j["events"]].count("paused") == 1
    finally:
        srv.stop()


def test_stop_without_a_server(run_tc, home):
    """`trainctl stop` of a `trainctl run` job signals its supervisor."""
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    env.pop("TRAINCTL_SERVER", None)
    from conftest import trainctl_path
    p = subprocess.Popen([str(trainctl_path()), "run", "--name", "local", "--", "sleep", "30"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        last = {}

        def running():
            last["show"] = run_tc("show", "local", "--json")
            return last["show"].returncode == 0 and '"running"' in last["show"].stdout

        # generous: each `show` of an ASan build on a loaded machine takes a while
        assert wait_for(running, timeout=90, step=0.3), \
            f"job 'local' not running in 90 s: {last.get('show')}\n{p.stderr.read() if p.poll() is not None else ''}"
        r = run_tc("stop", "local", env={"TRAINCTL_SERVER": None})
        assert r.returncode == 0 and "stopping" in r.stdout, r.stderr
        assert p.wait(timeout=120) == 1
        assert '"killed"' in run_tc("show", "local", "--json").stdout
        r = run_tc("stop", "local", env={"TRAINCTL_SERVER": None})
        assert r.returncode == 2 and "already ended" in r.stderr
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()
