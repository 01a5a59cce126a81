"""Security of `trainctl server` on a shared machine (docs/security.md): a
real root server, real unprivileged accounts (useradd, removed afterwards,
also on failure), and one regression test per finding of the audit (issue
13) that this part fixes: each failed against the server before the fix.

    1  cross-site forgery and DNS rebinding        test_csrf_*, test_rebinding
    2  a token of a name without an account        test_token_without_account_*
    7  the server's environment reaches jobs       test_job_environment
    9  slow connections lock everyone out          test_limits_*
    10 no tokens means everyone is admin           test_no_tokens_is_nobody
    11 qsort(NULL, 0) in the logs of a rankless job test_logs_of_a_job_without_logs
    12 API names with escape sequences             test_api_name_is_a_spec_name
    13 ?token= in URLs                             test_token_in_the_url_is_refused
    14 cross-user leaks                            test_cross_user_*
    15 /tmp/.trainctl without HOME                 test_state_folder_without_home
    16 no security headers                         test_security_headers
    and: ps/show print control characters escaped (test_show_escapes_control_characters)

The browser half of finding 1 (a page from another origin cannot submit a
job, the cookie login) is in test_ui.py.
"""
import http.client
import json
import os
import socket
import subprocess
import time

import pytest

from conftest import wait_until
from server_fixture import start_server, token_for, unix_accounts, wait_for

SECRET = "sekrit-AKIA-4242-do-not-leak"


@pytest.fixture(scope="module")
def sec(trainctl, tmp_path_factory):
    """A root server with the tokens of three real accounts (alice, bob, and
    the admin ops) and credentials in its environment."""
    base = tmp_path_factory.mktemp("security")
    state = base / "state"
    with unix_accounts("alice", "bob", "ops") as u:
        toks = {r: token_for(trainctl, state, n, admin=(r == "ops")) for r, n in u.items()}
        srv = start_server(trainctl, state, fake="gpu:2",
                           env={"AWS_SECRET_ACCESS_KEY": SECRET, "AWS_ACCESS_KEY_ID": "AKIA-test",
                                "TRAINCTL_STORAGE_CONFIG": str(base / "storage.conf")})
        try:
            yield srv, u, toks, base
        finally:
            srv.stop()


def tcp(srv, method, path, body=None, headers=None, source=None):
    """A raw request over TCP with exactly these headers: (status, headers, text)."""
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60,
                                   source_address=(source, 0) if source else None)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, r.headers, r.read().decode(errors="replace")
    finally:
        c.close()


def bearer(tok, **more):
    return dict({"Authorization": "Bearer " + tok}, **more)


def ended(srv, tok, job):
    """The job once it has ended, read with tok."""
    saved = srv.token
    srv.token = tok
    try:
        return srv.wait_state(job, ["succeeded", "failed", "killed", "lost"], timeout=120)
    finally:
        srv.token = saved


def rank_log(srv, tok, job):
    st, _, text = tcp(srv, "GET", f"/api/v1/jobs/{job}/logs", headers=bearer(tok))
    assert st == 200, text
    return text


# ---- finding 1: cross-site forgery and DNS rebinding ----

def test_csrf_without_tokens_runs_nothing(trainctl, tmp_path):
    """A fresh server (no tokens): a "simple" cross-site POST ran `id` as root."""
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:1")
    proof = tmp_path / "proof"
    try:
        st, _, text = tcp(srv, "POST", "/api/v1/jobs",
                          json.dumps({"spec": {"command": f"id > {proof}"}}),
                          {"Origin": "http://evil.example", "Content-Type": "text/plain"})
        assert st in (401, 403, 415), (st, text)
        st, jobs = srv.call("GET", "/api/v1/jobs")   # the operator, through the socket
        assert st == 200 and jobs["total"] == 0, jobs
    finally:
        srv.stop()
    assert not proof.exists()


