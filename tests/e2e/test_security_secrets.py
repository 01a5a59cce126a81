"""Secrets and what the hub trusts (docs/security.md, issue 23): a real root
server with real unprivileged accounts (useradd, removed afterwards, also on
failure), one regression test per finding; each failed against the server
before its fix.

    M2  a spec's webhook signed with a root-only secret_file; secret_env read
        the server's environment                      test_spec_hook_secret_*
    M3  the operator's webhook secret in every supervisor's environment
                                                      test_operator_hook_secret_*
    L2  hub "file" records made root-owned files in the user's run folder
                                                      test_hub_file_records_*
    L5  any job added or deleted device_health rows of any node
                                                      test_hub_health_records_*
    L3  runs/ listable, /api/v1/devices named every device's job
                                                      test_job_ids_of_others_*
    L6  `trainctl ssh` as root trusted host, port and user of ssh.json
                                                      test_ssh_as_root_*
"""
import base64
import hashlib
import hmac
import http.server
import json
import os
import socket
import sqlite3
import subprocess
import threading

import pytest

from server_fixture import UnixHTTPConnection, root_server, wait_for

OPERATOR_SECRET = "operator-hook-secret-0451"
ROOT_SECRET = "root-only-hook-secret-2718"
ALICE_SECRET = "alice-own-hook-secret-3141"


