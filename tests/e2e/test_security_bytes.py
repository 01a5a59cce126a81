"""Unauthenticated bytes (docs/security.md, "Unauthenticated bytes"): a
real root server with a real account, attacked from this test over TCP and
over the world-writable STATE/hub.sock.  Each test failed against the
server before the fix (issue 23, finding H3 and rule 5).

    H3  the hub's routes kept a 64 MiB body before they checked the job's
        secret: 30 connections without one grew the server by gigabytes
                                                    test_h3_thirty_hub_bodies_without_a_secret
    5   every route refuses on the headers, before the body is sent
                                                    test_refused_on_the_headers
        one memory budget for all request bodies    test_body_budget
        every listener keeps bodies through it      test_one_door_for_request_bodies
        1,000 hostile connections: the server stays up, small, and answers
        its operator                                test_thousand_hostile_connections
"""
import concurrent.futures
import http.client
import json
import os
import pathlib
import re
import resource
import select
import socket
import subprocess
import threading
import time

import pytest

from conftest import wait_until
from server_fixture import held, root_server, start_server, token_for

MIB = 1 << 20
CHUNK = b"x" * MIB  # what every body sender sends, 1 MiB at a time


def raise_nofile(need=1200):
    """A thousand sockets: this process's soft descriptor limit up to its hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"the hard descriptor limit ({hard}) is under the {need} this test opens")
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def rss_mib(pid):
    """The process's resident memory (VmRSS), MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


class RssWatch:
    """The largest RSS of pid seen while the with-block runs (sampled every 20 ms)."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_mib(self.pid))
            except (OSError, AssertionError):
                return  # the process is gone: the test's own checks say so
            self._stop.wait(0.02)

    def __enter__(self):
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def tcp_sock(srv, source="127.0.0.1", timeout=10):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", srv.port))
    return s


def hub_sock(srv, timeout=10):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.path.join(srv.state, "hub.sock"))  # blocking: waits while the backlog is full
    s.settimeout(timeout)
    return s


def head(method, path, length, **headers):
    """A request's headers, declaring a body of length bytes."""
    h = {"Host": "127.0.0.1", "Content-Type": "application/json", "Content-Length": str(length)}
    h.update({k.replace("_", "-"): v for k, v in headers.items()})
    return (f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
            + "\r\n").encode()


def hub_head(job, length, **headers):
    return head("POST", f"/api/v1/hub/{job}/events?stream=attack", length,
                Content_Type="application/x-ndjson", **headers)


def status_of(s, timeout):
    """The status of the answer on s within timeout s, or None (none came)."""
    s.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            part = s.recv(4096)
            if not part:
                break
            data += part
    except OSError:
        pass
    try:
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None
    except (IndexError, ValueError):
        return None


def send_body(s, nbytes):
    """Up to nbytes of body on s; the bytes sent (fewer when the server closed)."""
    sent = 0
    try:
        while sent < nbytes:
            n = min(len(CHUNK), nbytes - sent)
            s.sendall(CHUNK[:n])
            sent += n
    except OSError:
        pass
    return sent


def operator_ps(trainctl, srv):
    """The operator's `trainctl ps` over the server's socket (no token): seconds it took."""
    env = dict(srv.env, TRAINCTL_SERVER=srv.url, TRAINCTL_SOCKET=srv.socket)
    env.pop("TRAINCTL_TOKEN", None)
    t0 = time.monotonic()
    p = subprocess.run([str(trainctl), "ps", "--all"], env=env, capture_output=True, text=True,
                       timeout=60)
    took = time.monotonic() - t0
    assert p.returncode == 0, f"trainctl ps: {p.stderr}"
    return took


def user_get(srv, tok, source="127.0.0.1"):
    """An authenticated GET /api/v1/jobs over TCP: (status, seconds it took)."""
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60, source_address=(source, 0))
    try:
        c.request("GET", "/api/v1/jobs", headers={"Authorization": "Bearer " + tok})
        r = c.getresponse()
        r.read()
        return r.status, time.monotonic() - t0
    finally:
        c.close()


def running_job(srv, base):
    """A job of the first account, running (its hub secret exists)."""
    job = srv.submit(held(os.path.join(base, "release"), name="bytes"))
    srv.wait_state(job, ["running"])
    return job


# ---- rule 5: one door for request bodies ----

def test_one_door_for_request_bodies():
    """Every libmicrohttpd handler under src/ keeps a body's bytes through
    core/reqbody's one helper, reqbody_take (the budget) and never adds them to a buffer of its own,
    and every daemon polls (a descriptor past FD_SETSIZE is still served):
    a new listener that buffers on its own fails here."""
    src = pathlib.Path(__file__).resolve().parents[2] / "src"
    handlers, wrong = [], []
    for f in sorted(src.rglob("*.c")):
        text = f.read_text(errors="replace")
        name = f.relative_to(src.parent)
        if "upload_size" in text:
            handlers.append(name)
            if "reqbody_take(" not in text:
                wrong.append(f"{name}: takes request bodies without reqbody_take")
            for m in re.finditer(r"\b(sbuf_add\w*|memcpy|realloc|xrealloc)\([^;]*\bupload\b", text):
                wrong.append(f"{name}: keeps upload bytes itself: {m.group(0)}")
        for m in re.finditer(r"\bMHD_start_daemon\(([^,]*),", text):
            if not re.search(r"\bMHD_USE_E?POLL(_INTERNAL_THREAD|_INTERNALLY)?\b", m.group(1)):
                wrong.append(f"{name}: MHD_start_daemon({m.group(1).strip()}) selects")
    # the API (whose listener serves the endpoints' host names too) and the hub's sockets
    assert len(handlers) >= 2, handlers
    assert not wrong, "\n".join(wrong)


