"""trainctl server killed with SIGKILL while jobs run: supervisors are
detached, so the jobs go on; a restarted server finds them (pid and start
time), shows them live and then finished, with nothing missing in logs or
metrics.  A supervisor that dies while the server is down is found lost and
requeued within its restart budget."""
import json
import os
import signal
import time

import pytest

from conftest import alive, holds_for, wait_until
from server_fixture import endpoint_up, start_server, wait_for

# N lines and metric points, 0.1 s apart; with a file name after N, it
# stops half-way until that file exists
WORKER = r'''
import json, os, sys, time
n = int(sys.argv[1])
release = sys.argv[2] if len(sys.argv) > 2 else None
for i in range(n):
    while i == n // 2 and release and not os.path.exists(release):
        time.sleep(0.05)
    print("DLLL " + json.dumps({"type": "LOG", "step": [0, i], "data": {"loss": 1.0 / (i + 1)}}), flush=True)
    print(f"line {i}", flush=True)
    time.sleep(0.1)
print("done", flush=True)
'''


def test_sigkill_server_jobs_survive(trainctl, tmp_path, PYTHON):
    (tmp_path / "w.py").write_text(WORKER)
    state = tmp_path / "state"
    release = tmp_path / "release"
    srv = start_server(trainctl, state, fake="gpu:2")
    jobs = [srv.submit({"name": f"r{i}", "command": [PYTHON, "w.py", "60", str(release)],
                        "workdir": str(tmp_path), "devices": {"type": "gpu", "per_node": 1}})
            for i in range(2)]
    for j in jobs:
        srv.wait_state(j, "running")
    pids = [srv.job(j)["supervisor_pid"] for j in jobs]
    for j in jobs:  # half-way, where they wait for the release
        srv.wait_job(j, lambda: "line 29" in srv.call("GET", f"/api/v1/jobs/{j}/logs")[1], what=f"line 29 of {j}")
    srv.stop(signal.SIGKILL)
    assert all(alive(p) for p in pids), "supervisors died with the server"
    srv2 = start_server(trainctl, state, fake="gpu:2")
    try:
        for j in jobs:
            assert srv2.job(j)["state"] == "running"
        assert "still running" in srv2.log()
        # the devices are still theirs: a new job waits
        st, body = srv2.call("GET", "/api/v1/devices")
        st, m = srv2.call("GET", "/metrics")
        assert 'trainctl_devices_allocated{type="gpu"} 2' in m
        extra = srv2.submit({"name": "after", "command": "true", "devices": {"type": "gpu", "per_node": 2}})
        holds_for(lambda: srv2.job(extra)["state"] == "queued", 1.0, "'after' queued")
        release.touch()
        for j in jobs:
            srv2.wait_state(j, "succeeded")
        srv2.wait_state(extra, "succeeded")
        for j in jobs:
            st, log = srv2.call("GET", f"/api/v1/jobs/{j}/logs")
            lines = [l for l in log.splitlines() if l.startswith("line ")]
            assert lines == [f"line {i}" for i in range(60)], log[-500:]
            st, pts = srv2.call("GET", f"/api/v1/jobs/{j}/metrics/points?name=loss")
            assert pts["series"][0]["n"] == 60
    finally:
        srv2.stop()


def test_supervisor_lost_while_server_down_is_requeued(trainctl, tmp_path, PYTHON):
    (tmp_path / "w.py").write_text(WORKER)
    state = tmp_path / "state"
    srv = start_server(trainctl, state, fake="gpu:1")
    job = srv.submit({"name": "fragile", "command": [PYTHON, "w.py", "30"], "workdir": str(tmp_path),
                      "devices": {"type": "gpu", "per_node": 1}, "restart": {"max_restarts": 1}})
    srv.wait_state(job, "running")
    pid = srv.job(job)["supervisor_pid"]
    srv.stop(signal.SIGKILL)
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: not alive(pid), timeout=60)
    srv2 = start_server(trainctl, state, fake="gpu:1")
    try:
        j = srv2.wait_state(job, "succeeded", timeout=180)
        states = [e["state"] for e in j["events"]]
        assert "lost" in states and states[states.index("lost") + 1] == "queued", states
        assert j["restarts"] == 1
        # a second loss is beyond the budget: it stays lost
    finally:
        srv2.stop()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_supervisor_of_a_gone_server_stops_waiting_soon(trainctl, tmp_path, PYTHON, how):
    """A server's supervisor whose job ends while the server is gone (its
    hub.sock removed by a SIGTERM, or left with nothing listening by a
    SIGKILL) waits about 5 s for it, not TRAINCTL_HUB_WAIT (60 s), says so
    in its log, and leaves its journal; the server that comes back takes it."""
    (tmp_path / "w.py").write_text(WORKER)
    state = tmp_path / "state"
    release = tmp_path / "release"
    srv = start_server(trainctl, state, fake="gpu:1")
    job = srv.submit({"name": "orphaned", "command": [PYTHON, "w.py", "20", str(release)],
                      "workdir": str(tmp_path), "devices": {"type": "gpu", "per_node": 1}})
    srv.wait_state(job, "running")
    pid = srv.job(job)["supervisor_pid"]
    srv.wait_job(job, lambda: "line 9" in srv.call("GET", f"/api/v1/jobs/{job}/logs")[1], what=f"line 9 of {job}")
    srv.stop(getattr(signal, how))
    assert alive(pid), "the supervisor died with the server"
    release.touch()
    # 5 s and a retry's backoff, with room for a loaded machine; the full wait is 60 s
    wait_until(lambda: not alive(pid), timeout=40,
               what=lambda: f"supervisor {pid} to give up on the gone server:\n{srv.run_logs(job)}")
    assert "the server is gone; waiting 5 s for it, not 60" in srv.run_logs(job), srv.run_logs(job)
    jdir = os.path.join(state, "runs", job, "journal")
    assert any(n.endswith(".jsonl") for n in os.listdir(jdir)), os.listdir(jdir)
    srv2 = start_server(trainctl, state, fake="gpu:1")
    try:
        row = srv2.wait_state(job, "succeeded", timeout=120)
        assert row["state"] == "succeeded"
        st, pts = srv2.call("GET", f"/api/v1/jobs/{job}/metrics/points?name=loss")
        assert pts["series"][0]["n"] == 20, pts
    finally:
        srv2.stop()


def test_a_wait_on_an_ended_job_fails_at_once_with_its_root_cause(trainctl, tmp_path):
    """The tests' waits on something of a job (Server.wait_job, endpoint_up,
    wait_state) give up as soon as the job has ended without it, naming the
    job's root cause, instead of waiting out their timeout."""
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:1")
    try:
        job = srv.submit({"name": "broken", "command": "echo cannot-start >&2; exit 7",
                          "devices": {"type": "gpu", "per_node": 1}})
        for wait in (lambda: srv.wait_job(job, lambda: False, timeout=120, what="a row never written"),
                     lambda: wait_until(lambda: endpoint_up(srv, job), timeout=120),
                     lambda: srv.wait_state(job, "running", timeout=120)):
            t0 = time.monotonic()
            with pytest.raises(AssertionError) as e:
                wait()
            assert time.monotonic() - t0 < 30, "it waited for a job that had ended"
            assert "ended failed" in str(e.value) and "rank 0 exited with code 7" in str(e.value), str(e.value)
    finally:
        srv.stop()
