"""The admission door of a root `trainctl server` (docs/security.md, "The
admission door"): every job, however it comes (submit, clone, resume, a
sweep's trial, a start after a restart), is parsed as the account it runs
as, gets every check a non-admin's submit gets, and runs as its owner's
account, never as root unless the server was started with
--allow-root-jobs.  A real root server and real accounts (useradd, removed
afterwards, also on failure).
"""
import json
import os
import pwd
import signal

import pytest

from conftest import wait_until
from server_fixture import root_server, start_server, token_for

ENDED = ["succeeded", "failed", "killed", "lost"]


@pytest.fixture(scope="module")
def adm(trainctl):
    """A root server as a shared machine's operator starts it (no
    --allow-root-jobs), with alice, bob and an admin identity with its own
    account (srv.adm: its admin token)."""
    with root_server(trainctl, "tc-admit-", "alice", "bob", "adm") as (srv, u, base):
        srv.adm = token_for(trainctl, srv.state, u["adm"], admin=True)
        yield srv, u, base


def uid_job(name="whoami", **extra):
    """A job whose worker logs the uid it runs as."""
    spec = {"name": name, "command": "echo uid=$(id -u)", "workdir": "/tmp",
            "devices": {"type": "gpu", "per_node": 1}}
    spec.update(extra)
    return spec


def as_root(srv, job):
    """The job as the Unix socket's root (an admin) sees it, whoever owns it."""
    st, j = srv.call("GET", f"/api/v1/jobs/{job}", token="", unix=True)
    assert st == 200, j
    return j


def worker_uid(srv, job):
    j = wait_until(lambda: (lambda x: x if x["state"] in ENDED else None)(as_root(srv, job)),
                   120, f"{job} to end")
    assert j["state"] == "succeeded", (j, srv.run_logs(job))
    with open(os.path.join(srv.state, "runs", job, "logs", "rank-0.log")) as f:
        lines = [line for line in f if line.startswith("uid=")]
    assert lines, srv.run_logs(job)
    return int(lines[-1].strip()[4:])


def sweep_body(spec, **params):
    """A sweep over spec (a path, or an inline mapping) through the API, as
    a client that sends no spec text of its own (the server reads spec:)."""
    text = {"name": "sw", "spec": spec, "parameters": params or {"env.K": ["1"]},
            "objective": {"metric": "loss"}}
    return {"sweep": json.dumps(text), "file": "sw.yaml", "base": "/tmp"}


def test_sweep_spec_path_is_read_as_the_caller(adm):
    """H2: bob's 0600 job.yaml named by alice's sweep is refused, and its
    content is nowhere in the answer; /etc/shadow as spec: is refused
    without its first line in the error."""
    srv, u, base = adm
    bob = pwd.getpwnam(u["bob"])
    d = os.path.join(base, "bobs")
    os.mkdir(d, 0o755)
    os.chown(d, bob.pw_uid, bob.pw_gid)
    secret = os.path.join(d, "job.yaml")
    with open(secret, "w") as f:
        f.write("name: bobs\ncommand: echo BOB-PRIVATE-7d1e\ndevices: {type: gpu, per_node: 1}\n")
    os.chown(secret, bob.pw_uid, bob.pw_gid)
    os.chmod(secret, 0o600)
    st, body = srv.call("POST", "/api/v1/sweeps", sweep_body(secret))
    assert st in (400, 403), body
    assert "BOB-PRIVATE" not in json.dumps(body)
    st, lst = srv.call("GET", "/api/v1/sweeps")
    assert st == 200 and not lst["sweeps"], lst

    with open("/etc/shadow") as f:
        first = f.readline().strip()
    assert first
    st, body = srv.call("POST", "/api/v1/sweeps", sweep_body("/etc/shadow"))
    assert st in (400, 403), body
    # the old door quoted it as a YAML key, less its trailing colons
    assert first.rstrip(":") not in json.dumps(body), body
    # in bob's 0700 folder, a file that is there and one that is not read the same
    hidden = os.path.join(base, "bobs-hidden")
    os.mkdir(hidden, 0o700)
    os.chown(hidden, bob.pw_uid, bob.pw_gid)
    there = os.path.join(hidden, "job.yaml")
    with open(there, "w") as f:
        f.write("name: h\ncommand: echo hidden\n")
    errors = []
    for path in (there, os.path.join(hidden, "absent.yaml")):
        st, body = srv.call("POST", "/api/v1/sweeps", sweep_body(path))
        assert st in (400, 403), body
        errors.append((st, body["error"].replace(path, "PATH")))
    assert errors[0] == errors[1], errors
    # bob reads his own file, so his sweep of it is taken
    st, body = srv.call("POST", "/api/v1/sweeps", sweep_body(secret), token=srv.bob)
    assert st == 201, body
    srv.call("POST", f"/api/v1/sweeps/{body['id']}/stop", token=srv.bob)


