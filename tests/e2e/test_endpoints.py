"""Endpoints (docs/endpoints.md): services beside a job's workers, with real
processes.

  - the spec's endpoints: key and its errors (file:line, exit 2);
  - a generic endpoint of a local `trainctl run`: `trainctl endpoints`, its
    local URL, stopped with the job (port closed, process gone), and gone
    when the supervisor is SIGKILLed (its watchdog);
  - Debian's jupyter-notebook through a root server's proxy, as a real
    unprivileged account: the REST API with the caller's token, one cell
    run over the kernel's WebSocket channel (6*7 -> 42), another user and
    no credentials refused, a generic endpoint beside it (prefix stripped),
    `trainctl endpoints` through the server, and nothing of the job left
    once it is stopped.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import alive, wait_until
from endpoint_helpers import jupyter_ok, run_cell, websocket  # noqa: F401 (a fixture)
from server_fixture import port_open, start_server, token_for, unix_accounts

HTTP_SERVER = "python3 -m http.server --bind 127.0.0.1 $PORT"


def pids_of_job(job_id):
    """Processes whose environment names the job (the workers, endpoints and
    whatever they started: a Jupyter kernel)."""
    want = f"TRAINCTL_JOB_ID={job_id}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return [p for p in found if alive(p)]


def write_spec(path, text):
    path.write_text(text)
    return path


# ---- the spec ----

@pytest.mark.parametrize("entries,message", [
    ("  - jupyterr\n", "job.yaml:4: endpoints[]: unknown kind 'jupyterr' (jupyter, tensorboard, generic, ssh)"),
    ("  - jupyter\n  - jupyter\n", "job.yaml:5: endpoints[].name: 'jupyter' is given twice"),
    ("  - kind: generic\n    name: web\n", "kind generic needs command"),
    ("  - {kind: jupyter, port: 8888}\n", "kind jupyter takes no port"),
    ("  - {name: 'a/b', command: x}\n", "endpoints[].name: 'a/b' is not a name"),
    ("  - {command: x}\n", "endpoints[].name: is required for a generic endpoint"),
    ("  - {name: web, command: x, prot: 1}\n", "job.yaml:4: unknown key 'endpoints[].prot' (did you mean 'endpoints[].port'?)"),
])
def test_spec_errors(run_tc, tmp_path, entries, message):
    spec = write_spec(tmp_path / "job.yaml", "name: bad\ncommand: [true]\nendpoints:\n" + entries)
    r = run_tc("run", spec)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr, r.stderr


def test_spec_round_trip(run_tc, tmp_path):
    """The resolved spec keeps its endpoints (show --json, job.yaml)."""
    spec = write_spec(tmp_path / "job.yaml",
                      "name: rt\ncommand: [true]\nendpoints:\n  - jupyter\n"
                      f"  - {{name: web, command: '{HTTP_SERVER}', port: 18080}}\n")
    r = run_tc("run", "-q", spec)
    assert r.returncode == 0, r.stderr
    show = json.loads(run_tc("show", "rt", "--json").stdout)
    assert show["spec"]["endpoints"] == [
        {"name": "jupyter", "kind": "jupyter"},
        {"name": "web", "kind": "generic", "command": HTTP_SERVER, "port": 18080}]


# ---- a local run ----

def start_run(trainctl, home, spec, log):
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    return subprocess.Popen([str(trainctl), "run", str(spec)], env=env, stdout=log,
                            stderr=subprocess.STDOUT)


def endpoints_json(run_tc, job):
    r = run_tc("endpoints", job, "--json")
    return json.loads(r.stdout)["endpoints"] if r.returncode == 0 else None


def test_generic_endpoint_of_a_local_run(trainctl, run_tc, home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "hello.txt").write_text("hello from the job\n")
    release = tmp_path / "release"
    spec = write_spec(tmp_path / "job.yaml", f"""
name: local-ep
workdir: {work}
command: "while [ ! -e '{release}' ]; do sleep 0.05; done"
endpoints:
  - name: web
    command: "{HTTP_SERVER}"
