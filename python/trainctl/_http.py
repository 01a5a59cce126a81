"""The client's transport: one HTTP request at a time to the server's API,
over TCP (with a bearer token) or over the server's Unix socket (where the
kernel tells the server who calls, so no token is needed), and the reading
of server-sent event streams.  Private: the public API is trainctl.Client.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.parse
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import TrainctlError, Unavailable, error_for

Query = Mapping[str, Union[str, int, float, None]]

# GETs are retried this many times on a 503 (too many connections), after
# the Retry-After the server names (at most RETRY_AFTER_MAX seconds).
RETRIES_503 = 3
RETRY_AFTER_MAX = 5.0


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over the server's Unix socket (STATE/server.sock)."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        # the Host of a Unix-socket request is not checked; it must be a valid one
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def trainctl_home() -> str:
    """The state folder the CLI uses: $TRAINCTL_HOME, else ~/.trainctl."""
    h = os.environ.get("TRAINCTL_HOME")
    return h if h else os.path.join(os.path.expanduser("~"), ".trainctl")


def _loopback(host: str) -> bool:
    return host.startswith("127.") or host in ("localhost", "::1", "[::1]")


def _lock_names(home: str, netloc: str) -> bool:
    """Does STATE/server.lock ("PID HOST:PORT") name the server at netloc?"""
    try:
        with open(os.path.join(home, "server.lock"), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return False
    parts = text.split()
    if len(parts) < 2:
        return False
    addr = parts[1]

    def norm(a: str) -> str:
        # localhost and 127.0.0.1 are one address to the server
        return "127.0.0.1" + a[len("localhost"):] if a.startswith("localhost:") else a

    return norm(addr) == norm(netloc)


def _usable_socket(path: str) -> bool:
    import stat
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode) and os.access(path, os.R_OK | os.W_OK)
    except OSError:
        return False


def local_socket(url: Optional[str]) -> Optional[str]:
    """The Unix socket of a server on this machine, found as the CLI finds it:
    $TRAINCTL_SOCKET (set but empty: none); else, for a loopback URL, the
    state folder's server.sock when that folder's server listens at the URL;
    else, with no URL at all, the state folder's server.sock if it is there."""
    env = os.environ.get("TRAINCTL_SOCKET")
    if env is not None:
        return env or None
    home = trainctl_home()
    sock = os.path.join(home, "server.sock")
    if url:
        netloc = urllib.parse.urlsplit(url).netloc
        host = netloc.rsplit(":", 1)[0] if not netloc.startswith("[") else netloc.split("]")[0] + "]"
        if not _loopback(host) or not _lock_names(home, netloc):
            return None
    return sock if _usable_socket(sock) else None


