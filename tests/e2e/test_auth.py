"""trainctl server with bearer tokens: 401 without one, 403 on another
user's job, an admin sees everything, tokens never land in logs; token list
and revoke.  A root server's token users are real accounts (useradd, removed
afterwards): a token of a name without one is refused (docs/security.md)."""
import http.client
import os
import subprocess

from server_fixture import start_server, sleeper, free_port, token_for, unix_accounts, wait_for


def test_tokens(trainctl, tmp_path):
    state = tmp_path / "state"
    with unix_accounts("alice", "bob", "ops") as u:
        _tokens(trainctl, state, u)


def _tokens(trainctl, state, u):
    A, B = u["alice"], u["bob"]
    alice, bob, root = (token_for(trainctl, state, A), token_for(trainctl, state, B),
                        token_for(trainctl, state, u["ops"], admin=True))
    srv = start_server(trainctl, state, fake="gpu:2")
    try:
        for path in ("/api/v1/jobs", "/api/v1/devices", "/api/v1/whoami", "/api/v1/events"):
            st, body = srv.call("GET", path, token="")
            assert st == 401 and "token" in body["error"], path
        st, body = srv.call("GET", "/api/v1/jobs", token="tc_wrong")
        assert st == 401
        st, body = srv.call("POST", "/api/v1/jobs", {"spec": sleeper(0.1)}, token="")
        assert st == 401
        job = srv.submit(sleeper(20, name="alices", workdir="/tmp"), token=alice)
        assert srv.job(job, token=alice)["user"] == A
        # bob: 403 on alice's job, and her jobs are not in his list
        for method, path in (("GET", f"/api/v1/jobs/{job}"), ("GET", f"/api/v1/jobs/{job}/logs"),
                             ("POST", f"/api/v1/jobs/{job}/stop"), ("POST", f"/api/v1/jobs/{job}/pause"),
                             ("DELETE", f"/api/v1/jobs/{job}")):
            st, body = srv.call(method, path, {} if method == "POST" else None, token=bob)
            assert st == 403, (method, path, body)
        st, body = srv.call("GET", "/api/v1/jobs", token=bob)
        assert body["total"] == 0
        st, body = srv.call("GET", f"/api/v1/jobs?user={A}", token=bob)
        assert st == 403
        st, body = srv.call("GET", "/api/v1/whoami", token=bob)
        assert body == {"user": B, "admin": False}
        # the admin sees and stops it
        st, body = srv.call("GET", "/api/v1/jobs", token=root)
        assert [j["id"] for j in body["jobs"]] == [job]
        st, body = srv.call("POST", f"/api/v1/jobs/{job}/stop", {}, token=root)
        assert st == 200
        srv.token = alice
        srv.wait_state(job, "killed")
        # the CLI with TRAINCTL_TOKEN
        p = srv.cli("ps")
        assert p.returncode == 0 and "alices" in p.stdout
        srv.token = bob
        p = srv.cli("show", job)
        assert p.returncode == 2 and "another user" in p.stderr
        srv.token = None
        # without a token and without the server's socket: 401, and how to pass a token
        srv.env["TRAINCTL_SOCKET"] = ""
        p = srv.cli("ps")
        assert p.returncode == 2 and "401" in p.stderr
        assert "set TRAINCTL_TOKEN" in p.stderr, p.stderr
        del srv.env["TRAINCTL_SOCKET"]
        st, body = srv.call("GET", "/api/v1/jobs", token="")
        assert st == 401 and "TRAINCTL_TOKEN" in body["error"], body
        srv.token = "not-a-token"
        p = srv.cli("ps")
        assert p.returncode == 2 and "TRAINCTL_TOKEN was not accepted" in p.stderr, p.stderr
        srv.token = None
        # through the socket the CLI needs no token: the kernel says who calls (root: admin)
        p = srv.cli("ps", "-a")
        assert p.returncode == 0 and "alices" in p.stdout, p.stderr
    finally:
        srv.stop()
    # tokens never in logs, the database or run folders
    for dirpath, _, files in os.walk(state):
        for f in files:
            data = open(os.path.join(dirpath, f), "rb").read()
            for t in (alice, bob, root):
                assert t.encode() not in data, os.path.join(dirpath, f)


def test_token_list_and_revoke(trainctl, tmp_path):
    """finding 10: taking tokens away never opens the server; revoke is immediate"""
    state = tmp_path / "state"
    env = dict(os.environ, TRAINCTL_HOME=str(state))
    with unix_accounts("alice") as u:
        t1 = token_for(trainctl, state, u["alice"])
        t2 = token_for(trainctl, state, u["alice"])
        srv = start_server(trainctl, state, fake="gpu:1")
        try:
            p = subprocess.run([str(trainctl), "token", "list"], env=env, capture_output=True, text=True)
            assert p.returncode == 0 and p.stdout.count(u["alice"]) == 2, p.stdout + p.stderr
            assert t1 not in p.stdout and t2 not in p.stdout  # hashes only
            first = p.stdout.splitlines()[1].split()[0]
            p = subprocess.run([str(trainctl), "token", "revoke", first], env=env, capture_output=True, text=True)
            assert p.returncode == 0 and "revoked 1 token" in p.stdout, p.stderr
            gone, kept = ((t1, t2) if srv.call("GET", "/api/v1/whoami", token=t1)[0] == 401 else (t2, t1))
            assert srv.call("GET", "/api/v1/whoami", token=gone)[0] == 401
            assert srv.call("GET", "/api/v1/whoami", token=kept)[0] == 200
            # a session cookie made from the kept token (the UI's Token button)
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
            c.request("POST", "/api/v1/session", body="{}",
                      headers={"Authorization": "Bearer " + kept, "Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            assert r.status == 200, r.status
            cookie = r.headers["Set-Cookie"].split(";")[0]
            assert "HttpOnly" in r.headers["Set-Cookie"] and "SameSite=Strict" in r.headers["Set-Cookie"]
            assert srv.call("GET", "/api/v1/whoami", token="", headers={"Cookie": cookie})[0] == 200
            p = subprocess.run([str(trainctl), "token", "revoke", "--user", u["alice"]], env=env,
                               capture_output=True, text=True)
            assert p.returncode == 0, p.stderr
            # revoking the token ends the sessions made from it
            assert srv.call("GET", "/api/v1/whoami", token="", headers={"Cookie": cookie})[0] == 401
            # no tokens left: still nobody gets in without credentials
            for tok in ("", kept):
                st, body = srv.call("GET", "/api/v1/whoami", token=tok)
                assert st == 401, body
        finally:
            srv.stop()


def test_wide_listen_still_needs_credentials(trainctl, tmp_path):
    """Without tokens a server may listen beyond loopback now: nothing is
    open without credentials, whatever the number of tokens (finding 10)."""
    port = free_port()
    env = dict(os.environ, TRAINCTL_HOME=str(tmp_path / "state"))
    p = subprocess.Popen([str(trainctl), "server", "--listen", f"0.0.0.0:{port}"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def whoami():
        assert p.poll() is None, f"the server exited {p.returncode}"
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/api/v1/whoami")
            return c.getresponse().status
        except OSError:
            return None
    try:
        assert wait_for(whoami, timeout=60) == 401
    finally:
        p.terminate()
        assert p.wait(timeout=60) == 0