def test_csrf_with_credentials_is_refused(sec):
    srv, u, toks, _ = sec
    spec = json.dumps({"spec": {"name": "csrf", "command": "true", "workdir": "/tmp"}})
    # from another origin, even with the user's credentials (a cookie would ride along)
    st, _, text = tcp(srv, "POST", "/api/v1/jobs", spec,
                      bearer(toks["alice"], Origin="http://evil.example", **{"Content-Type": "application/json"}))
    assert st == 403 and "origin" in text, text
    st, _, text = tcp(srv, "POST", "/api/v1/jobs", spec,
                      bearer(toks["alice"], **{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}))
    assert st == 403, text
    # a body that is not JSON (an HTML form's text/plain or urlencoded)
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        st, _, text = tcp(srv, "POST", "/api/v1/jobs", spec, bearer(toks["alice"], **{"Content-Type": ctype}))
        assert st == 415, (ctype, text)
    # stop/delete from another origin too
    st, _, text = tcp(srv, "DELETE", "/api/v1/jobs/x", None, bearer(toks["alice"], Origin="null"))
    assert st == 403, text
    st, jobs = srv.call("GET", "/api/v1/jobs?name=csrf")
    assert jobs["total"] == 0
    # the same request from the server's own origin is fine
    st, _, text = tcp(srv, "POST", "/api/v1/jobs", spec,
                      bearer(toks["alice"], Origin=f"http://127.0.0.1:{srv.port}", **{"Content-Type": "application/json"}))
    assert st == 201, text
    ended(srv, toks["alice"], json.loads(text)["id"])


def test_rebinding(sec):
    srv, u, toks, _ = sec
    for host in (f"attacker.example:{srv.port}", "attacker.example", f"127.0.0.1.nip.io:{srv.port}"):
        st, _, text = tcp(srv, "GET", "/api/v1/whoami", headers=bearer(toks["ops"], Host=host))
        assert st == 403 and "Host" in text, (host, st, text)
    st, _, text = tcp(srv, "GET", "/api/v1/whoami", headers=bearer(toks["ops"], Host=f"localhost:{srv.port}"))
    assert st == 200, text


# ---- finding 10: the number of tokens decides nothing ----

def test_no_tokens_is_nobody(trainctl, tmp_path):
    state = tmp_path / "state"
    srv = start_server(trainctl, state, fake="gpu:1")
    try:
        st, _, text = tcp(srv, "GET", "/api/v1/whoami")
        assert st == 401, text
        # a token made and revoked: back to none, still nobody is let in
        tok = token_for(trainctl, state, "nobody")
        env = dict(os.environ, TRAINCTL_HOME=str(state))
        p = subprocess.run([str(trainctl), "token", "revoke", "--user", "nobody"], env=env,
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        for hdrs in ({}, bearer(tok)):
            st, _, text = tcp(srv, "GET", "/api/v1/whoami", headers=hdrs)
            assert st == 401, text
    finally:
        srv.stop()


# ---- finding 13: no tokens in URLs ----

def test_token_in_the_url_is_refused(sec):
    srv, u, toks, _ = sec
    t = toks["alice"]
    st, _, text = tcp(srv, "POST", f"/api/v1/jobs?token={t}",
                      json.dumps({"spec": {"command": "true", "workdir": "/tmp"}}),
                      {"Content-Type": "application/json"})
    assert st == 400 and "Authorization" in text, text
    st, _, text = tcp(srv, "GET", f"/api/v1/events?token={t}")
    assert st == 400, text


# ---- finding 2: no job of a token runs as root ----

def test_token_without_account_is_refused(sec, trainctl):
    srv, u, toks, base = sec
    ghost = f"ghost{os.urandom(3).hex()}"
    for name in (ghost, "root"):
        tok = token_for(trainctl, base / "state", name)
        st, _, text = tcp(srv, "GET", "/api/v1/whoami", headers=bearer(tok))
        assert st == 403 and ("no account" in text or "root" in text), text
        st, _, text = tcp(srv, "POST", "/api/v1/jobs",
                          json.dumps({"spec": {"command": "id", "workdir": "/tmp"}}),
                          bearer(tok, **{"Content-Type": "application/json"}))
        assert st == 403, text


def test_token_jobs_run_as_their_account(sec):
    srv, u, toks, _ = sec
    job = srv.submit({"name": "whoami", "command": "id -un; id -u", "workdir": "/tmp"}, token=toks["alice"])
    assert ended(srv, toks["alice"], job)["state"] == "succeeded"
    out = rank_log(srv, toks["alice"], job).split()
    assert out[0] == u["alice"] and out[1] != "0", out


# ---- finding 7: the job's environment ----

def test_job_environment(sec):
    srv, u, toks, _ = sec
    job = srv.submit({"name": "env", "command": "env", "workdir": "/tmp", "env": {"MINE": "1"}},
                     token=toks["alice"])
    assert ended(srv, toks["alice"], job)["state"] == "succeeded"
    env = dict(line.split("=", 1) for line in rank_log(srv, toks["alice"], job).splitlines() if "=" in line)
    assert SECRET not in json.dumps(env)
    for k in ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "TRAINCTL_HOME", "TRAINCTL_STORAGE_CONFIG",
              "TRAINCTL_TOKEN"):
        assert k not in env, k
    assert env.get("MINE") == "1" and env.get("PATH") and env.get("TRAINCTL_JOB_ID") == job
    assert env.get("USER") == u["alice"] and env.get("HOME", "").endswith(u["alice"]), env