@pytest.mark.parametrize("extra", [
    {"image": "docker.io/library/busybox:latest",
     "container": {"extra": ["--privileged", "--volume=/:/host"]}},
    {"env": {"TOK": {"secret": "not-alices"}}},
], ids=["container-extra", "secret"])
def test_sweep_is_refused_as_a_submit_is(adm, extra):
    """M4: what a non-admin's submit is refused, a sweep of it is refused
    the same way (status and reason), before anything is stored."""
    srv, u, _ = adm
    spec = uid_job("m4", **extra)
    st_sub, sub = srv.call("POST", "/api/v1/jobs", {"spec": spec})
    assert st_sub in (400, 403), sub
    st, body = srv.call("POST", "/api/v1/sweeps", sweep_body(spec))
    assert st == st_sub, (st, body, sub)
    assert sub["error"] in body["error"], (body, sub)
    st, lst = srv.call("GET", "/api/v1/sweeps")
    assert not [s for s in lst["sweeps"] if s["name"] == "sw"], lst


def test_sweep_trials_run_as_its_owner(adm):
    """A sweep's trials come in through the same door: alice's trials are
    hers and run as her account."""
    srv, u, _ = adm
    st, body = srv.call("POST", "/api/v1/sweeps", sweep_body(uid_job("trial")))
    assert st == 201, body
    sid = body["id"]

    def job():
        st, s = srv.call("GET", f"/api/v1/sweeps/{sid}")
        assert st == 200, s
        return next((t["job"] for t in s["trials"] if t.get("job")), None)

    j = wait_until(job, 120, "the trial's job")
    assert srv.job(j)["user"] == u["alice"]
    assert worker_uid(srv, j) == pwd.getpwnam(u["alice"]).pw_uid


def test_admin_clone_keeps_the_owner(adm):
    """M5: an admin's clone of alice's job (by token, and the operator's own
    over the Unix socket) is alice's and runs as alice."""
    srv, u, _ = adm
    alice = pwd.getpwnam(u["alice"]).pw_uid
    job = srv.submit(uid_job())
    assert worker_uid(srv, job) == alice
    for tok in (srv.adm, ""):
        st, c = srv.call("POST", f"/api/v1/jobs/{job}/clone", {}, token=tok, unix=not tok)
        assert st == 201, c
        assert c["user"] == u["alice"], c
        assert worker_uid(srv, c["id"]) == alice


def test_admin_resume_keeps_the_owner(adm):
    """M5: a paused job of alice's resumed by an admin runs as alice again."""
    srv, u, base = adm
    go = os.path.join(base, "go-resume")
    job = srv.submit(uid_job("paused", command=f"echo uid=$(id -u); while [ ! -e {go} ]; do sleep 0.05; done"))
    wait_until(lambda: srv.job(job)["state"] == "running", 120, "running")
    st, b = srv.call("POST", f"/api/v1/jobs/{job}/pause", token=srv.adm)
    assert st == 200, b
    srv.wait_state(job, "paused")
    st, b = srv.call("POST", f"/api/v1/jobs/{job}/resume", token=srv.adm)
    assert st == 200, b
    wait_until(lambda: srv.job(job)["state"] == "running", 120, "running again")
    open(go, "w").close()
    assert srv.job(job)["user"] == u["alice"]
    assert worker_uid(srv, job) == pwd.getpwnam(u["alice"]).pw_uid