""")
    with open(tmp_path / "run.log", "w") as log:
        p = start_run(trainctl, home, spec, log)
    try:
        eps = wait_until(lambda: (endpoints_json(run_tc, "local-ep") or [None])[0],
                         what=lambda: (tmp_path / "run.log").read_text())
        assert eps["name"] == "web" and eps["kind"] == "generic" and eps["state"] == "running"
        port = eps["port"]
        assert eps["url"] == f"http://127.0.0.1:{port}/"
        assert eps["path"].endswith("/endpoints/web/")
        wait_until(lambda: port_open(port), what="the endpoint's port")
        import urllib.request
        body = urllib.request.urlopen(eps["url"] + "hello.txt", timeout=30).read().decode()
        assert body == "hello from the job\n"
        text = run_tc("endpoints", "local-ep").stdout
        assert text.splitlines()[0].split() == ["NAME", "KIND", "STATE", "URL"]
        assert text.splitlines()[1].split() == ["web", "generic", "running", eps["url"]]
        # the endpoint runs with the job's environment and cwd, on its own port
        pid = port_owner(port)
        env = dict(kv.split("=", 1) for kv in
                   open(f"/proc/{pid}/environ").read().split("\0") if "=" in kv)
        assert env["PORT"] == str(port) and env["TRAINCTL_ENDPOINT_NAME"] == "web"
        job = json.loads(run_tc("show", "local-ep", "--json").stdout)["id"]
        assert env["TRAINCTL_JOB_ID"] == job
        assert os.readlink(f"/proc/{pid}/cwd") == str(work)
        release.write_text("")
        assert p.wait(timeout=300) == 0
    finally:
        release.write_text("")
        if p.poll() is None:
            p.kill()
            p.wait()
    # stopped with the job: its row says so, its port is closed, its processes are gone
    eps = endpoints_json(run_tc, "local-ep")
    assert eps[0]["state"] == "stopped", eps
    assert not port_open(port)
    assert not alive(pid)


def listener(port):
    """What ss says listens on port (for failure messages)."""
    return subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True,
                          text=True).stdout.strip()


def port_owner(port):
    """The pid listening on 127.0.0.1:port (ss), for /proc checks."""
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True,
                         text=True).stdout
    import re
    m = re.search(r"pid=(\d+)", out)
    assert m, out
    return int(m.group(1))


@pytest.mark.parametrize("restart", [False, True], ids=["first-attempt", "after-a-restart"])
def test_sigkill_of_the_supervisor_leaves_no_endpoint(trainctl, run_tc, home, tmp_path, restart):
    """The endpoint's command (sh, then python) is a group the supervisor's
    watchdog kills; it lives across the workers' restart, and so does the
    watchdog's hold on it."""
    first = tmp_path / "first"
    command = f"if [ ! -e '{first}' ]; then touch '{first}'; exit 1; fi; sleep 600" if restart \
        else "sleep 600"
    spec = write_spec(tmp_path / "job.yaml", f"""
name: killed-ep
command: "{command}"
restart: {{max_restarts: 1}}
endpoints:
  - name: web
    command: "{HTTP_SERVER}"
""")
    with open(tmp_path / "run.log", "w") as log:
        p = start_run(trainctl, home, spec, log)
    try:
        eps = wait_until(lambda: (endpoints_json(run_tc, "killed-ep") or [None])[0],
                         what=lambda: (tmp_path / "run.log").read_text())
        port = eps["port"]
        wait_until(lambda: port_open(port), what="the endpoint's port")
        server = port_owner(port)
        job = json.loads(run_tc("show", "killed-ep", "--json").stdout)["id"]
        if restart:
            def restarted():
                j = json.loads(run_tc("show", job, "--json").stdout)
                return j["restarts"] == 1 and j["state"] == "running"
            wait_until(restarted, what=lambda: (tmp_path / "run.log").read_text())
            # the same endpoint, never restarted with the workers
            assert port_owner(port) == server
            assert endpoints_json(run_tc, job)[0]["state"] == "running"
        assert pids_of_job(job)
        p.send_signal(signal.SIGKILL)
        p.wait()
        wait_until(lambda: not pids_of_job(job) and not port_open(port), timeout=60,
                   what=lambda: f"the job's processes to end: {pids_of_job(job)}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# ---- Jupyter through the server ----

def test_jupyter_through_the_proxy(trainctl, tmp_path, websocket):
    if not jupyter_ok():
        pytest.fail("jupyter-notebook is missing (scripts/install-deps.sh)", pytrace=False)
    with unix_accounts("own", "oth") as u:
        state = tmp_path / "state"
        srv = start_server(trainctl, state)
        try:
            own = token_for(trainctl, state, u["own"])
            oth = token_for(trainctl, state, u["oth"])
            home = f"/home/{u['own']}"
            with open(f"{home}/hello.txt", "w") as f:
                f.write("hello from the job\n")
            spec = {"name": "nb", "command": "sleep 600", "workdir": home,
                    "endpoints": ["jupyter", {"name": "web", "command": HTTP_SERVER}]}
            job = srv.submit(spec, token=own)
            srv.wait_state(job, "running")
            base = f"/jobs/{job}/endpoints"

            def status():
                st, body = srv.call("GET", f"/api/v1/jobs/{job}/endpoints", token=own)
                assert st == 200, body
                bad = [e for e in body["endpoints"] if e["state"] not in ("starting", "running")]
                assert not bad, f"{bad}\n" + open(
                    f"{state}/runs/{job}/logs/endpoint-jupyter.log").read()[-3000:]
                st, body = srv.call("GET", f"{base}/jupyter/api/status", token=own)
                return body if st == 200 else None
            wait_until(status, timeout=180, what=lambda: srv.run_logs(job))

            # the REST API, with the caller's token only (the proxy presents Jupyter's)
            st, k = srv.call("POST", f"{base}/jupyter/api/kernels", {"name": "python3"}, token=own)
            assert st == 201, k
            url = f"ws://127.0.0.1:{srv.port}{base}/jupyter/api/kernels/{k['id']}/channels"
            assert run_cell(websocket, url, own, "print(6*7)") == "42\n"
            # the kernel runs as the job's user, in its folder, with its environment
            who = run_cell(websocket, url, own,
                           "import os; print(os.getuid(), os.getcwd(), os.environ['TRAINCTL_JOB_ID'])")
            uid = int(subprocess.run(["id", "-u", u["own"]], capture_output=True, text=True).stdout)
            assert who.split() == [str(uid), home, job]

            # a generic endpoint beside it: the proxy's prefix is not its business
            st, body = srv.call("GET", f"{base}/web/hello.txt", token=own)
            assert (st, body) == (200, "hello from the job\n")
            st, body = srv.call("GET", f"{base}/web/", token=own)
            assert st == 200 and "hello.txt" in body, body
            st, _ = srv.call("GET", f"{base}/web", token=own)
            assert st == 302  # to web/: relative links need the folder's slash

            # nobody else: another user, no credentials, a wrong name
            for tok in (oth,):
                st, body = srv.call("GET", f"{base}/jupyter/api/status", token=tok)
                assert st in (403, 404), (st, body)
                with pytest.raises(websocket.WebSocketBadStatusException) as e:
                    run_cell(websocket, url, tok, "print(1)")
                assert e.value.status_code in (403, 404)
            st, body = srv.call("GET", f"{base}/jupyter/api/status", unix=False)
            assert st == 401, body
            st, body = srv.call("GET", f"{base}/nope/", token=own)
            assert st == 404 and "no endpoint 'nope'" in body["error"], body

            # the CLI through the server: the proxy's URLs
            srv.token = own
            r = srv.cli("endpoints", job)
            assert r.returncode == 0, r.stderr
            rows = [line.split() for line in r.stdout.splitlines()]
            assert rows[0] == ["NAME", "KIND", "STATE", "URL"]
            assert rows[1] == ["jupyter", "jupyter", "running", f"{srv.url}{base}/jupyter/"]
            assert rows[2] == ["web", "generic", "running", f"{srv.url}{base}/web/"]
            eps = json.loads(srv.cli("endpoints", job, "--json").stdout)["endpoints"]
            assert all("secret" not in e and "token=" not in (e["url"] or "") for e in eps)
            ports = [e["port"] for e in eps]
            srv.token = None

            # a WebSocket left open does not hold the server when it stops; a
            # server started again proxies the job's endpoints as before
            keep = websocket.create_connection(url, timeout=60,
                                               header=[f"Authorization: Bearer {own}"])
            srv.stop()
            with pytest.raises((websocket.WebSocketConnectionClosedException, OSError)):
                while True:
                    keep.recv()
            keep.close()
            srv.start()
            assert run_cell(websocket, url, own, "print(6*7)") == "42\n"

            # stopped with the job: ports closed, Jupyter, its kernel and the rest gone
            assert pids_of_job(job)
            st, body = srv.call("POST", f"/api/v1/jobs/{job}/stop", {})
            assert st == 200, body
            srv.wait_state(job, "killed")
            wait_until(lambda: not pids_of_job(job) and not any(port_open(p) for p in ports),
                       timeout=120, what=lambda: f"the job's processes to end: {pids_of_job(job)}, "
                       f"its ports to close: {[(p, listener(p)) for p in ports if port_open(p)]}")
            def states():
                st, body = srv.call("GET", f"/api/v1/jobs/{job}/endpoints")
                return [e["state"] for e in body["endpoints"]]
            wait_until(lambda: states() == ["stopped", "stopped"], what=lambda: states())
            st, body = srv.call("GET", f"{base}/web/hello.txt", token=own)
            assert st == 503, body
        finally:
            srv.stop()
