"""One host name per endpoint (docs/endpoints.md#one-host-name-per-endpoint,
docs/security.md): a root server with real accounts.

With `--endpoint-host ep.test`:
  - a browser's session on the API's host is sent on (302) to the
    endpoint's own host name, JOB-NAME.ep.test on the API's port, with a
    one-time ticket; the ticket becomes a host-only HttpOnly cookie of that
    endpoint alone, used up at once, and dead after its seconds;
  - the endpoint cookie opens nothing of the API, and the API's cookie or
    token nothing of the endpoint host (and never reaches the endpoint);
    the API's cookie has no Domain;
  - a page of the endpoint host cannot change anything through the API
    with the admin's cookie (Origin / Sec-Fetch-Site), nor read it (no
    CORS); another origin cannot change anything in the endpoint;
  - an admin opening a user's endpoint lands on the endpoint's host too;
  - Jupyter works there, its kernel's WebSocket included;
  - the host name is forgotten with the job.
Without it: the owner's browser is served on the API's host, an admin's
gets 403 naming the option; scripts (tokens) are proxied as before.
`--endpoint-ports` is gone: it refuses, naming --endpoint-host.
"""
import json
import time

import pytest

from conftest import wait_until
from endpoint_helpers import (EPHOST, echo_job, enter, jupyter_ok, open_endpoint, redirect, request,  # noqa: F401
                              run_cell, session, websocket)  # (websocket: a fixture)
from server_fixture import root_server, token_for


def stop(srv, job):
    st, body = srv.call("POST", f"/api/v1/jobs/{job}/stop", {})
    assert st == 200, body
    srv.wait_state(job, "killed")


