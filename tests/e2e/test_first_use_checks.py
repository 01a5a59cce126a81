"""test_first_use_checks.py -- issue 29, items 8 and 9: what a job or a
sweep would find only at its end is found before anything is recorded.

`trainctl run` refuses (exit 2, nothing recorded) a misspelt secret name
with the closest one, an endpoint whose program is not installed, and an
outputs.upload_to without credentials; an endpoint out of reach is a
warning at the start, and the final upload failing makes the job failed
with the upload named as its root cause.  A sweep whose objective is never
logged stops after its first trial, naming what was logged; an
accuracy-like objective with mode min is warned about; a trial whose
objective went NaN is failed-objective and never best."""
import json
import socket

import pytest

from server_fixture import start_server, wait_for


def spec(tmp_path, extra="", cmd='["/usr/bin/python3", "-c", "print(1)"]'):
    f = tmp_path / "job.yaml"
    f.write_text("name: first\n"
                 f"command: {cmd}\n"
                 "devices: {type: cpu, per_node: 1}\n" + extra)
    return f


def jobs(run_tc):
    p = run_tc("ps", "-a", "--json")
    assert p.returncode == 0, p.stderr
    v = json.loads(p.stdout)
    return v if isinstance(v, list) else v["jobs"]


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---- item 8: at submit ----

def test_misspelt_secret_is_refused_with_the_closest_name(run_tc, tmp_path):
    assert run_tc("secret", "set", "hf_token", input="s3cr3t-value\n").returncode == 0
    f = spec(tmp_path, "env: {HF_TOKEN: {secret: hf_tokn}}\n")
    p = run_tc("run", "-q", f)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "no secret hf_tokn (did you mean 'hf_token'?)" in p.stderr, p.stderr
    assert jobs(run_tc) == []


def test_endpoint_program_not_installed_is_refused(run_tc, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    f = spec(tmp_path, f"env: {{PATH: {json.dumps(str(empty))}}}\n"
             "endpoints: [{name: board, kind: tensorboard}]\n")
    p = run_tc("run", "-q", f)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "endpoints: board (kind tensorboard): 'tensorboard' is not installed" in p.stderr, p.stderr
    assert jobs(run_tc) == []


def test_upload_without_credentials_is_refused(run_tc, tmp_path):
    f = spec(tmp_path, "outputs: {upload_to: 's3://bucket/runs/{job_id}/'}\n")
    env = {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None,
           "TRAINCTL_STORAGE_CONFIG": tmp_path / "none.conf"}
    p = run_tc("run", "-q", f, env=env)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "outputs.upload_to: s3://bucket/runs/{job_id}/: no credentials" in p.stderr, p.stderr
    assert jobs(run_tc) == []


def test_unreachable_endpoint_warns_and_a_failed_upload_fails_the_job(run_tc, tmp_path):
    f = spec(tmp_path, "outputs: {upload_to: 's3://bucket/runs/{job_id}/'}\n")
    port = closed_port()
    env = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "not-a-real-secret",
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "TRAINCTL_S3_RETRIES": "1",
           "TRAINCTL_STORAGE_CONFIG": tmp_path / "none.conf"}
    p = run_tc("run", "-q", f, env=env)
    assert f"warning: outputs.upload_to: s3://bucket/runs/{{job_id}}/: endpoint " \
           f"http://127.0.0.1:{port} is not reachable from here" in p.stderr, p.stderr
    assert p.returncode == 1, p.stdout + p.stderr
    [job] = jobs(run_tc)
    assert job["state"] == "failed", job
    shown = json.loads(run_tc("show", job["id"], "--json").stdout)
    assert shown["root_cause"].startswith(f"upload to s3://bucket/runs/{job['id']}/ failed: "), shown


