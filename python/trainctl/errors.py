"""The exceptions of the trainctl client.

Every refusal of the server is a :class:`TrainctlError` carrying the
server's message (``.message``) and HTTP status (``.status``); its subclass
says which kind, so that a script catches what it can handle::

    try:
        c.job("nope")
    except trainctl.NotFound as e:
        print(e.status, e.message)      # 404 no job 'nope'
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional

__all__ = [
    "TrainctlError", "NotFound", "Forbidden", "Unauthorized", "BadSpec", "Conflict",
    "Unavailable", "WaitTimeout", "error_for",
]


class TrainctlError(Exception):
    """The base of every trainctl client error.

    ``message`` is the server's own text (or the client's, for errors found
    before any request), ``status`` the HTTP status (None when no answer came),
    ``body`` the decoded error answer when there was one.
    """

    def __init__(self, message: str, status: Optional[int] = None,
                 body: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body

    def __str__(self) -> str:
        return f"{self.message} (HTTP {self.status})" if self.status else self.message


class NotFound(TrainctlError):
    """404: no such job, sweep or resource (or a job has no logs yet)."""


class Forbidden(TrainctlError):
    """403: another user's job, or an act the caller may not do."""


class Unauthorized(Forbidden):
    """401: no credentials, or a token the server does not know."""


class BadSpec(TrainctlError):
    """400 (and 413, 415): a bad spec, override or request.

    When the server's message names them, ``file``, ``line`` and ``key`` say
    where: ``job.yaml:3: unknown key 'devices.per_nod'`` gives file
    ``job.yaml``, line 3 and key ``devices.per_nod``.
    """

    file: Optional[str]
    line: Optional[int]
    key: Optional[str]

    def __init__(self, message: str, status: Optional[int] = 400,
                 body: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message, status, body)
        self.file, self.line, self.key = _where(message)


class Conflict(TrainctlError):
    """409: the job is not in a state for the act (stop of an ended job, ...)."""


class Unavailable(TrainctlError):
    """The server cannot be reached, is overloaded (503) or failed (5xx)."""


class WaitTimeout(TrainctlError, TimeoutError):
    """A wait ran out of time before the job (or sweep) ended."""


# "job.yaml:3: ..." / "spec:1: devices.per_node: ..." / "... unknown key 'a.b' ..."
# / "--set args.x=2: ..." / "trial 1 (lr=abc): --set args.lr=abc: ..."
_FILE_LINE = re.compile(r"(?:^|: )([^\s:]+):(\d+): ")
_KEY_AFTER_LINE = re.compile(r"^([A-Za-z_][\w-]*(?:\.[\w-]+)*): ")
_QUOTED_KEY = re.compile(r"\bkey '([^']+)'")
_SET_KEY = re.compile(r"--set ([^=\s]+)=")


def _where(message: str) -> "tuple[Optional[str], Optional[int], Optional[str]]":
    file: Optional[str] = None
    line: Optional[int] = None
    key: Optional[str] = None
    rest = message
    m = _FILE_LINE.search(message)
    if m:
        file, line = m.group(1), int(m.group(2))
        rest = message[m.end():]
        k = _KEY_AFTER_LINE.match(rest)
        if k:
            key = k.group(1)
    for pat in (_SET_KEY, _QUOTED_KEY):
        if key is None:
            q = pat.search(rest) or pat.search(message)
            if q:
                key = q.group(1)
    return file, line, key


def error_for(status: Optional[int], message: str,
              body: Optional[Dict[str, Any]] = None) -> TrainctlError:
    """The exception of an error answer with this status and message."""
    if status == 404:
        return NotFound(message, status, body)
    if status == 401:
        return Unauthorized(message, status, body)
    if status == 403:
        return Forbidden(message, status, body)
    if status == 409:
        return Conflict(message, status, body)
    if status in (400, 413, 415, 422):
        return BadSpec(message, status, body)
    if status is None or status >= 500:
        return Unavailable(message, status, body)
    return TrainctlError(message, status, body)
