"""What the server benchmarks (list_bench.py, server_bench.py) share: an
HTTP connection to a trainctl server, a free port, one JSON request and the
load average.

A server of this tree wants credentials on TCP: the benchmarks talk to it
through its Unix socket (STATE/server.sock) as the local account, and to an
older binary (no socket) over TCP as before.  SOCKET_OF_PORT maps a
server's port to its socket, filled by whoever starts the server.
"""
import http.client
import json
import os
import socket

SOCKET_OF_PORT = {}


class _UnixConn(http.client.HTTPConnection):
    def __init__(self, path, port, timeout):
        super().__init__("127.0.0.1", port, timeout=timeout)
        self.sock_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.sock_path)
        self.sock = s


def connect(port, timeout):
    path = SOCKET_OF_PORT.get(port)
    if path and os.path.exists(path):
        return _UnixConn(path, port, timeout)
    return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loadavg():
    """The 1, 5 and 15 minute load averages, as /proc/loadavg has them."""
    return " ".join(open("/proc/loadavg").read().split()[:3])


def request(conn, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = conn.getresponse()
    return r.status, r.read()
