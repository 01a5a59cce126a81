"""trainctl.job -- the in-job helper, for code running under trainctl
(`trainctl run`, the server, Slurm alike; no server needed).

    from trainctl import job
    job.info()                               # where this rank runs
    job.log({"loss": l, "lr": lr}, step=s)   # metric records, to the supervisor
    job.resume_from()                        # the checkpoint to resume from, or None
    job.should_stop()                        # a stop is pending: save and exit cleanly

Everything here reads the worker environment (docs/environment.md).  Outside
trainctl, info() describes one rank alone, log() records nothing,
resume_from() is None and should_stop() is False.  Nothing here raises into
the training script because of trainctl: a supervisor that is gone, a full
disk or a removed run folder cost records, never the script.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from trainctl._channel import FLUSH_LINES, Channel

__all__ = ["Info", "info", "log", "flush", "resume_from", "should_stop"]

STOP_POLL_SECONDS = 0.05  # the stop file is looked at no more often than this


@dataclass(frozen=True)
class Info:
    """This rank and its job, from the worker environment."""
    job_id: Optional[str]          # TRAINCTL_JOB_ID; None outside trainctl
    rank: int                      # RANK
    local_rank: int                # LOCAL_RANK
    world_size: int                # WORLD_SIZE
    local_world_size: int          # LOCAL_WORLD_SIZE
    node_rank: int                 # GROUP_RANK
    num_nodes: int                 # GROUP_WORLD_SIZE
    node: str                      # this host's name
    restart_count: int             # TORCHELASTIC_RESTART_COUNT: 0, then 1, 2, ... per group restart
    run_dir: Optional[str]         # the run folder (the one above TRAINCTL_LOG_DIR)
    output_dir: Optional[str]      # TRAINCTL_OUTPUT_DIR
    checkpoint_dir: Optional[str]  # TRAINCTL_CKPT_DIR
    tensorboard_dir: Optional[str]  # TRAINCTL_TENSORBOARD_DIR
    data_dir: Optional[str]        # TRAINCTL_DATA_DIR
    log_dir: Optional[str]         # TRAINCTL_LOG_DIR

    @property
    def under_trainctl(self) -> bool:
        return self.job_id is not None


def _int(env: Mapping[str, str], key: str, default: int) -> int:
    try:
        return int(env[key])
    except (KeyError, ValueError):
        return default


def info() -> Info:
    """Where this rank runs, read from the environment each call."""
    env = os.environ
    logs = env.get("TRAINCTL_LOG_DIR") or None
    return Info(
        job_id=env.get("TRAINCTL_JOB_ID") or None,
        rank=_int(env, "RANK", 0),
        local_rank=_int(env, "LOCAL_RANK", 0),
        world_size=_int(env, "WORLD_SIZE", 1),
        local_world_size=_int(env, "LOCAL_WORLD_SIZE", 1),
        node_rank=_int(env, "GROUP_RANK", 0),
        num_nodes=_int(env, "GROUP_WORLD_SIZE", 1),
        node=socket.gethostname(),
        restart_count=_int(env, "TORCHELASTIC_RESTART_COUNT", 0),
        run_dir=os.path.dirname(logs.rstrip("/")) if logs else None,
        output_dir=env.get("TRAINCTL_OUTPUT_DIR") or None,
        checkpoint_dir=env.get("TRAINCTL_CKPT_DIR") or None,
        tensorboard_dir=env.get("TRAINCTL_TENSORBOARD_DIR") or None,
        data_dir=env.get("TRAINCTL_DATA_DIR") or None,
        log_dir=logs,
    )


def resume_from() -> Optional[str]:
    """The checkpoint trainctl chose for this attempt (TRAINCTL_RESUME_FROM:
    after a restart, a resumed or preempted job, or checkpoint.resume: PATH),
    or None: start afresh."""
    return os.environ.get("TRAINCTL_RESUME_FROM") or None


# ---- log: one DLLL line per call, buffered ----

_path = os.environ.get("TRAINCTL_METRICS_CHANNEL") or None
_ch: Optional[Channel] = Channel(_path) if _path else None
_step = -1  # the last step logged; a call without one logs the next
_keys: Dict[str, str] = {}  # name -> '"name": ', escaped once
_SPECIAL = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
_frepr = float.__repr__
_irepr = int.__repr__
_time_ns = time.time_ns


def _key(k: Any) -> str:
    if type(k) is not str:
        raise TypeError(f"trainctl.job.log: metric names are strings, not {type(k).__name__} ({k!r})")
    if not k or k == "rank":
        raise ValueError(f"trainctl.job.log: {k!r} is not a metric name"
                         + (" (trainctl reads \"rank\" as the line's rank)" if k else ""))
    if len(_keys) < 65536:
        _keys[k] = _jstr(k) + ": "
    return _jstr(k) + ": "


def _jstr(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _value(k: str, v: Any) -> str:
    """A value that is not a plain float, int, bool or str: numpy and torch
    scalars (and one-element tensors), anything with __float__."""
    item = getattr(v, "item", None)
    if callable(item):
        try:
            v = item()
        except (ValueError, RuntimeError, TypeError):
            pass  # not one element: its __float__ says why below
    if type(v) is bool:
        return "true" if v else "false"
    if isinstance(v, int):
        return _irepr(int(v))
    if isinstance(v, str):
        return _jstr(v)
    try:
        f = float(v)
    except (TypeError, ValueError, RuntimeError) as e:  # torch: RuntimeError for many elements
        raise TypeError(f"trainctl.job.log: {k!r} is {type(v).__name__}, not a number or a string") from e
    r = _frepr(f)
    return _SPECIAL.get(r, r)


def _step_text(step: Union[int, Sequence[int]]) -> str:
    global _step
    if isinstance(step, (tuple, list)):
        return "[" + ", ".join(_irepr(int(x)) for x in step) + "]"
    try:
        s = step.__index__()  # ints, numpy integers, 0-d integer tensors
    except AttributeError:
        raise TypeError(f"trainctl.job.log: step is an int or (epoch, iteration), not "
                        f"{type(step).__name__}") from None
    _step = s
    return _irepr(s)


def log(values: Mapping[str, Any], step: Union[int, Sequence[int], None] = None) -> None:
    """One metric record per key of values, at step (an int; or (epoch,
    iteration)); without step, the step after the last one logged (0 first).

    Values are numbers (floats, ints, bools, numpy and torch scalars) or
    strings (text records); None is left out.  The records reach the
    supervisor through this rank's channel, in batches: by size, every 0.5 s
    (on the next call), at exit, and on flush() or a true should_stop().
    """
    global _step
    ch = _ch
    if ch is None:
        return  # not under trainctl, or the job reads no metrics
    if type(step) is int:
        _step = step
        st = _irepr(step)
    elif step is None:
        _step += 1
        st = _irepr(_step)
    else:
        st = _step_text(step)
    keys = _keys
    body = ""
    for k, v in values.items():
        ek = keys.get(k) or _key(k)
        t = type(v)
        if t is float:
            r = _frepr(v)
            if r[-1] in "nf":  # nan, inf, -inf: what Python's json writes
                r = _SPECIAL[r]
        elif t is int:
            r = _irepr(v)
        elif v is None:
            continue
        elif t is str:
            r = _jstr(v)
        else:
            r = _value(k, v)
        body = body + ", " + ek + r if body else ek + r
    if not body:
        return
    ns = _time_ns()
    # the time as integer nanoseconds and an exponent: a third of a float's repr
    ch.buf.append(f'DLLL {{"timestamp": {ns}e-9, "type": "LOG", "step": {st}, "data": {{{body}}}}}\n')
    if ns >= ch.due or len(ch.buf) >= FLUSH_LINES or ns < ch.due - 1_000_000_000:
        ch.flush(ns, wait=False)


def flush() -> None:
    """Write the records logged so far now (e.g. before a checkpoint)."""
    if _ch is not None:
        _ch.flush(time.time_ns())


# ---- should_stop: the stop file, and the signals that stop ----

_stop_file = os.environ.get("TRAINCTL_STOP_FILE") or None
_stopping = False
_flushed = False  # the records before a true should_stop() are written then
_stop_next = 0.0
_handlers = False  # looked at (from the main thread) on the first should_stop()
_STOP_SIGNALS = ("SIGTERM", "SIGUSR1", "SIGUSR2")


def _on_signal(signum: int, frame: Any) -> None:
    global _stopping
    _stopping = True


def _take_signals() -> None:
    """A script that asks should_stop() saves and exits by itself: the
    signals a stop brings (SIGTERM; SIGUSR1/2, Slurm's warning before its time
    limit) only set the flag, where their handler is still the default (a
    handler of the script's own stays; TRAINCTL_STACK_SIGNAL is the
    watchdog's).  Python sets handlers from the main thread only."""
    global _handlers
    if threading.current_thread() is not threading.main_thread():
        return
    _handlers = True
    stack = os.environ.get("TRAINCTL_STACK_SIGNAL", "")
    for name in _STOP_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is None or str(int(sig)) == stack:
            continue
        try:
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_signal)
        except (ValueError, OSError):
            pass


def should_stop() -> bool:
    """True once a stop is pending (`trainctl stop`, a server's preemption
    or pause, a time limit, a restart of the group): save a checkpoint and
    exit cleanly before the grace time (restart.grace_seconds) ends in
    SIGKILL.  Cheap enough for every step; once true, it stays true."""
    global _stopping, _stop_next, _flushed
    if not _stopping:
        if _stop_file is None:
            return False
        if not _handlers:
            _take_signals()
        now = time.monotonic()
        if now < _stop_next:
            return False
        _stop_next = now + STOP_POLL_SECONDS
        if not os.path.exists(_stop_file):
            return False
        _stopping = True
    if not _flushed:
        _flushed = True
        flush()
    return True
