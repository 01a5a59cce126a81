"""The metrics channel of one rank: DLLogger lines appended to the file the
supervisor follows (TRAINCTL_METRICS_CHANNEL; docs/python.md).

A file, not a pipe or a socket, so that a supervisor that is gone can never
block or kill the writer: lines are buffered in the process and written in
batches (by size, by time when the next record comes, at exit).  A failed
write drops its batch with one warning on stderr; nothing here raises into
the training script.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from typing import List

FLUSH_LINES = 8192     # a batch this long is written at once
FLUSH_NS = 500_000_000  # else what waits is written by the first record 0.5 s after the last write
RETRY_SECONDS = 5.0    # after a failed open, the next try


class Channel:
    """Whole lines in, whole lines out: every os.write() ends with a newline,
    so the lines of forked children (same file, O_APPEND) never mix."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.buf: List[str] = []
        self.due = 0            # time.time_ns() from which the next record flushes
        self._fd = -1
        self._retry_at = 0.0
        self._torn = False      # a write stopped mid-line: start the next on a new one
        self._warned = False
        self._lock = threading.Lock()
        atexit.register(self.flush)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        # the parent writes what it buffered; the child starts empty
        self.buf = []
        self._lock = threading.Lock()

    def flush(self, now: int = 0, wait: bool = True) -> None:
        """Write what waits; now: time.time_ns() (the next flush is due
        FLUSH_NS after it).  wait=False: when another thread is writing,
        leave ours for the next flush."""
        self.due = now + FLUSH_NS
        if not self.buf or not self._lock.acquire(blocking=wait):
            return
        try:
            buf = self.buf
            n = len(buf)
            data = "".join(buf[:n])
            del buf[:n]  # records other threads added meanwhile stay
            self._write(data.encode("utf-8", "replace"))
        except Exception as e:  # never the training script's problem
            self._warn(f"{type(e).__name__}: {e}")
        finally:
            self._lock.release()

    def _write(self, data: bytes) -> None:
        if self._fd < 0:
            if time.monotonic() < self._retry_at:
                return  # dropped: the file could not be opened a moment ago
            try:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                                   0o644)
            except OSError as e:
                self._retry_at = time.monotonic() + RETRY_SECONDS
                self._warn(f"cannot open {self.path}: {e.strerror}")
                return
        if self._torn:
            data = b"\n" + data
            self._torn = False
        view = memoryview(data)
        while view:
            try:
                n = os.write(self._fd, view)
            except InterruptedError:
                continue
            except OSError as e:
                self._torn = len(view) != len(data)
                self._warn(f"cannot write {self.path}: {e.strerror}")
                return
            view = view[n:]

    def _warn(self, what: str) -> None:
        if self._warned:
            return
        self._warned = True
        try:
            sys.stderr.write(f"trainctl.job: metrics not recorded: {what} (records dropped)\n")
            sys.stderr.flush()
        except Exception:
            pass