class Receiver:
    """A webhook receiver on 127.0.0.1: every POST as (path, headers, body)."""

    def __init__(self):
        reqs, lock = [], threading.Lock()

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    reqs.append((self.path, dict(self.headers), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.requests, self.lock = reqs, lock
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of(self, path, job):
        """(event, signature) of every delivery to path about job."""
        with self.lock:
            got = list(self.requests)
        out = []
        for p, headers, body in got:
            d = json.loads(body)
            if p == path and d["job"]["id"] == job:
                out.append((d["event"], headers.get("X-Trainctl-Signature"), body))
        return out

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def signed(secret, body):
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@pytest.fixture(scope="module")
def rx():
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def sec(trainctl, rx, tmp_path_factory):
    hooks = tmp_path_factory.mktemp("hooks") / "hooks.yaml"
    hooks.write_text(f"notify:\n  - url: {rx.url}/server\n    events: [queued, started, succeeded]\n"
                     f"    secret_env: TC_OPERATOR_HOOK_SECRET\n")
    with root_server(trainctl, "tc-secsecrets-", "alice", "bob", args=("--notify-file", str(hooks)),
                     env={"TC_OPERATOR_HOOK_SECRET": OPERATOR_SECRET}) as t:
        yield t


def job_spec(command, **extra):
    spec = {"command": command, "workdir": "/tmp", "devices": {"type": "gpu", "per_node": 1}}
    spec.update(extra)
    return spec


def ended(srv, job):
    return srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=120)


def root_file(base, name, text):
    """A root-owned 0600 file in a root-only folder."""
    d = os.path.join(base, "rootonly-" + name)
    os.makedirs(d, mode=0o700, exist_ok=True)
    os.chmod(d, 0o700)
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write(text + "\n")
    os.chmod(p, 0o600)
    return p


def held_job(srv, base, name):
    """A job of alice that copies its supervisor's environment (which the job
    can read: /proc/$PPID/environ) into its output and runs until released."""
    release = os.path.join(base, "release-" + name)
    cmd = ('cat /proc/$PPID/environ > "$TRAINCTL_OUTPUT_DIR/parent.env"; '
           'cat /proc/self/environ > "$TRAINCTL_OUTPUT_DIR/self.env"; '
           f"while [ ! -e '{release}' ]; do sleep 0.05; done")
    job = srv.submit(job_spec(cmd, name=name))
    penv = os.path.join(srv.state, "runs", job, "output", "parent.env")

    def env_of_parent():
        try:
            data = open(penv, "rb").read()
        except OSError:
            return None
        return data if b"TRAINCTL_HUB_SECRET=" in data else None
    data = wait_for(env_of_parent, timeout=120)
    assert data, f"the job never wrote its parent's environment\n{srv.run_logs(job)}"
    return job, release


def hub_secret_of(srv, job):
    data = open(os.path.join(srv.state, "runs", job, "output", "parent.env"), "rb").read()
    for kv in data.split(b"\0"):
        if kv.startswith(b"TRAINCTL_HUB_SECRET="):
            return kv.split(b"=", 1)[1].decode()
    raise AssertionError("no TRAINCTL_HUB_SECRET in the supervisor's environment")


def hub_post(srv, job, secret, events, stream="forged"):
    """Event lines on hub.sock with the job's own secret, as the job could send them."""
    lines = "".join(json.dumps(dict({"seq": i + 1}, **e), separators=(",", ":")) + "\n"
                    for i, e in enumerate(events))
    con = UnixHTTPConnection(os.path.join(srv.state, "hub.sock"), "localhost")
    try:
        con.request("POST", f"/api/v1/hub/{job}/events?stream={stream}", body=lines.encode(),
                    headers={"X-Trainctl-Hub-Secret": secret})
        r = con.getresponse()
        return r.status, r.read().decode()
    finally:
        con.close()


# ---- M3: the operator's webhook secret ----

def test_operator_hook_secret_is_in_no_job_environment(sec, rx):
    """The server's --notify-file hook's secret_env was copied into every
    supervisor's environment, which its job read from /proc/$PPID/environ.
    Now the server signs and sends those hooks itself."""
    srv, u, base = sec
    job, release = held_job(srv, base, "envdump")
    open(release, "w").close()
    assert ended(srv, job)["state"] == "succeeded", srv.run_logs(job)
    out = os.path.join(srv.state, "runs", job, "output")
    for f in ("parent.env", "self.env"):
        data = open(os.path.join(out, f), "rb").read()
        assert data, f
        assert OPERATOR_SECRET.encode() not in data, f
        assert b"TC_OPERATOR_HOOK_SECRET" not in data, f
    # the server's hooks still get the job's events, signed with the operator's secret
    want = {"queued", "started", "succeeded"}
    got = wait_for(lambda: want <= {e for e, _, _ in rx.of("/server", job)} and rx.of("/server", job),
                   timeout=60)
    assert got, f"deliveries of the server's hooks: {rx.of('/server', job)}\n{srv.log()[-3000:]}"
    for event, sig, body in got:
        assert sig == signed(OPERATOR_SECRET, body), event
        assert json.loads(body)["job"]["user"] == u["alice"]


def test_operator_hooks_skip_a_job_with_its_own(sec, rx):
    """notify: [] opts out of the server's hooks, relayed events included."""
    srv, u, base = sec
    job = srv.submit(job_spec("true", name="optout", notify=[]))
    assert ended(srv, job)["state"] == "succeeded", srv.run_logs(job)
    other = srv.submit(job_spec("true", name="optin"))
    assert ended(srv, other)["state"] == "succeeded", srv.run_logs(other)
    # once the later job's end has reached the hooks, the first one's would have too
    assert wait_for(lambda: "succeeded" in {e for e, _, _ in rx.of("/server", other)}, timeout=60)
    assert rx.of("/server", job) == []


# ---- M2: a spec's hook secrets ----

def test_spec_hook_secret_file_is_read_as_the_account(sec, rx):
    """A user's notify: hook with secret_file naming a root-only file: the
    root server signed the queued event with it."""
    srv, u, base = sec
    path = root_file(base, "hook-secret", ROOT_SECRET)
    hook = {"url": rx.url + "/m2", "events": ["queued", "started", "succeeded"], "secret_file": path}
    job = srv.submit(job_spec("true", name="rootfile", notify=[hook]))
    assert ended(srv, job)["state"] == "succeeded", srv.run_logs(job)
    warned = f"job {job}: notify: cannot read the secret file: cannot open '{path}'"
    assert wait_for(lambda: warned in srv.log() or rx.of("/m2", job), timeout=30)
    for event, sig, body in rx.of("/m2", job):
        assert sig != signed(ROOT_SECRET, body), f"{event} was signed with root's file"
    assert warned in srv.log()
    assert "Permission denied" in srv.log()
    assert ROOT_SECRET not in srv.log() + srv.run_logs(job)


def test_spec_hook_secret_file_of_the_account_signs(sec, rx):
    """The account's own secret file signs every event, queued included."""
    srv, u, base = sec
    home = os.path.expanduser("~" + u["alice"])
    path = os.path.join(home, "hook.secret")
    with open(path, "w") as f:
        f.write(ALICE_SECRET + "\n")
    import pwd
    pw = pwd.getpwnam(u["alice"])
    os.chown(path, pw.pw_uid, pw.pw_gid)
    os.chmod(path, 0o600)
    hook = {"url": rx.url + "/own", "events": ["queued", "started", "succeeded"], "secret_file": path}
    job = srv.submit(job_spec("true", name="ownfile", notify=[hook]))
    assert ended(srv, job)["state"] == "succeeded", srv.run_logs(job)
    got = wait_for(lambda: len(rx.of("/own", job)) == 3 and rx.of("/own", job), timeout=60)
    assert got, f"{rx.of('/own', job)}\n{srv.log()[-3000:]}\n{srv.run_logs(job)}"
    for event, sig, body in got:
        assert sig == signed(ALICE_SECRET, body), event


def test_spec_hook_secret_env_is_refused(sec):
    """secret_env of a user's hook named a variable of the server's own
    environment (the operator's secret, here)."""
    srv, u, base = sec
    hook = {"url": "http://127.0.0.1:9/x", "secret_env": "TC_OPERATOR_HOOK_SECRET"}
    st, body = srv.call("POST", "/api/v1/jobs", {"spec": job_spec("true", notify=[hook])})
    assert st == 400, body
    assert "secret_env" in body["error"] and OPERATOR_SECRET not in json.dumps(body)


# ---- L2 and L5: what a job's event lines may do ----

def test_hub_file_records_make_no_root_files(sec):
    """A file record on hub.sock with the job's own secret: root made
    output/forged/ and a file in it, root-owned, in the user's run folder."""
    srv, u, base = sec
    job, release = held_job(srv, base, "filer")
    secret = hub_secret_of(srv, job)
    data = base64.b64encode(b"x" * 4096).decode()
    st, body = hub_post(srv, job, secret, [
        {"ev": "file", "path": "output/forged/fill.bin", "off": 0, "b": data},
        {"ev": "file", "path": "forged.bin", "off": 1 << 40, "b": data},
    ])
    assert st == 200, body
    open(release, "w").close()
    ended(srv, job)
    run = os.path.join(srv.state, "runs", job)
    assert not os.path.exists(os.path.join(run, "output", "forged"))
    assert not os.path.exists(os.path.join(run, "forged.bin"))


def db_rows(srv, sql, *args):
    with sqlite3.connect(os.path.join(srv.state, "trainctl.db"), timeout=30) as c:
        return c.execute(sql, args).fetchall()


def test_hub_health_records_only_for_the_jobs_nodes(sec):
    """A job of this host added and deleted device_health rows of any node
    name; a forged "slurm" event made it a Slurm job of any nodes."""
    srv, u, base = sec
    tag = os.urandom(3).hex()
    victim, forged = "tcvictim" + tag, "tcforged" + tag
    db_rows(srv, "INSERT INTO device_health (node, device_type, device_id, reason, since) "
                 "VALUES (?, 'gpu', 0, 'really broken', 1)", victim)
    job, release = held_job(srv, base, "healer")
    secret = hub_secret_of(srv, job)
    st, body = hub_post(srv, job, secret, [
        {"ev": "health", "node": forged, "type": "gpu", "id": 0, "reason": "forged"},
        {"ev": "health", "node": victim, "type": "gpu", "id": 0},
        {"ev": "slurm", "job": "1", "nodes": f"{victim},{forged}", "state": "RUNNING"},
        {"ev": "health", "node": victim, "type": "gpu", "id": 0},
        {"ev": "health", "node": forged, "type": "gpu", "id": 1, "reason": "forged"},
    ])
    assert st == 200, body
    open(release, "w").close()
    ended(srv, job)
    assert db_rows(srv, "SELECT reason FROM device_health WHERE node=?", victim) == [("really broken",)]
    assert db_rows(srv, "SELECT reason FROM device_health WHERE node=?", forged) == []
    assert db_rows(srv, "SELECT backend, slurm_nodes FROM jobs WHERE id=?", job) == [("local", None)]
    db_rows(srv, "DELETE FROM device_health WHERE node=?", victim)


# ---- L3: other users' job ids ----

def as_account(name, *argv):
    return subprocess.run(["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups"] + list(argv),
                          capture_output=True, text=True, timeout=60)


def test_job_ids_of_others_are_not_listed(sec):
    """runs/ was 0755 (any account listed every job id) and /api/v1/devices
    named the job holding each device to every user."""
    srv, u, base = sec
    runs = os.path.join(srv.state, "runs")
    assert os.stat(runs).st_mode & 0o777 == 0o711
    job, release = held_job(srv, base, "holder")
    try:
        p = as_account(u["bob"], "ls", runs)
        assert p.returncode != 0 and job not in p.stdout
        # the job itself still reaches its own run folder through runs/ (it wrote parent.env)
        db_rows(srv, "INSERT INTO device_health (node, device_type, device_id, reason, since, job_id) "
                     "VALUES ('tcnode-l3', 'gpu', 0, 'ecc', 1, ?)", job)

        def holders(**kw):
            st, body = srv.call("GET", "/api/v1/devices", **kw)
            assert st == 200, body
            return ({d.get("job") for d in body["devices"]},
                    {n.get("job") for n in body["nodes"] if n["node"] == "tcnode-l3"})
        # the devices page is sampled every few seconds: root on the socket (an admin) first
        assert wait_for(lambda: job in holders(token="", unix=True)[0], timeout=60), holders(token="", unix=True)
        devs, nodes = holders(token="", unix=True)
        assert job in devs and job in nodes, (devs, nodes)
        devs, nodes = holders()  # alice's own
        assert job in devs and job in nodes, (devs, nodes)
        devs, nodes = holders(token=srv.bob)
        assert job not in devs and job not in nodes, (devs, nodes)
    finally:
        db_rows(srv, "DELETE FROM device_health WHERE node='tcnode-l3'")
        open(release, "w").close()
        ended(srv, job)


# ---- L6: trainctl ssh as root ----

def test_ssh_as_root_trusts_nothing_of_ssh_json(sec, trainctl):
    """`trainctl ssh JOB` as root logged in where the job's own ssh.json
    said: any host, any user (root), any port."""
    srv, u, base = sec
    job, release = held_job(srv, base, "sshlure")
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    root_port = lst.getsockname()[1]
    d = os.path.join(srv.state, "runs", job, "endpoints", "ssh")
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ, TRAINCTL_HOME=srv.state, TRAINCTL_SOCKET=srv.socket, TRAINCTL_SERVER=srv.url)
    env.pop("TRAINCTL_TOKEN", None)
    try:
        for where, why in (({"host": "127.0.0.1", "user": "root", "port": 22}, "user 'root'"),
                           ({"host": "10.9.9.9", "user": u["alice"], "port": 22}, "host '10.9.9.9'"),
                           ({"host": "127.0.0.1", "user": u["alice"], "port": root_port},
                            "another account's")):
            with open(os.path.join(d, "ssh.json"), "w") as f:
                json.dump(where, f)
            p = subprocess.run([str(trainctl), "ssh", job, "--", "-o", "BatchMode=yes",
                                "-o", "ConnectTimeout=2", "true"],
                               env=env, capture_output=True, text=True, timeout=60)
            assert p.returncode == 2, (where, p.returncode, p.stderr)
            assert "refused" in p.stderr and why in p.stderr, (where, p.stderr)
    finally:
        lst.close()
        open(release, "w").close()
        ended(srv, job)