# ---- finding 11: logs of a job that never had a rank log ----

def test_logs_of_a_job_without_logs(sec):
    srv, u, toks, _ = sec
    job = srv.submit({"name": "noinput", "command": "true", "workdir": "/tmp",
                      "inputs": [{"from": "/nonexistent/input"}]}, token=toks["alice"])
    assert ended(srv, toks["alice"], job)["state"] == "failed"
    st, _, text = tcp(srv, "GET", f"/api/v1/jobs/{job}/logs", headers=bearer(toks["alice"]))
    assert st == 404 and "before any worker" in text, text
    st, _, _ = tcp(srv, "GET", "/api/v1/whoami", headers=bearer(toks["alice"]))
    assert st == 200  # the sanitizer build is still up (srv.stop checks its log)


# ---- finding 12 and the terminal: names and job-written text ----

def test_api_name_is_a_spec_name(sec):
    srv, u, toks, _ = sec
    st, _, text = tcp(srv, "POST", "/api/v1/jobs",
                      json.dumps({"spec": {"command": "true", "workdir": "/tmp"}, "name": "x\u001b[2J"}),
                      bearer(toks["alice"], **{"Content-Type": "application/json"}))
    assert st == 400 and "name" in text, text


def test_show_escapes_control_characters(sec):
    srv, u, toks, _ = sec
    job = srv.submit({"name": "esc", "command": "printf 'boom\\033[2J\\007\\n' >&2; exit 3",
                      "workdir": "/tmp"}, token=toks["alice"])
    assert ended(srv, toks["alice"], job)["state"] == "failed"
    assert "\x1b" in (srv.job(job, token=toks["alice"])["root_cause"] or ""), "the root cause keeps the bytes"
    saved = srv.token
    srv.token = toks["alice"]
    try:
        for args in (("show", job), ("ps", "-a", "-o", "id,name,result")):
            p = srv.cli(*args)
            assert p.returncode == 0, p.stderr
            assert "\x1b" not in p.stdout and "\x07" not in p.stdout, args
        assert "\\x1b[2J" in srv.cli("show", job).stdout
    finally:
        srv.token = saved


# ---- finding 14: what one user learns of another ----

def test_cross_user_refs(sec):
    srv, u, toks, _ = sec
    bobs = [srv.submit({"name": "bobs-secret", "command": "true", "workdir": "/tmp"}, token=toks["bob"])
            for _ in range(2)]
    mine = srv.submit({"name": "alices-own", "command": "true", "workdir": "/tmp"}, token=toks["alice"])
    for j in bobs:
        ended(srv, toks["bob"], j)
    ended(srv, toks["alice"], mine)
    # a prefix shared by everyone's ids: alice's own job, or at least none of bob's ids
    prefix = os.path.commonprefix(bobs + [mine])[:4]
    st, _, text = tcp(srv, "GET", f"/api/v1/jobs/{prefix}", headers=bearer(toks["alice"]))
    for j in bobs:
        assert j not in text, text
    # another user's job name does not resolve (not even as "belongs to another user")
    st, _, text = tcp(srv, "GET", "/api/v1/jobs/bobs-secret", headers=bearer(toks["alice"]))
    assert st == 404 and not any(j in text for j in bobs), text


