"""Endpoints on another host (docs/endpoints.md "Endpoints on other nodes"):
a root `trainctl server` on the login host of the real multi-host cluster
(mhost_cluster.py: login + c1 + c2, each its own network namespace, so a
node's 127.0.0.1 is NOT reachable from the login host) runs a 2-node Slurm
job with a generic endpoint on node 0; the server's proxy reaches it through
the connections node 0 parks at the server (the relay): plain HTTP side by
side, a Jupyter kernel's WebSocket running one cell, again after the server
restarts; after the job's end the route is refused and no relay connection
is left.

Needs root (namespaces); the cluster fixture is test_multihost.py's."""
import concurrent.futures
import json
import os

import pytest
import signal
import socket

from conftest import wait_until
from endpoint_helpers import jupyter_ok, run_cell, websocket  # noqa: F401  (a fixture)
from mhost_cluster import TRAINCTL_HOME
from mhost_jobs import mhost, ns_pids, proc_file  # noqa: F401  (mhost: the fixture)
from server_fixture import Server, free_port, unix_accounts

WWW = "/tmp/relay-www"
ENDED = ("succeeded", "failed", "killed", "lost")


class LoginServer(Server):
    """server_fixture.Server, run on the cluster's login host: its state is
    login's $TRAINCTL_HOME, reached from here through the host's root, and its
    Unix socket (root: the admin) is how the test calls it."""

    def __init__(self, mhost, port=None):
        self.mhost = mhost
        self.inside = TRAINCTL_HOME
        super().__init__(mhost.trainctl, str(mhost.path("login", TRAINCTL_HOME)),
                         port or free_port(), {}, [])
        self.addr = f"{mhost.addr('login')}:{self.port}"
        self.url = f"http://{self.addr}"

    def start(self):
        os.makedirs(self.state, exist_ok=True)
        with open(self.log_path, "a") as log:
            self.proc = self.mhost.popen(
                "login", [self.mhost.trainctl, "server", "--listen", self.addr, "--state",
                          self.inside, "--allow-root-jobs"],  # the test submits as root
                env={"TRAINCTL_HUB_WAIT": "10"}, stdout=log, stderr=log, start_new_session=True)
        wait_until(self._up, timeout=90, what=lambda: self.log()[-3000:])
        return self

    def _up(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited {self.proc.returncode}:\n{self.log()}")
        try:
            st, _ = self.call("GET", "/api/v1/whoami")
            return st == 200
        except OSError:
            return False


def login_connections(mhost, port):
    """established TCP connections of the server's port on login"""
    p = mhost.run("login", ["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
                  check=True)
    return [l for l in p.stdout.splitlines() if l.strip()]


def port_open_on(mhost, host, port):
    p = mhost.run(host, ["python3", "-c", "import socket,sys; socket.create_connection(("
                         f"'127.0.0.1', {port}), timeout=2)"])
    return p.returncode == 0


def kernel_cell(srv, websocket, job):  # noqa: F811
    """One cell in a new kernel of the job's Jupyter, its channels WebSocket
    through the server's Unix socket (root: the admin): its output."""
    base = f"/jobs/{job}/endpoints/jupyter"
    st, k = srv.call("POST", f"{base}/api/kernels", {"name": "python3"})
    assert st == 201, k
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(srv.socket)
    try:
        return run_cell(websocket, f"ws://127.0.0.1:{srv.port}{base}/api/kernels/{k['id']}/channels",
                        None, "import socket; print(6*7, socket.gethostname())", socket=s)
    finally:
        s.close()


def test_endpoint_of_a_slurm_job_on_another_host(mhost, websocket):  # noqa: F811
    if not jupyter_ok():
        pytest.fail("jupyter-notebook is missing (scripts/install-deps.sh)", pytrace=False)
    with unix_accounts("adm") as u:
        # an admin's token for the CLI over TCP (root's own is refused by a root server)
        tok = mhost.tc("login", "token", "create", "--user", u["adm"], "--admin",
                       check=True).stdout.strip()
        relayed_job(mhost, tok, websocket)


def relayed_job(mhost, tok, websocket):  # noqa: F811
    srv = LoginServer(mhost).start()
    job = None
    try:
        spec = {"name": "relayed", "workdir": "/tmp", "backend": "slurm", "nodes": 2,
                "command": f'mkdir -p {WWW} && echo "served by $(hostname)" > {WWW}/index.txt'
                           ' && exec sleep 600',
                "devices": {"type": "cpu", "per_node": 1},
                "endpoints": ["jupyter", {"name": "web", "command": f"mkdir -p {WWW} && exec python3 -m"
                               f" http.server --bind 127.0.0.1 --directory {WWW} $PORT"}]}
        job = srv.submit(spec)
        srv.wait_state(job, "running", timeout=240)

        def web():
            st, body = srv.call("GET", f"/api/v1/jobs/{job}/endpoints")
            assert st == 200, body
            e = {e["name"]: e for e in body["endpoints"]}
            return e["web"] if all(e.get(n, {}).get("state") == "running"
                                   for n in ("web", "jupyter")) else None
        ep = wait_until(web, timeout=120, what=lambda: srv.log()[-2000:] + srv.run_logs(job))
        # recorded on node 0, a compute host: its 127.0.0.1 is not the login host's
        node0 = ep["host"]
        assert node0 in ("c1", "c2"), ep
        wait_until(lambda: port_open_on(mhost, node0, ep["port"]), timeout=60,
                   what=f"the endpoint listening on {node0}")
        assert not port_open_on(mhost, "login", ep["port"])

        # through the proxy on the login host: the relay
        def page():
            st, body = srv.call("GET", f"/jobs/{job}/endpoints/web/index.txt")
            return body if st == 200 else None
        body = wait_until(page, timeout=60, what=lambda: srv.log()[-2000:] + srv.run_logs(job))
        assert body == f"served by {node0}\n", body
        # side by side: more requests than parked connections, each answered
        with concurrent.futures.ThreadPoolExecutor(6) as ex:
            got = list(ex.map(lambda _: srv.call("GET", f"/jobs/{job}/endpoints/web/index.txt"),
                              range(12)))
        assert all(st == 200 and b == f"served by {node0}\n" for st, b in got), got
        # bounded: the node parks a few per endpoint, not one per request
        assert len(login_connections(mhost, srv.port)) <= 16

        # Jupyter: its REST API, then a kernel's WebSocket, pumped through the relay
        def jupyter_up():
            st, body = srv.call("GET", f"/jobs/{job}/endpoints/jupyter/api/status")
            return body if st == 200 else None
        wait_until(jupyter_up, timeout=180, what=lambda: srv.log()[-2000:] + srv.run_logs(job))
        assert kernel_cell(srv, websocket, job) == f"42 {node0}\n"

        # the server restarts (its Slurm job goes on): node 0 parks its connections anew
        port = srv.port
        srv.stop(signal.SIGTERM)
        srv = LoginServer(mhost, port).start()
        body = wait_until(page, timeout=60, what=lambda: srv.log()[-2000:] + srv.run_logs(job))
        assert body == f"served by {node0}\n", body

        # `trainctl endpoints JOB` through the server: the proxy's URL
        p = mhost.tc("login", "endpoints", job, "--json", "--server", srv.url,
                     env={"TRAINCTL_TOKEN": tok})
        assert p.returncode == 0, p.stderr
        listed = json.loads(p.stdout)["endpoints"]
        assert sorted(e["url"] for e in listed) == [f"{srv.url}/jobs/{job}/endpoints/{n}/"
                                                    for n in ("jupyter", "web")], listed

        # the job ends: the route is refused and no relay connection is left
        st, body = srv.call("POST", f"/api/v1/jobs/{job}/stop", {})
        assert st == 200, body
        srv.wait_state(job, list(ENDED), timeout=180)
        st, body = srv.call("GET", f"/jobs/{job}/endpoints/web/index.txt")
        assert st in (404, 410, 503) and "ended" in json.dumps(body), (st, body)
        wait_until(lambda: not login_connections(mhost, srv.port), timeout=60,
                   what=lambda: login_connections(mhost, srv.port))

        # on node 0: the job's supervisor (and its relay threads) and endpoints are gone
        def job_procs():
            return [b" ".join(proc_file(p, "cmdline")) for p in ns_pids(mhost, node0)
                    if job.encode() in b" ".join(proc_file(p, "cmdline"))
                    or b"http.server" in b" ".join(proc_file(p, "cmdline"))]
        wait_until(lambda: not job_procs(), timeout=120, what=job_procs)
        assert not port_open_on(mhost, node0, ep["port"])
    finally:
        if job:
            mhost.run("login", ["scancel", "--full", "--user", "root"])
        srv.stop(signal.SIGTERM)
