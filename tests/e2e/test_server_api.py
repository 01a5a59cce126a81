"""trainctl server: every API endpoint and error status, filters, paging,
server-sent events, /metrics, and the CLI verbs through the server."""
import json
import os

import pytest

from server_fixture import held, start_server, sleeper, wait_for

LOSS = r'''
import json, os, sys, time
for i in range(int(os.environ.get("STEPS", "50"))):
    print("DLLL " + json.dumps({"type": "LOG", "step": [0, i], "data": {"loss": 1.0 / (i + 1)}}), flush=True)
    time.sleep(float(os.environ.get("PAUSE", "0")))
print("done", flush=True)
'''


@pytest.fixture
def srv(trainctl, tmp_path):
    s = start_server(trainctl, tmp_path / "state", fake="gpu:2", args=["--sample-seconds", "0.5"])
    yield s
    s.stop()


def test_submit_list_detail_logs_metrics(srv, tmp_path, PYTHON):
    (tmp_path / "loss.py").write_text(LOSS)
    yaml = f"name: lossy\ncommand: [{PYTHON}, loss.py]\nworkdir: {tmp_path}\nenv: {{STEPS: '300', PAUSE: '0.005'}}\n"
    st, body = srv.call("POST", "/api/v1/jobs", {"spec": yaml, "file": "lossy.yaml", "base": str(tmp_path)})
    assert st == 201 and body["state"] == "queued", body
    job = body["id"]
    j = srv.wait_state(job, "succeeded")
    assert j["user"] and j["device_type"] == "cpu" and j["exit_code"] == 0
    assert [e["state"] for e in j["events"]][:2] == ["queued", "starting"]
    # logs: text, tail, json, download
    st, text = srv.call("GET", f"/api/v1/jobs/{job}/logs")
    assert st == 200 and text.rstrip().endswith("done") and text.count("DLLL") == 300
    st, text = srv.call("GET", f"/api/v1/jobs/{job}/logs?tail=2")
    assert text.splitlines()[-1] == "done" and len(text.splitlines()) == 2
    st, body = srv.call("GET", f"/api/v1/jobs/{job}/logs?format=json&tail=3")
    assert body["ranks"][0]["rank"] == 0 and body["ranks"][0]["text"].splitlines()[-1] == "done"
    # follow on a finished job: the tail, then the end event
    with srv.stream(f"/api/v1/jobs/{job}/logs?follow=1&tail=5", timeout=60) as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        events = r.read().decode()
    assert events.count("data: {\"rank\":0") == 5 and "event: end" in events
    # metrics: names, then points downsampled
    st, body = srv.call("GET", f"/api/v1/jobs/{job}/metrics")
    assert body["series"] == [{"metric": "loss", "rank": 0, "points": 300}]
    st, body = srv.call("GET", f"/api/v1/jobs/{job}/metrics/points?name=loss")
    full = body["series"][0]
    assert full["n"] == 300 and len(full["x"]) == 300 and full["y"][0] == 1.0
    st, body = srv.call("GET", f"/api/v1/jobs/{job}/metrics/points?name=loss&points=40")
    s = body["series"][0]
    assert s["n"] == 300 and 0 < len(s["x"]) <= 40
    assert s["x"][0] == full["x"][0] and s["x"][-1] == full["x"][-1] and max(s["y"]) == 1.0
    lo = full["x"][100]
    st, body = srv.call("GET", f"/api/v1/jobs/{job}/metrics/points?name=loss&xmin={lo}&xmax={lo + 9}")
    assert body["series"][0]["x"] == list(range(lo, lo + 10))
    st, body = srv.call("GET", f"/api/v1/jobs/{job}/metrics/points?name=nope")
    assert st == 200 and body["series"] == []
    # the list: filters and paging
    ids = [srv.submit(sleeper(0.1, name=f"s{i}", devices={"type": "cpu", "per_node": 1})) for i in range(3)]
    for i in ids:
        srv.wait_state(i, "succeeded")
    st, body = srv.call("GET", "/api/v1/jobs?limit=2")
    assert body["total"] == 4 and len(body["jobs"]) == 2 and body["jobs"][0]["id"] == ids[-1]
    st, body = srv.call("GET", "/api/v1/jobs?limit=2&offset=2")
    assert [j["id"] for j in body["jobs"]] == [ids[0], job]
    st, body = srv.call("GET", "/api/v1/jobs?name=lossy")
    assert [j["id"] for j in body["jobs"]] == [job]
    st, body = srv.call("GET", "/api/v1/jobs?state=failed,killed")
    assert body["total"] == 0
    st, body = srv.call("GET", "/api/v1/jobs?state=succeeded&user=" + j["user"])
    assert body["total"] == 4
    # resources, report, devices, whoami, prometheus
    st, body = srv.call("GET", f"/api/v1/jobs/{job}/usage")
    assert st == 200 and isinstance(body["samples"], list)
    st, body = srv.call("GET", f"/api/v1/jobs/{job}/report")
    assert st in (200, 404)
    st, body = srv.call("GET", "/api/v1/devices")
    assert {("gpu", 0), ("gpu", 1)} <= {(d["type"], d["id"]) for d in body["devices"]}
    st, body = srv.call("GET", "/api/v1/whoami")
    assert body["admin"] is True
    st, text = srv.call("GET", "/metrics")
    assert 'trainctl_jobs{state="succeeded"} 4' in text and 'trainctl_devices{type="gpu"} 2' in text
    assert "trainctl_submissions_total 4" in text