def test_admin_identity_runs_as_its_own_account(adm):
    """An admin identity's own job runs as its own Unix account."""
    srv, u, _ = adm
    job = srv.submit(uid_job("mine"), token=srv.adm)
    assert worker_uid(srv, job) == pwd.getpwnam(u["adm"]).pw_uid


def test_no_root_job_without_the_option(adm):
    """M7: root's own submit (the Unix socket), the operator's browser
    login, and root's sweep are refused, naming --allow-root-jobs."""
    srv, _, _ = adm
    st, body = srv.call("POST", "/api/v1/jobs", {"spec": uid_job("root")}, token="", unix=True)
    assert st == 403 and "--allow-root-jobs" in body["error"], body
    st, body = srv.call("POST", "/api/v1/sweeps", sweep_body(uid_job("root")), token="", unix=True)
    assert st == 403 and "--allow-root-jobs" in body["error"], body
    # the operator's login URL is root's admin identity: its session is refused the same
    import http.client
    import urllib.parse
    url = urllib.parse.urlparse(srv.login_url())
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    c.request("GET", url.path + "?" + url.query)
    r = c.getresponse()
    r.read()
    cookie = r.headers.get("Set-Cookie", "").split(";")[0]
    assert cookie, r.headers
    st, body = srv.call("POST", "/api/v1/jobs", {"spec": uid_job("root")}, token="", unix=False,
                        headers={"Cookie": cookie, "Origin": srv.url, "Sec-Fetch-Site": "same-origin"})
    assert st == 403 and "--allow-root-jobs" in body["error"], body
    c.close()


def test_root_jobs_with_the_option_and_not_after_a_restart_without(trainctl, tmp_path):
    """With --allow-root-jobs root's job runs as uid 0; a root job still
    queued when the server comes back without the option never starts as
    root: it fails naming the option."""
    state = tmp_path / "state"
    srv = start_server(trainctl, state, fake="gpu:1", root_jobs=True)
    try:
        job = srv.submit(uid_job())
        assert worker_uid(srv, job) == 0
        go = tmp_path / "go"
        held = srv.submit(uid_job("held", command=f"while [ ! -e {go} ]; do sleep 0.05; done"))
        wait_until(lambda: srv.job(held)["state"] == "running", 120, "running")
        queued = srv.submit(uid_job("queued"))
        assert srv.job(queued)["state"] == "queued"
    finally:
        srv.stop()
    srv = start_server(trainctl, state, fake="gpu:1", root_jobs=False)
    try:
        go.touch()
        j = srv.wait_state(queued, ENDED)
        assert j["state"] == "failed", j
        assert "--allow-root-jobs" in json.dumps(j), j
        assert not os.path.exists(os.path.join(srv.state, "runs", queued, "logs", "rank-0.log"))
    finally:
        srv.stop(signal.SIGTERM)


def test_one_door():
    """Rule 1 kept: only admit.c makes a job row for the server's queue
    (store_job_submit); no file of the server takes an account's file ids
    but through core/proc's proc_fs_as (setfsuid); the only
    other srv_add_queued is queue.c's loading of the rows a restart finds.
    A second door added anywhere in src/server/, src/api/ or src/gateway/
    fails here."""
    import glob
    import re
    src = os.path.join(os.path.dirname(__file__), "..", "..", "src")
    allowed = {"store_job_submit": {"admit.c"}, "setfsuid": set(), "setfsgid": set(),
               "srv_add_queued": {"admit.c", "queue.c"}}
    found = {}
    paths = [p for room in ("server", "api", "gateway")
             for p in glob.glob(os.path.join(src, room, "*.c"))]
    for path in paths:
        text = open(path).read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        for fn in allowed:
            if re.search(r"\b" + fn + r"\s*\(", text):
                found.setdefault(fn, set()).add(os.path.basename(path))
    assert found.get("store_job_submit") == {"admit.c"}, found
    for fn, files in allowed.items():
        assert found.get(fn, set()) <= files, (fn, found[fn] - files)
    # queue.c calls srv_add_queued once, to load what a restart finds (srv_load_job)
    queue_c = re.sub(r"/\*.*?\*/", "", open(os.path.join(src, "server", "queue.c")).read(), flags=re.S)
    assert len(re.findall(r"\bsrv_add_queued\s*\(", queue_c)) == 2  # its definition and srv_load_job