def test_own_host_name(trainctl):
    with root_server(trainctl, "tc-epo-", "own", "adm", "oth",
                     args=["--endpoint-host", EPHOST],
                     env={"TRAINCTL_ENDPOINT_TICKET_SECONDS": "3"}) as (srv, u, _):
        admin = token_for(trainctl, srv.state, u["adm"], admin=True)
        job = echo_job(srv, u)
        base = f"/jobs/{job}/endpoints/web"
        own_ck = session(srv, srv.token)
        adm_ck = session(srv, admin)
        # the API's cookie is host-only: no Domain, so no endpoint host ever gets it
        st, hdrs, _ = request(srv.port, "POST", "/api/v1/session",
                              headers={"Authorization": f"Bearer {srv.token}"}, body={})
        assert "domain" not in hdrs["Set-Cookie"].lower(), hdrs["Set-Cookie"]

        # the owner's browser: sent on to JOB-NAME.EPHOST, the API's port, with a ticket
        host, ticket = redirect(srv, own_ck, f"{base}/a/b.txt?x=1")
        assert host == f"{job}-web.{EPHOST}", host
        ep_ck, attrs, loc = enter(srv, host, ticket)
        assert ep_ck.startswith("trainctl_endpoint=")
        assert "Path=/" in attrs and "HttpOnly" in attrs and "SameSite=Strict" in attrs, attrs
        assert not [a for a in attrs if a.lower().startswith("domain")], attrs
        assert loc == f"{base}/a/b.txt?x=1"
        # the ticket is used up
        st, _, body = request(srv.port, "GET", ticket, host=host)
        assert st == 403 and "used already or has expired" in body["error"], body

        # the endpoint, with the API's cookie and a token beside its own: neither reaches it
        st, _, e = request(srv.port, "GET", loc, cookie=f"a=1; {own_ck}; {ep_ck}; b=2", host=host,
                           headers={"Authorization": f"Bearer {srv.token}"})
        assert st == 200, e
        assert e["path"] == "/a/b.txt?x=1"  # a generic endpoint: the prefix taken off
        assert e["headers"]["cookie"] == "a=1; b=2", e
        assert "authorization" not in e["headers"], e

        # the endpoint host takes no API credential, and serves nothing else
        for cookie, hdrs in ((own_ck, {}), (adm_ck, {}), (None, {"Authorization": f"Bearer {admin}"})):
            st, _, body = request(srv.port, "GET", f"{base}/", cookie=cookie, headers=hdrs, host=host)
            assert st == 401 and "one-time" in body["error"], (st, body)
        for path in ("/api/v1/whoami", "/", "/login?ticket=x", "/jobs/other/endpoints/web/",
                     f"/jobs/{job}/endpoints/webx/"):
            st, _, body = request(srv.port, "GET", path, cookie=ep_ck, host=host)
            assert st == 404, (path, st, body)
        # names under EPHOST that are no endpoint's: nothing
        for other in (f"x.{host}", f"{job}-webx.{EPHOST}", f"{job}-web_.{EPHOST}"):
            st, _, body = request(srv.port, "GET", f"{base}/", cookie=ep_ck, host=other)
            assert st == 404, (other, st, body)
        # ... and the API takes no endpoint cookie, nor the endpoint domain itself
        st, _, body = request(srv.port, "GET", "/api/v1/whoami", cookie=ep_ck)
        assert st == 401, body
        st, _, body = request(srv.port, "GET", f"{base}/", cookie=ep_ck)
        assert st == 401, body
        st, _, body = request(srv.port, "GET", "/api/v1/whoami", cookie=own_ck, host=EPHOST)
        assert st == 403, body

        # a ticket expires (3 s here): one left unused is refused afterwards
        host2, ticket = redirect(srv, own_ck, f"{base}/")
        t0 = time.monotonic()
        assert host2 == host  # one host per endpoint
        wait_until(lambda: time.monotonic() - t0 > 3.5, timeout=30, what="the ticket's 3 s")
        st, _, body = request(srv.port, "GET", ticket, host=host)
        assert st == 403 and "expired" in body["error"], body

        # an admin opening the user's endpoint: its own host too, as the admin
        ahost, a_ck, aloc = open_endpoint(srv, adm_ck, f"{base}?q=1")
        assert ahost == host and a_ck != ep_ck
        assert aloc == f"{base}/?q=1"  # the root is a folder: its slash
        st, _, e = request(srv.port, "GET", aloc, cookie=f"{adm_ck}; {a_ck}", host=host)
        assert st == 200 and "cookie" not in e["headers"] and e["path"] == "/?q=1", e
        # the value alone, under another name, is nothing
        st, _, body = request(srv.port, "GET", aloc, cookie=a_ck.replace("trainctl_endpoint=", "x="),
                              host=host)
        assert st == 401, body
        # another user: nothing
        oth_ck = session(srv, token_for(trainctl, srv.state, u["oth"]))
        st, _, body = request(srv.port, "GET", f"{base}/", cookie=oth_ck)
        assert st in (403, 404), body

        # a page of the endpoint host, with the admin's cookie (a browser of a same-site
        # deployment would send it): it changes nothing through the API ...
        page = f"http://{host}:{srv.port}"
        before = len(srv.call("GET", "/api/v1/jobs?limit=1000", token="", unix=True)[1]["jobs"])
        for hdrs in ({"Origin": page, "Sec-Fetch-Site": "same-site"}, {"Origin": page},
                     {"Sec-Fetch-Site": "same-site"}, {"Sec-Fetch-Site": "cross-site"}):
            st, _, body = request(srv.port, "POST", "/api/v1/jobs", cookie=adm_ck, headers=hdrs,
                                  body={"spec": {"name": "forged", "command": "true"}})
            assert st == 403 and "another origin" in body["error"], (hdrs, st, body)
            st, _, body = request(srv.port, "POST", f"/api/v1/jobs/{job}/stop", cookie=adm_ck,
                                  headers=hdrs, body={})
            assert st == 403, (hdrs, st, body)
        assert len(srv.call("GET", "/api/v1/jobs?limit=1000", token="", unix=True)[1]["jobs"]) == before
        assert srv.job(job)["state"] == "running"
        # ... and reads nothing: no CORS header lets its script see an answer
        st, hdrs, _ = request(srv.port, "GET", "/api/v1/jobs", cookie=adm_ck,
                              headers={"Origin": page, "Sec-Fetch-Site": "same-site"})
        assert not [h for h in hdrs if h.lower().startswith("access-control-")], hdrs
        # the API's browser WebSocket and POSTs go to the endpoint's host, not here
        st, _, body = request(srv.port, "POST", f"{base}/x", cookie=own_ck, body={})
        assert st == 403 and "its own host name" in body["error"], body

        # on the endpoint host: its own pages may POST, another origin's may not
        st, _, e = request(srv.port, "POST", f"{base}/form", cookie=ep_ck, host=host,
                           headers={"Origin": page, "Sec-Fetch-Site": "same-origin",
                                    "Content-Type": "text/plain"}, body={"k": 1})
        assert st == 200 and e["method"] == "POST" and json.loads(e["body"]) == {"k": 1}, e
        for hdrs in ({"Origin": srv.url}, {"Origin": f"http://x{host}:{srv.port}"},
                     {"Origin": page, "Sec-Fetch-Site": "same-site"}):
            st, _, body = request(srv.port, "POST", f"{base}/form", cookie=ep_ck, headers=hdrs,
                                  body={}, host=host)
            assert st == 403, (hdrs, st, body)

        # the CLI: the server's URLs, which send a browser on
        r = srv.cli("endpoints", job)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[1].split() == ["web", "generic", "running", f"{srv.url}{base}/"]
        assert "own host name" in r.stdout

        # the host is forgotten with the job
        stop(srv, job)

        def gone():
            return request(srv.port, "GET", loc, cookie=ep_ck, host=host)[0] == 404
        wait_until(gone, timeout=60, what="the endpoint's host name to be forgotten")