def test_actions_and_errors(srv, tmp_path):
    a = srv.submit(held(tmp_path / "never", name="long"))  # runs until stopped
    srv.wait_state(a, "running")
    # errors first, while it runs
    for method, path, body, raw, status in [
        ("POST", "/api/v1/jobs", None, b"{not json", 400),
        ("POST", "/api/v1/jobs", None, b"[1,2]", 400),
        ("POST", "/api/v1/jobs", {"spec": 5}, None, 400),
        ("POST", "/api/v1/jobs", {"spec": "name: x"}, None, 400),
        ("POST", "/api/v1/jobs", {"spec": {"command": "true", "devcies": {}}}, None, 400),
        ("POST", "/api/v1/jobs", {"spec": {"command": "true"}, "base": "relative"}, None, 400),
        ("POST", "/api/v1/jobs", {"spec": {"command": "true", "devices": {"type": "gpu", "per_node": 3}}}, None, 400),
        ("POST", "/api/v1/jobs", {"spec": "x" * (2 << 20)}, None, 413),
        ("GET", "/api/v1/jobs?limit=0", None, None, 400),
        ("GET", "/api/v1/jobs?limit=abc", None, None, 400),
        ("GET", "/api/v1/jobs?state=bogus", None, None, 400),
        ("GET", "/api/v1/jobs/nosuchjob", None, None, 404),
        ("GET", "/api/v1/jobs/..%2F..%2Fetc", None, None, 400),
        ("GET", "/api/v1/jobs/a%20b", None, None, 400),
        ("GET", f"/api/v1/jobs/{a}/nothing", None, None, 404),
        ("GET", f"/api/v1/jobs/{a}/logs?rank=x", None, None, 400),
        ("GET", f"/api/v1/jobs/{a}/metrics/points", None, None, 400),
        ("GET", f"/api/v1/jobs/{a}/metrics/points?name=loss&points=1", None, None, 400),
        ("PUT", "/api/v1/jobs", None, b"{}", 405),
        ("GET", f"/api/v1/jobs/{a}/stop", None, None, 405),
        ("DELETE", f"/api/v1/jobs/{a}", None, None, 409),
        ("POST", f"/api/v1/jobs/{a}/resume", {}, None, 409),
        ("GET", "/api/v2/jobs", None, None, 404),
        ("GET", "/nothing-here", None, None, 404),
    ]:
        st, resp = srv.call(method, path, body, raw=raw)
        assert st == status, (method, path, st, resp)
        assert isinstance(resp, dict) and resp["error"], (method, path, resp)
    # the spec error names the key and the line
    st, resp = srv.call("POST", "/api/v1/jobs", {"spec": "command: 'true'\ndevcies: {}\n"})
    assert "devcies" in resp["error"] and ":2:" in resp["error"]
    # the server is still fine
    assert srv.job(a)["state"] == "running"
    # clone, stop, delete
    st, body = srv.call("POST", f"/api/v1/jobs/{a}/clone", {})
    assert st == 201
    clone = body["id"]
    assert srv.job(clone)["spec"]["command"] == srv.job(a)["spec"]["command"]
    st, body = srv.call("POST", f"/api/v1/jobs/{a}/stop", {})
    assert st == 200 and body["ok"]
    j = srv.wait_state(a, "killed")
    assert "stopped through the server" in (j["root_cause"] or "")
    srv.wait_state(clone, "running")
    st, body = srv.call("POST", f"/api/v1/jobs/{clone}/stop", {})
    srv.wait_state(clone, "killed")
    run_dir = j["run_dir"]
    assert os.path.isdir(run_dir)
    st, body = srv.call("DELETE", f"/api/v1/jobs/{a}")
    assert st == 200 and not os.path.exists(run_dir)
    st, body = srv.call("GET", f"/api/v1/jobs/{a}")
    assert st == 404