def test_server_refuses_the_same_at_submit(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state")
    try:
        st, body = srv.call("POST", "/api/v1/secrets/hf_token", {"value": "s3cr3t-value"})
        assert st < 300, body
        empty = tmp_path / "bin"
        empty.mkdir()
        base = {"name": "first", "command": ["/usr/bin/python3", "-c", "print(1)"], "workdir": "/tmp",
                "devices": {"type": "cpu", "per_node": 1}}
        st, body = srv.call("POST", "/api/v1/jobs",
                            {"spec": dict(base, env={"HF_TOKEN": {"secret": "hf_tokn"}})})
        assert st == 400 and "hf_tokn (did you mean 'hf_token'?)" in body["error"], body
        st, body = srv.call("POST", "/api/v1/jobs",
                            {"spec": dict(base, env={"PATH": str(empty)},
                                          endpoints=[{"name": "board", "kind": "tensorboard"}])})
        assert st == 400, body
        assert "endpoints: board (kind tensorboard): 'tensorboard' is not installed" in body["error"]
        st, body = srv.call("GET", "/api/v1/jobs")
        assert st == 200 and not (body if isinstance(body, list) else body["jobs"]), body
    finally:
        srv.stop()


# ---- item 9: sweeps ----

TOY = """import json, math, sys, time
x = float(sys.argv[sys.argv.index("--x") + 1])
for i in range(3):
    loss = float("nan") if x < 0 and i == 2 else x
    print("DLLL " + json.dumps({"type": "LOG", "step": [i + 1],
                                "data": {"loss": loss, "val.accuracy": 0.5}}), flush=True)
    time.sleep(0.05)
"""


def sweep_file(tmp_path, xs, objective):
    """The toy's sweep over args.x, as JSON (a sweep file may be either)."""
    (tmp_path / "toy.py").write_text(TOY)
    toy_spec = {"command": ["/usr/bin/python3", "toy.py"], "args": {"x": 1},
                "devices": {"type": "cpu", "per_node": 1}}
    f = tmp_path / "toy-sweep.json"
    f.write_text(json.dumps({"name": "toy", "spec": toy_spec, "parameters": {"args.x": xs},
                             "objective": objective}))
    return f


def test_objective_never_logged_stops_the_sweep(run_tc, tmp_path):
    f = sweep_file(tmp_path, [1, 2, 3], {"metric": "val.acc"})
    p = run_tc("sweep", f, timeout=300)
    # the accuracy-like name with the default mode min is warned about at the start
    assert "warning: objective val.acc looks like a score to maximise, but mode is min" in p.stderr
    assert p.returncode == 2, p.stdout + p.stderr
    assert "ended without logging the objective val.acc; it logged loss, val.accuracy " \
           "(did you mean metric: val.accuracy?)" in p.stderr, p.stderr
    s = json.loads(run_tc("sweep", "show", "toy", "--json").stdout)
    assert s["state"] == "failed", s
    states = [t["state"] for t in sorted(s["trials"], key=lambda t: t["trial"])]
    assert states == ["failed-objective", "pending", "pending"], s["trials"]
    assert len(jobs(run_tc)) == 1


def test_nan_objective_is_failed_objective_never_best(run_tc, tmp_path):
    f = sweep_file(tmp_path, [2, -5, 0.5], {"metric": "loss", "mode": "min"})
    p = run_tc("sweep", f, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "warning" not in p.stderr, p.stderr
    s = json.loads(run_tc("sweep", "show", "toy", "--json").stdout)
    by = {t["trial"]: t for t in s["trials"]}
    assert by[1]["state"] == "failed-objective" and by[1]["objective"] is None, by[1]
    assert "loss was NaN or infinite" in by[1]["note"], by[1]
    assert s["best"]["trial"] == 2 and s["best"]["objective"] == pytest.approx(0.5), s["best"]
    assert s["counts"]["failed-objective"] == 1


def test_server_sweep_stops_when_the_objective_is_never_logged(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", args=("--cpu-slots", "2"))
    try:
        r = srv.cli("sweep", sweep_file(tmp_path, [1, 2, 3, 4], {"metric": "val.acc", "mode": "max"}))
        assert r.returncode == 0, r.stdout + r.stderr
        url = f"/api/v1/sweeps/{r.stdout.strip()}"
        assert wait_for(lambda: srv.call("GET", url)[1]["state"] != "running", timeout=180, step=0.3)
        s = srv.call("GET", url)[1]
        assert s["state"] == "failed" and "did you mean metric: val.accuracy?" in s["note"], s
        assert s["counts"]["failed-objective"] == 1 and s["best"] is None, s
        # no trial started after the check; those running then were stopped
        assert s["counts"]["pending"] >= 1, s["trials"]
    finally:
        srv.stop()
