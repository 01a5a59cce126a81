"""trainctl server with bearer tokens: 401 without one, 403 on another
user's job, an admin sees everything, tokens never land in logs, and no
listening beyond loopback without tokens."""
import os
import subprocess

from server_fixture import start_server, sleeper, free_port


def token(trainctl, state, user, admin=False):
    env = dict(os.environ, TRAINCTL_HOME=str(state))
    p = subprocess.run([str(trainctl), "token", "create", "--user", user] + (["--admin"] if admin else []),
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    t = p.stdout.strip()
    assert t.startswith("tc_") and len(t) > 40
    return t


def test_tokens(trainctl, tmp_path):
    state = tmp_path / "state"
    alice, bob, root = (token(trainctl, state, "alice"), token(trainctl, state, "bob"),
                        token(trainctl, state, "ops", admin=True))
    srv = start_server(trainctl, state, fake="gpu:2")
    try:
        for path in ("/api/v1/jobs", "/api/v1/devices", "/api/v1/whoami", "/api/v1/events"):
            st, body = srv.call("GET", path, token="")
            assert st == 401 and "token" in body["error"], path
        st, body = srv.call("GET", "/api/v1/jobs", token="tc_wrong")
        assert st == 401
        st, body = srv.call("POST", "/api/v1/jobs", {"spec": sleeper(0.1)}, token="")
        assert st == 401
        job = srv.submit(sleeper(20, name="alices"), token=alice)
        assert srv.job(job, token=alice)["user"] == "alice"
        # bob: 403 on alice's job, and her jobs are not in his list
        for method, path in (("GET", f"/api/v1/jobs/{job}"), ("GET", f"/api/v1/jobs/{job}/logs"),
                             ("POST", f"/api/v1/jobs/{job}/stop"), ("POST", f"/api/v1/jobs/{job}/pause"),
                             ("DELETE", f"/api/v1/jobs/{job}")):
            st, body = srv.call(method, path, {} if method == "POST" else None, token=bob)
            assert st == 403, (method, path, body)
        st, body = srv.call("GET", "/api/v1/jobs", token=bob)
        assert body["total"] == 0
        st, body = srv.call("GET", "/api/v1/jobs?user=alice", token=bob)
        assert st == 403
        st, body = srv.call("GET", "/api/v1/whoami", token=bob)
        assert body == {"user": "bob", "admin": False}
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
        p = srv.cli("ps")
        assert p.returncode == 2 and "401" in p.stderr
        # how to pass a token, in the CLI's message and in the API's answer (issue 16, 3.13)
        assert "set TRAINCTL_TOKEN" in p.stderr, p.stderr
        st, body = srv.call("GET", "/api/v1/jobs", token=None)
        assert st == 401 and "TRAINCTL_TOKEN" in body["error"], body
        srv.token = "not-a-token"
        p = srv.cli("ps")
        assert p.returncode == 2 and "TRAINCTL_TOKEN was not accepted" in p.stderr, p.stderr
        srv.token = None
    finally:
        srv.stop()
    # tokens never in logs, the database or run folders
    for dirpath, _, files in os.walk(state):
        for f in files:
            data = open(os.path.join(dirpath, f), "rb").read()
            for t in (alice, bob, root):
                assert t.encode() not in data, os.path.join(dirpath, f)


def test_no_wide_listen_without_tokens(trainctl, tmp_path):
    env = dict(os.environ, TRAINCTL_HOME=str(tmp_path / "state"))
    p = subprocess.run([str(trainctl), "server", "--listen", f"0.0.0.0:{free_port()}"], env=env,
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 2 and "without tokens" in p.stderr