def test_event_stream(srv):
    with srv.stream("/api/v1/events", timeout=120) as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        job = srv.submit(sleeper(0.2, name="ev"))
        seen = []
        while "succeeded" not in seen:
            line = r.readline()
            assert line, "stream ended"
            if line.startswith(b"data: "):
                e = json.loads(line[6:])
                if e["job"] == job:
                    seen.append(e["state"])
    assert seen[0] == "queued" and "running" in seen and seen[-1] == "succeeded"


def test_cli_through_the_server(srv, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: cli-job\ncommand: 'for i in 1 2 3; do echo line $i; sleep 0.2; done'\n"
                    "devices: {type: gpu, per_node: 2}\n")
    p = srv.cli("submit", spec)
    assert p.returncode == 0, p.stderr
    job = p.stdout.strip()
    p = srv.cli("logs", "-f", job)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("line 3") == 2 and "[1] line 1" in p.stdout
    p = srv.cli("ps", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)[0]["id"] == job
    p = srv.cli("show", "cli-job", "--json")
    assert json.loads(p.stdout)["state"] == "succeeded"
    p = srv.cli("ps")
    assert "cli-job" in p.stdout and "succeeded" in p.stdout
    p = srv.cli("stop", job)
    assert p.returncode == 2 and "not active" in p.stderr
    p = srv.cli("show", "nosuch")
    assert p.returncode == 2 and "no job" in p.stderr
    p = srv.cli("delete", job)
    assert p.returncode == 0, p.stderr
    # no server configured: stop works on the supervisor, the rest explain
    env = dict(srv.env)
    import subprocess
    p = subprocess.run([str(srv.trainctl), "pause", "x"], env=env, capture_output=True, text=True)
    assert p.returncode == 2 and "needs `trainctl server`" in p.stderr
    p = subprocess.run([str(srv.trainctl), "ps", "--server", "http://127.0.0.1:1"], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 3 and "server" in p.stderr


def test_show_is_the_same_with_and_without_a_server(srv, tmp_path, PYTHON):
    """`trainctl show` through the server prints what it prints from the store:
    spec, workers, metrics summary, root cause; --json agrees too (started is
    null until the job runs, here and there)."""
    import subprocess
    (tmp_path / "loss.py").write_text(LOSS)
    spec = tmp_path / "job.yaml"
    spec.write_text(f"name: same-show\ncommand: '{PYTHON} loss.py && exit 3'\nworkdir: {tmp_path}\n"
                    "env: {STEPS: '20'}\ndevices: {type: gpu, per_node: 1}\n")
    p = srv.cli("submit", spec)
    assert p.returncode == 0, p.stderr
    job = p.stdout.strip()
    assert srv.wait_state(job, "failed")["state"] == "failed"

    def local(*args):
        env = dict(srv.env)
        env.pop("TRAINCTL_SERVER", None)
        return subprocess.run([str(srv.trainctl), *args], env=env, capture_output=True, text=True,
                              timeout=60)

    remote_text, local_text = srv.cli("show", job), local("show", job)
    assert remote_text.returncode == 0 and local_text.returncode == 0, remote_text.stderr + local_text.stderr
    assert remote_text.stdout == local_text.stdout
    for part in ("\nspec:\n", "\nevents:\n", "\nworkers:\n", "\nmetrics:\n", "loss",
                 "root cause: rank 0 exited with code 3", "user ", "priority "):
        assert part in remote_text.stdout, (part, remote_text.stdout)
    remote_json = json.loads(srv.cli("show", job, "--json").stdout)
    local_json = json.loads(local("show", job, "--json").stdout)
    assert remote_json == local_json
    assert remote_json["spec"]["name"] == "same-show"
    assert remote_json["workers_history"][0]["exit_code"] == 3
    assert remote_json["metrics"]["metrics"][0]["name"] == "loss"
    # local ps --json and the API listing: one form of a job
    listed = [j for j in json.loads(local("ps", "--json").stdout) if j["id"] == job][0]
    st, body = srv.call("GET", f"/api/v1/jobs?name=same-show")
    assert st == 200 and body["jobs"][0] == listed
    # a job that never ran (both devices held by another): null, not 0, in both
    blocker = srv.submit(sleeper(30, name="blocker", devices={"type": "gpu", "per_node": 2}))
    srv.wait_state(blocker, "running")
    never = srv.submit(sleeper(1, name="never"))
    assert srv.job(never)["state"] == "queued"
    shown = json.loads(local("show", never, "--json").stdout)
    assert shown["state"] == "queued" and shown["started"] is None and shown["ended"] is None
    assert srv.job(never)["started"] is None
    for j in (never, blocker):
        st, _ = srv.call("POST", f"/api/v1/jobs/{j}/stop", {})
        assert st == 200
        srv.wait_state(j, "killed")
