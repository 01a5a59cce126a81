"""Helpers of the endpoint tests (test_endpoints.py, test_endpoint_origin.py,
test_endpoint_relay.py, test_security_browser.py): Jupyter and its kernel's
WebSocket, and a browser's way through a root server's endpoint host names
(requests with a Host and a cookie, the session, the ticket, an echo
endpoint that answers with what it was sent)."""
import html
import http.client
import json
import os
import re
import shutil
import urllib.parse
import uuid

import pytest

from conftest import wait_until
from server_fixture import endpoint_up


# ---- Jupyter ----

def jupyter_ok():
    return shutil.which("jupyter-notebook") is not None


@pytest.fixture
def websocket():
    try:
        import websocket as ws
    except ImportError:
        pytest.fail("python3-websocket is missing (scripts/install-deps.sh)", pytrace=False)
    return ws


def run_cell(ws_mod, url, token, code, **kw):
    """Run code in a Jupyter kernel over its channels WebSocket; its stdout.
    token: a bearer token, or None (kw: create_connection's cookie=, origin=)."""
    ws = ws_mod.create_connection(url, timeout=120,
                                  header=[f"Authorization: Bearer {token}"] if token else [], **kw)
    try:
        msg_id = uuid.uuid4().hex
        ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": False,
                        "user_expressions": {}, "allow_stdin": False}}))
        out = ""
        while True:
            m = json.loads(ws.recv())
            if m.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "stream":
                out += m["content"]["text"]
            if m["msg_type"] == "error":
                raise AssertionError(m["content"])
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                return out
    finally:
        ws.close()


# ---- one host name per endpoint (--endpoint-host) ----

# the endpoint: what it was sent, as JSON (path, method, headers, body)
ECHO = r'''
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = json.dumps({"path": self.path, "method": self.command,
                           "headers": {k.lower(): v for k, v in self.headers.items()},
                           "body": self.rfile.read(n).decode()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_GET = do_POST = answer
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


EPHOST = "ep.test"  # the tests send Host: JOB-NAME.ep.test to 127.0.0.1


def request(port, method, path, cookie=None, headers=None, body=None, host=None):
    """One request to 127.0.0.1:port (Host: host[:port] when given), redirects not followed:
    (status, headers, body)."""
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=90)
    hdrs = dict(headers or {})
    if host:
        hdrs["Host"] = f"{host}:{port}"
    if cookie:
        hdrs["Cookie"] = cookie
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        hdrs.setdefault("Content-Type", "application/json")
    try:
        con.request(method, path, body=data, headers=hdrs)
        r = con.getresponse()
        text = r.read().decode()
        return r.status, r.headers, (json.loads(text) if "json" in r.headers.get("Content-Type", "")
                                     and text else text)
    finally:
        con.close()


def session(srv, token):
    """A browser's session cookie ("trainctl_session=..."), from a token."""
    st, hdrs, body = request(srv.port, "POST", "/api/v1/session",
                             headers={"Authorization": f"Bearer {token}"}, body={})
    assert st == 200, body
    return hdrs["Set-Cookie"].split(";")[0]


def redirect(srv, cookie, path):
    """The API's answer to a browser: (the endpoint's host name, enter path)."""
    st, hdrs, body = request(srv.port, "GET", path, cookie=cookie)
    assert st == 302, (st, body)
    u = urllib.parse.urlsplit(hdrs["Location"])
    assert u.scheme == "http" and u.hostname.endswith("." + EPHOST), hdrs["Location"]
    assert u.port == srv.port, hdrs["Location"]  # the API's own listener
    assert u.path == "/.trainctl/enter" and u.query.startswith("ticket="), hdrs["Location"]
    return u.hostname, f"{u.path}?{u.query}"


def enter(srv, host, enter_path):
    """Use a ticket: (the endpoint cookie "trainctl_endpoint=...", its attributes, where its
    page goes on to).  A page, not a redirect: the endpoint's own navigations start there."""
    st, hdrs, body = request(srv.port, "GET", enter_path, host=host)
    assert st == 200 and hdrs["Content-Type"].startswith("text/html"), (st, body)
    m = re.search(r'<meta http-equiv="refresh" content="0;url=([^"]*)">', body)
    assert m, body
    parts = [p.strip() for p in hdrs["Set-Cookie"].split(";")]
    return parts[0], parts[1:], html.unescape(m.group(1))


def open_endpoint(srv, cookie, path):
    """The whole browser's way in: (host, endpoint cookie, where it lands)."""
    host, ticket = redirect(srv, cookie, path)
    ep_cookie, _, loc = enter(srv, host, ticket)
    return host, ep_cookie, loc


def echo_job(srv, u, name="epo"):
    home = f"/home/{u['own']}"
    with open(f"{home}/echo.py", "w") as f:
        f.write(ECHO)
    os.chmod(f"{home}/echo.py", 0o644)
    spec = {"name": name, "command": "sleep 600", "workdir": home,
            "endpoints": [{"name": "web", "command": f"python3 {home}/echo.py $PORT"}]}
    job = srv.submit(spec)  # srv.token: the owner's
    srv.wait_state(job, "running")

    wait_until(lambda: endpoint_up(srv, job), what=lambda: srv.run_logs(job))
    return job
