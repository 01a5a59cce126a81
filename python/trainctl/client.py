"""The client of `trainctl server`: jobs, their logs and metrics, the event
stream and sweeps, over the server's HTTP API (docs/server.md).

    import trainctl
    c = trainctl.Client()
    job = c.submit("job.yaml", set={"args.lr": 0.01})
    print(job.wait())                       # "succeeded", "failed", ...
    for line in job.logs():
        print(line)
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import time
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Union)

from ._http import SSE, Transport, join_sets, read_sse
from .errors import BadSpec, NotFound, TrainctlError, Unavailable, WaitTimeout

__all__ = ["Client", "Job", "Sweep", "Trial", "Event", "Point", "MetricSeries", "LogLine"]

PathLike = Union[str, "os.PathLike[str]"]
Sets = Union[None, Mapping[str, Any], Sequence[str]]

# The job states that end a job, when the server does not say (/api/v1/info does).
_TERMINAL = ("succeeded", "failed", "killed", "lost")
# Polling of wait(): from POLL_MIN, doubling up to POLL_MAX seconds.
POLL_MIN, POLL_MAX = 0.05, 1.0


class Point(NamedTuple):
    """One metric value: the step the job logged it at, the value, and the
    wall time (seconds since 1970) it was recorded."""
    step: int
    value: float
    time: float


class MetricSeries(List[Point]):
    """The points of one metric of one rank, in the order they were logged:
    a list of (step, value, time) with ``.to_pandas()``."""

    def __init__(self, name: str, rank: Optional[int], points: Sequence[Point] = ()) -> None:
        super().__init__(points)
        self.name = name
        self.rank = rank

    def to_pandas(self) -> Any:
        """A pandas DataFrame with columns step, value, time (needs pandas)."""
        try:
            import pandas as pd  # type: ignore[import-not-found]
        except ImportError as e:
            raise ImportError(
                "MetricSeries.to_pandas() needs pandas, which is not installed: "
                "pip install pandas (or apt install python3-pandas); the series itself is a "
                "plain list of (step, value, time)") from e
        df = pd.DataFrame(list(self), columns=["step", "value", "time"])
        df.attrs["metric"] = self.name
        df.attrs["rank"] = self.rank
        return df


class LogLine(str):
    """One line of a job's log, with the rank that wrote it (``.rank``;
    None where the server did not say)."""

    rank: Optional[int]

    def __new__(cls, text: str, rank: Optional[int]) -> "LogLine":
        s = super().__new__(cls, text)
        s.rank = rank
        return s


@dataclass(frozen=True)
class Event:
    """One event of the server's stream (``Client.events()``).

    ``event`` is the stream's event name (``state`` for a change of state),
    ``kind`` the kind of an event that is no change of state (a hang, a
    straggler, ...; None otherwise), ``data`` the whole message."""
    id: Optional[int]
    event: str
    job: Optional[str]
    state: Optional[str]
    reason: Optional[str]
    user: Optional[str]
    time: Optional[float]
    kind: Optional[str]
    data: Dict[str, Any] = field(repr=False)


class Client:
    """A connection to a trainctl server.

    Where the server is, as the CLI finds it: ``url`` (else
    ``$TRAINCTL_SERVER``), the bearer ``token`` (else ``$TRAINCTL_TOKEN``),
    and the server's Unix socket: ``socket`` (else ``$TRAINCTL_SOCKET``; else
    the state folder's ``server.sock`` -- ``$TRAINCTL_HOME``, else
    ``~/.trainctl`` -- when that folder's server is the one at ``url``, or
    when no URL is given).  Over the socket the server asks the kernel who is
    calling and no token is needed.  ``socket=False`` always uses TCP.
    ``timeout`` bounds each request's connection and reads (seconds).
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None,
                 socket: Union[None, str, bool] = None, timeout: float = 60.0) -> None:
        sock: Optional[str] = None if socket is None or socket is True else (socket or "")
        self._t = Transport(url, token, sock, timeout)
        self._info: Optional[Dict[str, Any]] = None

    def __repr__(self) -> str:
        return f"trainctl.Client({self._t.where()})"

    # ---- the server ----

    def info(self) -> Dict[str, Any]:
        """What the server says of itself (/api/v1/info): version, states, backends."""
        if self._info is None:
            self._info = self._t.call("GET", "/api/v1/info")
        return self._info

    def whoami(self) -> Dict[str, Any]:
        """The caller as the server sees it: ``{"user": ..., "admin": ...}``."""
        return self._t.call("GET", "/api/v1/whoami")

    def _terminal(self) -> Sequence[str]:
        try:
            states = self.info().get("states") or []
            t = [s["name"] for s in states if s.get("terminal")]
            return t or _TERMINAL
        except TrainctlError:
            return _TERMINAL

    # ---- jobs ----

    def submit(self, spec: Union[PathLike, Mapping[str, Any]], set: Sets = None,
               team: Optional[str] = None, name: Optional[str] = None) -> "Job":
        """Queue a job and return it.

        ``spec`` is a spec file's path (YAML; its relative ``workdir`` is taken
        from the file's folder) or the spec as a dict (relative paths from the
        current folder).  ``set`` overrides keys by dotted path as ``--set``
        does: ``{"args.lr": 0.01}`` or ``["args.lr=0.01"]``; the server checks
        them (BadSpec names a bad one).  ``name`` replaces the spec's name.
        ``team``: None, or a team on a server that has teams (this one is
        asked; a server without teams refuses any other value)."""
        body: Dict[str, Any] = {}
        if isinstance(spec, Mapping):
            # as JSON text, not a JSON object: the server keeps a number of a text as
            # written (0.1), where an object's doubles would reach the job as 0.10000000000000001
            body["spec"] = json.dumps(dict(spec))
            body["base"] = os.getcwd()
        else:
            path = os.fspath(spec)
            try:
                with open(path, encoding="utf-8") as f:
                    body["spec"] = f.read()
            except (OSError, UnicodeDecodeError) as e:
                raise BadSpec(f"{path}: {e.strerror if isinstance(e, OSError) else 'not UTF-8 text'}",
                              None) from e
            body["file"] = path
            body["base"] = os.path.dirname(os.path.abspath(path))
        sets = join_sets(set)
        if sets:
            body["set"] = sets
        if name is not None:
            body["name"] = name
        if team is not None:
            if "teams" not in self.info():
                raise BadSpec(f"team={team!r}: this server has no teams (leave team=None: jobs"
                              " belong to the account that submits them)", None)
            body["team"] = team
        return Job(self, self._t.call("POST", "/api/v1/jobs", body=body))

    def job(self, ref: str) -> "Job":
        """One job by id, unique id prefix or name (the newest of that name)."""
        return Job(self, self._job_json(ref))

    def _job_json(self, ref: str) -> Dict[str, Any]:
        return self._t.call("GET", "/api/v1/jobs/" + _ref(ref))

    def jobs(self, state: Union[None, str, Sequence[str]] = None, user: Optional[str] = None,
             name: Optional[str] = None, limit: Optional[int] = None) -> List["Job"]:
        """The jobs the caller may see, newest first: all of them, or ``limit``.
        ``state`` is one state or several; ``user`` another user's (admins)."""
        states = state if state is None or isinstance(state, str) else ",".join(state)
        out: List[Job] = []
        page = 1000 if limit is None else min(limit, 100000)
        while True:
            r = self._t.call("GET", "/api/v1/jobs", {"state": states, "user": user, "name": name,
                                                      "limit": page, "offset": len(out)})
            got = r.get("jobs") or []
            out.extend(Job(self, j) for j in got)
            if not got or len(out) >= int(r.get("total", 0)) or (limit is not None and len(out) >= limit):
                return out[:limit] if limit is not None else out

    # ---- events ----

    def events(self, after: Optional[int] = None, reconnect_for: float = 60.0,
               timeout: Optional[float] = None) -> Iterator[Event]:
        """The server's event stream: every change of state of the caller's
        jobs (all jobs, for an admin) and the other events of jobs, as they
        happen, from after the newest one (or after event id ``after``).

        A stream that breaks is opened again from the last event seen
        (``Last-Event-ID``; from ``after`` when none has come yet), so no
        event after it is lost or repeated; the iterator
        raises Unavailable once no connection could be made for
        ``reconnect_for`` seconds.  ``timeout``: stop (return) after this
        many seconds without an event."""
        last = after
        down_since: Optional[float] = None
        delay = 0.1
        while True:
            headers = {"Accept": "text/event-stream"}
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            # the server pings every 3 s: a read this long without one is a dead stream
            read_timeout = 15.0 if timeout is None else min(15.0, timeout)
            try:
                con, r = self._t.open("GET", "/api/v1/events", None, None, headers, read_timeout)
            except Unavailable:
                now = time.monotonic()
                down_since = down_since or now
                if now - down_since > reconnect_for:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            try:
                if r.status >= 400:
                    raise self._t.error(r.status, r.read())
                down_since, delay = None, 0.1
                quiet_since = time.monotonic()
                for m in _read_sse_until(r, timeout):
                    if m is None:  # a ping, or nothing within the read timeout
                        if timeout is not None and time.monotonic() - quiet_since >= timeout:
                            return
                        continue
                    ev = _event(m)
                    if ev.id is not None:
                        last = ev.id
                    quiet_since = time.monotonic()
                    yield ev
                if timeout is not None and time.monotonic() - quiet_since >= timeout:
                    return
            except (OSError, ValueError, http.client.HTTPException):
                pass  # a broken stream (a server gone, even by SIGKILL): open it again after the last event
            finally:
                con.close()

    # ---- sweeps ----

    def sweep(self, sweep: Union[PathLike, Mapping[str, Any]]) -> "Sweep":
        """Queue a sweep (docs/sweeps.md) and return it.

        ``sweep`` is a sweep file's path (its ``spec:`` file, relative to it, is
        read here and sent along) or the sweep as a dict."""
        body: Dict[str, Any] = {}
        if isinstance(sweep, Mapping):
            d = dict(sweep)
            base = os.getcwd()
            spec = d.get("spec")
            if isinstance(spec, (str, os.PathLike)):
                body["spec"] = _read_text(os.path.join(base, os.fspath(spec)))
            body.update({"sweep": json.dumps(d), "file": "sweep", "base": base})
        else:
            path = os.fspath(sweep)
            text = _read_text(path)
            base = os.path.dirname(os.path.abspath(path))
            body.update({"sweep": text, "file": path, "base": base})
            spec_path = _sweep_spec_path(text)
            if spec_path:
                full = os.path.join(base, spec_path)
                # the server may not read this folder: the spec travels inline, as the CLI sends it
                if os.path.isfile(full):
                    body["spec"] = _read_text(full)
        return Sweep(self, self._t.call("POST", "/api/v1/sweeps", body=body))

    def sweeps(self) -> List["Sweep"]:
        """The caller's sweeps (all, for an admin)."""
        return [Sweep(self, s) for s in self._t.call("GET", "/api/v1/sweeps").get("sweeps", [])]

    def get_sweep(self, ref: str) -> "Sweep":
        """One sweep by id."""
        return Sweep(self, self._t.call("GET", "/api/v1/sweeps/" + _ref(ref)))