# ---- H3: the hub's routes keep no body before the job's secret ----

def test_h3_thirty_hub_bodies_without_a_secret(trainctl):
    raise_nofile()
    with root_server(trainctl, "tcbytes", "alice") as (srv, u, base):
        job = running_job(srv, base)
        base_rss = rss_mib(srv.proc.pid)
        socks = [tcp_sock(srv) for _ in range(15)] + [hub_sock(srv) for _ in range(15)]
        try:
            for s in socks:
                s.sendall(hub_head(job, 64 * MIB))
            # each sends its 64 MiB but the last byte: before the fix the server kept
            # every byte of it, waiting for the last, and grew by 30 x 64 MiB
            with RssWatch(srv.proc.pid) as w, \
                    concurrent.futures.ThreadPoolExecutor(30) as ex:
                sent = list(ex.map(lambda s: send_body(s, 64 * MIB - 1), socks))
            assert srv.proc.poll() is None, f"the server died:\n{srv.log()[-3000:]}"
            grew = max(w.peak, rss_mib(srv.proc.pid)) - base_rss
            assert grew < 100, (f"the server grew by {grew:.0f} MiB for 30 bodies without a secret"
                                f" (bytes sent: {sum(sent) // MIB} MiB)")
        finally:
            for s in socks:
                s.close()
        took = operator_ps(trainctl, srv)
        assert took < 5, f"trainctl ps took {took:.1f} s"
        open(os.path.join(base, "release"), "w").close()


# ---- rule 5: refused on the headers, before the body is sent ----

def test_refused_on_the_headers(trainctl):
    """Headers only, a body declared and not sent: the refusal must come at
    once (before the fix the server waited for the body to keep it)."""
    with root_server(trainctl, "tcbytes", "alice") as (srv, u, base):
        job = running_job(srv, base)
        cases = [
            ("hub over TCP, no secret", lambda: tcp_sock(srv), hub_head(job, 64 * MIB), 401),
            ("hub over TCP, wrong secret", lambda: tcp_sock(srv),
             hub_head(job, 64 * MIB, X_Trainctl_Hub_Secret="wrong"), 401),
            ("hub over TCP, unknown job", lambda: tcp_sock(srv), hub_head("nosuchjob", 64 * MIB, X_Trainctl_Hub_Secret="x"), 404),
            ("hub.sock, no secret", lambda: hub_sock(srv), hub_head(job, 64 * MIB), 401),
            ("hub.sock, wrong secret", lambda: hub_sock(srv),
             hub_head(job, 64 * MIB, X_Trainctl_Hub_Secret="wrong"), 401),
            ("API submit, no token", lambda: tcp_sock(srv), head("POST", "/api/v1/jobs", MIB), 401),
            ("API submit, bad token", lambda: tcp_sock(srv),
             head("POST", "/api/v1/jobs", MIB, Authorization="Bearer tc_not_a_token"), 401),
            ("API secret, no token", lambda: tcp_sock(srv),
             head("POST", "/api/v1/secrets/x", MIB), 401),
            ("a route without a body", lambda: tcp_sock(srv),
             head("GET", "/api/v1/whoami", 64 * MIB, Authorization="Bearer " + srv.token), 413),
            ("a page, 64 MiB declared", lambda: tcp_sock(srv), head("GET", "/", 64 * MIB), 413),
        ]
        wrong = []
        for what, connect, req, want in cases:
            s = connect()
            try:
                s.sendall(req)
                got = status_of(s, 10)
            finally:
                s.close()
            if got != want:
                wrong.append(f"{what}: {got} (want {want} before the body)")
        assert not wrong, "\n".join(wrong)
        # a short body of a refused request is read and dropped: the client reads its answer
        st, body = srv.call("POST", f"/api/v1/hub/{job}/events?stream=s", raw=b'{"seq":1,"x":1}\n',
                            token="", unix=False, headers={"Content-Type": "application/x-ndjson"})
        assert st == 401 and "secret" in json.dumps(body).lower(), (st, body)
        st, body = srv.call("POST", "/api/v1/jobs", {"spec": {}}, token="tc_not_a_token")
        assert st == 401, (st, body)
        # an authenticated short body still reaches its route; a short one on a route
        # without a body is dropped
        st, body = srv.call("POST", "/api/v1/jobs", {"spec": {"name": "x"}})
        assert st == 400, (st, body)
        st, body = srv.call("POST", f"/api/v1/jobs/{job}/stop", raw=b"{}")
        assert st in (200, 202), (st, body)