def test_cross_user_spec_paths(sec):
    srv, u, toks, base = sec
    secret = base / "root-only.yaml"
    secret.write_text("aws_secret_access_key: X\n")
    os.chmod(secret, 0o600)
    spec = {"command": "true", "workdir": "/tmp", "devices": {"type": "gpu", "per_node": 1},
            "parallel": {"strategy": "auto", "model": "gpt2-small", "global_batch": 8, "cluster": str(secret)}}
    st, _, text = tcp(srv, "POST", "/api/v1/jobs", json.dumps({"spec": spec}),
                      bearer(toks["alice"], **{"Content-Type": "application/json"}))
    assert st == 400 and "aws_secret_access_key" not in text, text
    # the operator (root, through the socket) still reads it
    st, body = srv.call("POST", "/api/v1/jobs", {"spec": spec})
    assert st == 400 and "aws_secret_access_key" in body["error"], body


# ---- finding 15: no state folder in /tmp ----

def test_state_folder_without_home(trainctl):
    def tmp_state():
        try:
            st = os.stat("/tmp/.trainctl")
            return (st.st_uid, st.st_mtime_ns)
        except FileNotFoundError:
            return None
    before = tmp_state()
    with unix_accounts("carol") as u:
        name = u["carol"]
        home = subprocess.run(["getent", "passwd", name], capture_output=True, text=True).stdout.split(":")[5]
        p = subprocess.run(["setpriv", f"--reuid={name}", f"--regid={name}", "--init-groups", "env", "-i",
                            "PATH=/usr/bin:/bin", str(trainctl), "ps", "-a"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        # the account's own home from passwd, and /tmp/.trainctl untouched
        assert os.path.isdir(os.path.join(home, ".trainctl")), (home, p.stderr)
        assert tmp_state() == before


# ---- finding 16: the UI's headers ----

def test_security_headers(sec):
    srv, u, toks, _ = sec
    for path in ("/", "/app.js", "/api/v1/whoami"):
        st, h, _ = tcp(srv, "GET", path, headers=bearer(toks["alice"]))
        assert st == 200, path
        assert "frame-ancestors 'none'" in h.get("Content-Security-Policy", ""), path
        assert h.get("X-Frame-Options") == "DENY" and h.get("X-Content-Type-Options") == "nosniff", path


# ---- finding 9: connection limits and the header deadline ----

def test_limits_slow_clients_do_not_lock_others_out(trainctl, tmp_path):
    # the defaults: 32 connections per client address, 10 s for a request's headers
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:1")
    tok = token_for(trainctl, tmp_path / "state", "nobody")  # an account (uid 65534), not root
    slow = []
    try:
        # 40 slowloris connections from 127.0.0.1, each trickling a header line
        for _ in range(40):
            s = socket.socket()
            s.settimeout(5)
            try:
                s.connect(("127.0.0.1", srv.port))
                s.sendall(b"GET /api/v1/whoami HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                slow.append(s)
            except OSError:
                s.close()  # refused at once: over the per-client limit
        # while they trickle, another client is answered
        st, _, text = tcp(srv, "GET", "/api/v1/whoami", headers=bearer(tok), source="127.0.0.2")
        assert st == 200, text
        # trickled bytes do not extend the header deadline: every slow connection is closed
        open_ = list(slow)
        end = time.monotonic() + 60
        while open_ and time.monotonic() < end:
            for s in list(open_):
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    open_.remove(s)
            time.sleep(0.3)  # the trickle's pace, not a wait for a condition
        assert not open_, f"{len(open_)} trickling connections were still open after 60 s"
    finally:
        for s in slow:
            s.close()
        srv.stop()


def test_limits_full_gets_503(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:1", args=["--max-client-connections", "3"])
    tok = token_for(trainctl, tmp_path / "state", "nobody")
    streams = []
    try:
        # three event streams from 127.0.0.3 keep their connections busy
        for _ in range(3):
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30, source_address=("127.0.0.3", 0))
            c.request("GET", "/api/v1/events", headers=bearer(tok))
            r = c.getresponse()
            assert r.status == 200
            streams.append(c)
        st, h, text = tcp(srv, "GET", "/api/v1/whoami", headers=bearer(tok), source="127.0.0.3")
        assert st == 503 and h.get("Retry-After"), (st, text)
        # other clients are not affected
        st, _, _ = tcp(srv, "GET", "/api/v1/whoami", headers=bearer(tok), source="127.0.0.4")
        assert st == 200
        for c in streams:
            c.close()
        streams = []
        wait_until(lambda: tcp(srv, "GET", "/api/v1/whoami", headers=bearer(tok), source="127.0.0.3")[0] == 200,
                   what="127.0.0.3 is answered again once its streams closed")
    finally:
        for c in streams:
            c.close()
        srv.stop()