class _Record:
    """What a job and a sweep share: the client, the id and name, and the
    record as last read."""

    def __init__(self, client: Client, data: Dict[str, Any]) -> None:
        self._c = client
        self.data: Dict[str, Any] = dict(data)
        self.id: str = str(data["id"])
        self.name: Optional[str] = data.get("name")

    def __repr__(self) -> str:
        return f"<trainctl.{type(self).__name__} {self.id} ({self.name}) {self.data.get('state')}>"

    def refresh(self) -> Any:
        raise NotImplementedError

    @property
    def state(self) -> str:
        """Its state now."""
        return str(self.refresh().data["state"])

    def _wait(self, ended: Callable[[str], bool], timeout: Optional[float]) -> str:
        """Poll the state, from POLL_MIN s doubling to POLL_MAX s, until ended(state)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = POLL_MIN
        while True:
            st = self.state
            if ended(st):
                return st
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WaitTimeout(f"{type(self).__name__.lower()} {self.id} is still {st}"
                                      f" after {timeout:g} s")
                delay = min(delay, left)
            time.sleep(delay)
            delay = min(delay * 2, POLL_MAX)


class Job(_Record):
    """A job of the server.  ``id`` and ``name`` are fixed; ``data`` is the
    job as last read (``refresh()`` reads it again; ``state`` always asks)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Job) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    @property
    def _path(self) -> str:
        return "/api/v1/jobs/" + _ref(self.id)

    def refresh(self) -> "Job":
        """Read the job again (the whole of it: spec, events, checkpoints, metrics summary)."""
        self.data = self._c._job_json(self.id)
        return self

    def wait(self, timeout: Optional[float] = None) -> str:
        """Wait until the job has ended and return its final state
        (``succeeded``, ``failed``, ``killed`` or ``lost``); a paused or
        requeued job is waited for too.  Raises WaitTimeout after ``timeout``
        seconds (None: no limit)."""
        terminal = self._c._terminal()
        return self._wait(lambda st: st in terminal, timeout)

    def logs(self, follow: bool = False, rank: Optional[int] = None,
             tail: Optional[int] = None) -> Iterator[LogLine]:
        """The job's log lines (LogLine: a str with ``.rank``).  With several
        ranks and no ``rank``, each line starts ``[r] `` as in ``trainctl
        logs``.  ``follow=True`` goes on with new lines until the job ends
        (or is paused), waiting first for a queued job to start."""
        q: Dict[str, Any] = {"rank": rank, "tail": tail}
        if not follow:
            text = self._c._t.call("GET", self._path + "/logs", q, want="text")
            # one rank: its lines carry no "[r] " prefix
            only = rank if rank is not None or int(self.data.get("workers") or 0) != 1 else 0
            for line in text.splitlines():
                yield _log_line(line, only)
            return
        yield from self._follow(q, rank)

    def _follow(self, q: Dict[str, Any], rank: Optional[int]) -> Iterator[LogLine]:
        q = dict(q, follow=1)
        delay = POLL_MIN
        terminal = self._c._terminal()
        while True:
            # no read timeout: the server pings every 3 s, a dead one is caught at 60 s
            con, r = self._c._t.open("GET", self._path + "/logs", q,
                                     headers={"Accept": "text/event-stream"}, timeout=60.0)
            try:
                if r.status == 404:
                    err = self._c._t.error(r.status, r.read())
                    # a job that has not started yet: wait for its first worker
                    if self.state in terminal:
                        raise err
                    time.sleep(delay)
                    delay = min(delay * 2, POLL_MAX)
                    continue
                if r.status >= 400:
                    raise self._c._t.error(r.status, r.read())
                prefix = rank is None and int(self.data.get("workers") or 1) > 1
                try:
                    for m in read_sse(r):
                        if m.event == "end":
                            return
                        d = m.json()
                        rk = d.get("rank")
                        text = str(d.get("line", ""))
                        yield LogLine(f"[{rk}] {text}" if prefix else text, rk)
                except (OSError, ValueError, http.client.HTTPException) as e:
                    raise Unavailable(f"job {self.id}: the log stream broke: {e!r}") from e
                return
            finally:
                con.close()

    def metric_names(self) -> List[str]:
        """The names of the job's metrics."""
        r = self._c._t.call("GET", self._path + "/metrics")
        names: List[str] = []
        for s in r.get("series", []):
            if s.get("metric") not in names:
                names.append(s["metric"])
        return names

    def metrics(self, name: str, rank: int = 0) -> MetricSeries:
        """The points of metric ``name`` of one rank (default 0): a list of
        (step, value, time), oldest first, with ``.to_pandas()``.  The step is
        the charts' x: the step the job logged when it is one whole number,
        else the point's position in its rank; a metric logged
        only per epoch gives its epoch records, the step being the epoch.  A
        name the job has no points of is NotFound, naming the metrics it has."""
        r = self._c._t.call("GET", self._path + "/metrics/records", {"name": name, "rank": rank})
        nan = float("nan")
        pts = [Point(int(step), nan if value is None else float(value), float(t))
               for step, value, t in zip(r.get("step", []), r.get("value", []), r.get("time", []))]
        if not pts and name not in self.metric_names():
            have = self.metric_names()
            raise NotFound(f"job {self.id} has no metric '{name}'"
                           + (f" (it has: {', '.join(have)})" if have else " (it has none yet)"),
                           404)
        return MetricSeries(name, rank, pts)

    def _act(self, action: str, body: Optional[Dict[str, Any]] = None) -> Any:
        return self._c._t.call("POST", f"{self._path}/{action}", body=body or {})

    def stop(self) -> None:
        """Stop the job: SIGTERM, then SIGKILL after its grace time (a queued
        job ends at once).  Conflict when it has already ended."""
        self._act("stop")

    def pause(self) -> None:
        """Hold the job: its devices are freed; ``resume()`` queues it again."""
        self._act("pause")

    def resume(self) -> None:
        """Queue a paused job again; it resumes from its newest checkpoint."""
        self._act("resume")

    def clone(self, set: Sets = None) -> "Job":
        """Submit the same spec again, with keys overridden as in submit()."""
        sets = join_sets(set)
        return Job(self._c, self._act("clone", {"set": sets} if sets else {}))

    def delete(self) -> None:
        """Delete an ended job: its records and run folder.  Conflict while it is active."""
        self._c._t.call("DELETE", self._path)