# ---- rule 5: one memory budget for every request body ----

def test_body_budget(trainctl, tmp_path):
    state = tmp_path / "state"
    tok = token_for(trainctl, state, "nobody")
    srv = start_server(trainctl, state, fake="gpu:1", args=["--body-memory", "16"])
    socks = []
    try:
        # 24 submits of the largest body (1 MiB) each hold their room until it is sent:
        # 16 MiB hold 15 of them, the others are refused at once, before their bodies
        for i in range(24):
            s = tcp_sock(srv, source=f"127.0.2.{1 + i % 2}")
            s.sendall(head("POST", "/api/v1/jobs", MIB, Authorization="Bearer " + tok))
            socks.append(s)
        answered = {}

        def nine_refused():
            ready, _, _ = select.select([s for s in socks if s not in answered], [], [], 0.2)
            for s in ready:
                answered[s] = status_of(s, 5)
            return len(answered) >= 9

        wait_until(nine_refused, timeout=30, what=lambda: f"9 refusals, not {list(answered.values())}")
        assert list(answered.values()) == [503] * 9, answered.values()
        # the 15 with room wait for their bodies
        ready, _, _ = select.select([s for s in socks if s not in answered], [], [], 0.5)
        assert not ready, f"{len(ready)} more were answered"
        st, _ = user_get(srv, tok)
        assert st == 200  # bodiless requests go on
        # the room comes back when the bodies' connections end
        for s in socks:
            s.close()
        socks = []
        wait_until(lambda: srv.call("POST", "/api/v1/jobs", {"spec": {"name": "x"}}, token=tok)[0] == 400,
                   what="a submit is answered again once the held bodies are gone")
        p = subprocess.run([str(trainctl), "server", "--body-memory", "1"], capture_output=True,
                           text=True, env=dict(srv.env, TRAINCTL_HOME=str(tmp_path / "other")))
        assert p.returncode == 2 and "--body-memory" in p.stderr, p.stderr
    finally:
        for s in socks:
            s.close()
        srv.stop()


# ---- rule 5: 1,000 hostile connections ----

def test_thousand_hostile_connections(trainctl):
    """Loopback only, bounded in time: 400 connections over TCP (spread over
    client addresses, under the per-client and total limits) and 600 over
    hub.sock, idle, slow headers, and bodies of 64 MiB declared without a
    secret.  During and after, the operator's `trainctl ps` and a user's GET
    answer within seconds, and the server's RSS stays small."""
    raise_nofile()
    with root_server(trainctl, "tcbytes", "alice") as (srv, u, base):
        job = running_job(srv, base)
        pid = srv.proc.pid
        base_rss = rss_mib(pid)
        conns, kinds = [], []
        t0 = time.monotonic()

        def tcp(i):
            return tcp_sock(srv, source=f"127.0.{10 + i // 25}.{1 + i % 25}")

        try:
            with RssWatch(pid) as w:
                for i in range(400):
                    kind = "idle" if i < 150 else "slow" if i < 250 else "body"
                    conns.append(tcp(i))
                    kinds.append(kind)
                for i in range(600):
                    kind = "idle" if i < 200 else "slow" if i < 350 else "body"
                    conns.append(hub_sock(srv))
                    kinds.append(kind)
                for s, kind in zip(conns, kinds):
                    if kind == "slow":
                        s.sendall(b"POST /api/v1/hub/" + job.encode() + b"/events HTTP/1.1\r\nHost: x\r\n")
                    elif kind == "body":
                        s.sendall(hub_head(job, 64 * MIB))
                # the operator, while all of them are open
                during_ps = operator_ps(trainctl, srv)
                during_get = user_get(srv, srv.token)
                # each body sender tries 4 MiB: before the fix the server kept them all
                bodies = [s for s, k in zip(conns, kinds) if k == "body"]
                with concurrent.futures.ThreadPoolExecutor(32) as ex:
                    sent = sum(ex.map(lambda s: send_body(s, 4 * MIB), bodies))
                assert srv.proc.poll() is None, f"the server died:\n{srv.log()[-3000:]}"
                again_ps = operator_ps(trainctl, srv)
                again_get = user_get(srv, srv.token)
                peak = max(w.peak, rss_mib(pid))
        finally:
            for s in conns:
                s.close()
        assert srv.proc.poll() is None, f"the server died:\n{srv.log()[-3000:]}"
        assert during_ps < 5 and again_ps < 5, f"trainctl ps took {during_ps:.1f} s, {again_ps:.1f} s"
        assert during_get[0] == 200 and again_get[0] == 200, (during_get, again_get)
        assert during_get[1] < 5 and again_get[1] < 5, (during_get, again_get)
        assert peak - base_rss < 150, \
            f"the server grew by {peak - base_rss:.0f} MiB (body bytes sent: {sent // MIB} MiB)"
        # after: everything answers, and the server is its size again
        assert operator_ps(trainctl, srv) < 5
        st, took = user_get(srv, srv.token)
        assert st == 200 and took < 5
        assert time.monotonic() - t0 < 60
        open(os.path.join(base, "release"), "w").close()