class Transport:
    """Where the server is and how to reach it; see Client for the rules."""

    def __init__(self, url: Optional[str], token: Optional[str], socket_path: Optional[str],
                 timeout: float) -> None:
        if url is None:
            url = os.environ.get("TRAINCTL_SERVER") or None
        if token is None:
            token = os.environ.get("TRAINCTL_TOKEN") or None
        if socket_path is None:
            socket_path = local_socket(url)
        elif not socket_path:
            socket_path = None  # "" or False: TCP, whatever the environment says
        if url is not None:
            u = urllib.parse.urlsplit(url)
            if u.scheme not in ("http", "https") or not u.netloc:
                raise TrainctlError(f"server: '{url}' is not an http:// URL")
        elif socket_path is None:
            raise Unavailable(
                "no server: give Client(url=...) or set TRAINCTL_SERVER (a server on this"
                f" machine is also found by its socket, {os.path.join(trainctl_home(), 'server.sock')},"
                " which is not there)")
        self.url = url.rstrip("/") if url else None
        self.token = token
        self.socket_path = socket_path
        self.timeout = timeout
        u = urllib.parse.urlsplit(self.url) if self.url else None
        self._prefix = u.path.rstrip("/") if u else ""

    def where(self) -> str:
        """The server as messages name it."""
        if self.socket_path:
            return f"{self.url} (socket {self.socket_path})" if self.url else f"socket {self.socket_path}"
        return str(self.url)

    def _connection(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.socket_path:
            return _UnixConnection(self.socket_path, timeout)
        assert self.url is not None
        u = urllib.parse.urlsplit(self.url)
        if u.scheme == "https":
            return http.client.HTTPSConnection(u.netloc, timeout=timeout)
        return http.client.HTTPConnection(u.netloc, timeout=timeout)

    def _headers(self, body: bool, extra: Optional[Mapping[str, str]]) -> Dict[str, str]:
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if body:
            h["Content-Type"] = "application/json"
        if extra:
            h.update(extra)
        return h

    def path(self, path: str, query: Optional[Query] = None) -> str:
        q = {k: str(v) for k, v in (query or {}).items() if v is not None}
        return self._prefix + path + ("?" + urllib.parse.urlencode(q) if q else "")

    def open(self, method: str, path: str, query: Optional[Query] = None, body: Any = None,
             headers: Optional[Mapping[str, str]] = None,
             timeout: Optional[float] = None) -> Tuple[http.client.HTTPConnection,
                                                       http.client.HTTPResponse]:
        """Send one request; the caller reads the answer and closes the connection.
        A connection that cannot be made is Unavailable."""
        data = json.dumps(body).encode() if body is not None else None
        con = self._connection(self.timeout if timeout is None else timeout)
        try:
            con.request(method, self.path(path, query), body=data,
                        headers=self._headers(data is not None, headers))
            return con, con.getresponse()
        except (OSError, http.client.HTTPException) as e:
            con.close()
            raise Unavailable(f"server {self.where()}: {e}") from e

    def error(self, status: int, raw: bytes) -> TrainctlError:
        """The exception of an error answer."""
        body: Optional[Dict[str, Any]] = None
        try:
            o = json.loads(raw.decode("utf-8", "replace"))
            body = o if isinstance(o, dict) else None
        except ValueError:
            pass
        msg = str(body.get("error")) if body and body.get("error") else (
            raw.decode("utf-8", "replace").strip()[:300] or "request failed")
        if status == 401:
            msg += (" (the token in TRAINCTL_TOKEN was not accepted)" if self.token else
                    " (set TRAINCTL_TOKEN or give Client(token=...); `trainctl token create --user"
                    " NAME` on the server's machine makes one; or use the server's Unix socket)")
        return error_for(status, msg, body)

    def call(self, method: str, path: str, query: Optional[Query] = None, body: Any = None,
             want: str = "json") -> Any:
        """One request and its decoded answer (JSON, or text with want="text")."""
        for attempt in range(RETRIES_503 + 1):
            con, r = self.open(method, path, query, body)
            try:
                raw = r.read()
            except (OSError, http.client.HTTPException) as e:
                raise Unavailable(f"server {self.where()}: {e}") from e
            finally:
                con.close()
            if r.status == 503 and method == "GET" and attempt < RETRIES_503:
                time.sleep(_retry_after(r.getheader("Retry-After")))
                continue
            if r.status >= 400:
                raise self.error(r.status, raw)
            if want == "text":
                return raw.decode("utf-8", "replace")
            try:
                return json.loads(raw.decode("utf-8")) if raw else None
            except ValueError as e:
                raise TrainctlError(f"server {self.where()}: the answer is not JSON", r.status) from e
        raise AssertionError("unreachable")


def _retry_after(v: Optional[str]) -> float:
    try:
        return min(max(float(v or 1), 0.1), RETRY_AFTER_MAX)
    except ValueError:
        return 1.0


class SSE:
    """One message of a server-sent event stream."""

    __slots__ = ("event", "id", "data")

    def __init__(self, event: str, id: Optional[str], data: str) -> None:
        self.event, self.id, self.data = event, id, data

    def json(self) -> Any:
        return json.loads(self.data)


def read_sse(r: http.client.HTTPResponse) -> Iterator[SSE]:
    """The messages of an event stream as they come (comments, such as the
    server's pings, are skipped).  Ends when the server closes the stream."""
    event, ev_id, data = "", None, []  # type: str, Optional[str], List[str]
    while True:
        raw = r.readline()
        if not raw:
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data or event:
                yield SSE(event or "message", ev_id, "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
        elif field == "id":
            ev_id = value


def join_sets(sets: Union[None, Mapping[str, Any], Sequence[str]]) -> List[str]:
    """`set=` as the API's "KEY=VALUE" strings: a mapping's values as YAML
    reads them back (True -> true, None -> null, lists and mappings as JSON),
    or a list of "KEY=VALUE" strings as they are."""
    if sets is None:
        return []
    if isinstance(sets, Mapping):
        out = []
        for k, v in sets.items():
            if isinstance(v, bool):
                text = "true" if v else "false"
            elif v is None:
                text = "null"
            elif isinstance(v, (list, tuple, dict)):
                text = json.dumps(v)
            else:
                text = str(v)
            out.append(f"{k}={text}")
        return out
    if isinstance(sets, (str, bytes)):
        raise TypeError("set= takes a dict {key: value} or a list of 'KEY=VALUE' strings")
    return [str(s) for s in sets]