@dataclass(frozen=True)
class Trial:
    """One trial of a sweep: its index, parameters, state, objective and job."""
    trial: int
    params: Dict[str, Any]
    state: str
    objective: Optional[float]
    job: Optional[Job]
    note: Optional[str]


class Sweep(_Record):
    """A sweep of the server (docs/sweeps.md).  ``data`` is what ``sweep
    show --json`` prints, as last read; its ``state`` is ``running``,
    ``done`` or ``stopped``."""

    def refresh(self) -> "Sweep":
        """Read the sweep again."""
        self.data = self._c._t.call("GET", "/api/v1/sweeps/" + _ref(self.id))
        return self

    def wait(self, timeout: Optional[float] = None) -> str:
        """Wait until no trial runs or will run, and return the sweep's final
        state (``done`` or ``stopped``).  Raises WaitTimeout after ``timeout`` s."""
        return self._wait(lambda st: st != "running", timeout)

    def trials(self) -> List[Trial]:
        """The trials, best first (as ``sweep show`` lists them)."""
        return [self._trial(t) for t in self.refresh().data.get("trials", [])]

    def _trial(self, t: Mapping[str, Any]) -> Trial:
        job = Job(self._c, {"id": t["job"]}) if t.get("job") else None
        return Trial(int(t["trial"]), dict(t.get("params") or {}), str(t.get("state")),
                     t.get("objective"), job, t.get("note"))

    def best(self) -> Optional[Trial]:
        """The best trial so far (best objective among those that succeeded,
        else among all with a value), or None when none has a value."""
        b = self.refresh().data.get("best")
        if not b:
            return None
        for t in self.data.get("trials", []):
            if t.get("trial") == b.get("trial"):
                return self._trial(t)
        return None

    def stop(self) -> None:
        """No new trial starts; running ones are stopped."""
        self._c._t.call("POST", f"/api/v1/sweeps/{_ref(self.id)}/stop", body={})