def test_endpoint_ports_is_gone(trainctl, tmp_path):
    """--endpoint-ports refuses, naming the option that replaced it (exit 2)."""
    import subprocess
    for args, want in ((["--endpoint-ports", "20000-20019"], "--endpoint-host"),
                       (["--endpoint-host", "EP.test"], "--endpoint-host"),
                       (["--endpoint-host", "10.0.0.1"], "--endpoint-host"),
                       (["--endpoint-host", "ep.test", "--host-name", "api.ep.test"], "--host-name")):
        r = subprocess.run([trainctl, "server", "--state", str(tmp_path / "st"), "--listen",
                            "127.0.0.1:1", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and want in r.stderr, (args, r.returncode, r.stderr)


def test_fallback_owner_only(trainctl):
    with root_server(trainctl, "tc-epf-", "own", "adm") as (srv, u, _):
        admin = token_for(trainctl, srv.state, u["adm"], admin=True)
        job = echo_job(srv, u, name="epf")
        base = f"/jobs/{job}/endpoints/web"
        # the owner's browser: on the server's origin, as before
        st, _, e = request(srv.port, "GET", f"{base}/x", cookie=session(srv, srv.token))
        assert st == 200 and e["path"] == "/x", e
        # an admin's browser: refused, naming the way out
        st, _, body = request(srv.port, "GET", f"{base}/x", cookie=session(srv, admin))
        assert st == 403 and "--endpoint-host" in body["error"], body
        # a script (a token; the socket's root) is no browser: proxied
        st, _, e = request(srv.port, "GET", f"{base}/x", headers={"Authorization": f"Bearer {admin}"})
        assert st == 200, e
        st, e = srv.call("GET", f"{base}/x", token="", unix=True)
        assert st == 200, e
        r = srv.cli("endpoints", job)
        assert r.returncode == 0 and "owner only" in r.stdout, r.stdout + r.stderr
        stop(srv, job)


def test_jupyter_on_its_own_host_name(trainctl, websocket):  # noqa: F811 (the fixture)
    if not jupyter_ok():
        pytest.fail("jupyter-notebook is missing (scripts/install-deps.sh)", pytrace=False)
    with root_server(trainctl, "tc-epj-", "own", args=["--endpoint-host", EPHOST]) as (srv, u, _):
        home = f"/home/{u['own']}"
        job = srv.submit({"name": "nb", "command": "sleep 600", "workdir": home,
                          "endpoints": ["jupyter"]})
        srv.wait_state(job, "running")
        base = f"/jobs/{job}/endpoints/jupyter"

        def running():
            st, body = srv.call("GET", f"/api/v1/jobs/{job}/endpoints")
            eps = body.get("endpoints", []) if st == 200 else []
            return bool(eps) and eps[0]["state"] == "running"
        wait_until(running, what=lambda: srv.run_logs(job))
        host, ck, loc = open_endpoint(srv, session(srv, srv.token), f"{base}/tree")
        assert loc == f"{base}/tree"
        page = f"http://{host}:{srv.port}"

        def status():
            st, _, body = request(srv.port, "GET", f"{base}/api/status", cookie=ck, host=host)
            return body if st == 200 else None
        wait_until(status, timeout=180, what=lambda: open(
            f"{srv.state}/runs/{job}/logs/endpoint-jupyter.log").read()[-3000:])
        st, _, body = request(srv.port, "GET", f"{base}/tree", cookie=ck, host=host)
        assert st == 200 and "<html" in body.lower(), body[:500]
        st, _, k = request(srv.port, "POST", f"{base}/api/kernels", cookie=ck, host=host,
                           headers={"Origin": page}, body={"name": "python3"})
        assert st == 201, k
        url = f"ws://127.0.0.1:{srv.port}{base}/api/kernels/{k['id']}/channels"
        hh = f"{host}:{srv.port}"  # the Host header
        assert run_cell(websocket, url, None, "print(6*7)", cookie=ck, origin=page,
                        host=hh) == "42\n"
        # a WebSocket from another origin (the API's page, another endpoint's) is refused
        with pytest.raises(websocket.WebSocketBadStatusException) as e:
            run_cell(websocket, url, None, "print(1)", cookie=ck, origin=srv.url, host=hh)
        assert e.value.status_code == 403
        # without the cookie: nothing
        with pytest.raises(websocket.WebSocketBadStatusException) as e:
            run_cell(websocket, url, srv.token, "print(1)", origin=page, host=hh)
        assert e.value.status_code == 401
        stop(srv, job)