# ---- helpers ----

def _ref(ref: str) -> str:
    import urllib.parse
    if not isinstance(ref, str) or not ref:
        raise TypeError("a job or sweep reference is a non-empty str (id, prefix or name)")
    return urllib.parse.quote(ref, safe="")


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise BadSpec(f"{path}: {e.strerror if isinstance(e, OSError) else 'not UTF-8 text'}",
                      None) from e


def _sweep_spec_path(text: str) -> Optional[str]:
    """The top-level ``spec: PATH`` of a sweep file (None for an inline spec)."""
    for line in text.splitlines():
        if not line.startswith("spec:"):
            continue
        v = line[5:].split(" #", 1)[0].strip()
        if not v or v[0] in "{[|>&*!":
            return None
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        return v
    return None


def _log_line(line: str, rank: Optional[int]) -> LogLine:
    if rank is None and line.startswith("["):
        end = line.find("] ")
        if end > 1 and line[1:end].isdigit():
            return LogLine(line, int(line[1:end]))
    return LogLine(line, rank)


def _read_sse_until(r: Any, timeout: Optional[float]) -> Iterator[Optional[SSE]]:
    """read_sse, yielding None when a read times out (the caller decides
    whether to go on); a stream that ends ends the iterator."""
    it = read_sse(r)
    while True:
        try:
            m = next(it)
        except StopIteration:
            return
        except socket.timeout:
            if timeout is None:
                raise
            yield None
            return  # the response cannot be read on after a timeout: reconnect
        yield m


def _event(m: SSE) -> Event:
    d = m.json()
    if not isinstance(d, dict):
        d = {"data": d}
    try:
        eid: Optional[int] = int(m.id) if m.id is not None else (int(d["id"]) if "id" in d else None)
    except (TypeError, ValueError):
        eid = None
    return Event(id=eid, event=m.event, job=d.get("job"), state=d.get("state"),
                 reason=d.get("reason"), user=d.get("user"), time=d.get("time"),
                 kind=d.get("kind"), data=d)
