"""test_console_progress.py -- `trainctl run` on a terminal is for people.

`trainctl run` runs with its stdout on a real pseudo-terminal (Python's pty
module).  Two ranks print MindFormers loss lines (which carry the step and
the totals) among plain lines.  On the terminal the loss lines are not
echoed; a progress line per rank (step of total, loss, steps/s, ETA) is
redrawn in place, at most a few times a second, and the plain lines are
echoed as before.  `--raw` echoes every line as printed and draws nothing;
a pipe gets exactly what it got before.  The rank logs keep every line.
"""
import os
import pty
import re
import subprocess
import time
from pathlib import Path

STEPS = 10  # per epoch; 2 epochs
SCRIPT = r"""
import os, sys, time
rank = int(os.environ["RANK"])
print(f"hello from rank {rank}", flush=True)
for e in (1, 2):
    for s in range(1, STEPS + 1):
        loss = 1.0 / (10 * e + s)
        print(f"2024-05-01 10:00:00,000 - mindformers - INFO - {{ Epoch:[  {e}/  2], "
              f"step:[  {s}/  STEPS], loss: {loss:.5f}, per_step_time: 70ms", flush=True)
        time.sleep(0.07)
    print(f"epoch {e} done on rank {rank}", flush=True)
print(f"warning on stderr from rank {rank}", file=sys.stderr, flush=True)
""".replace("STEPS", str(STEPS))

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
JOB = re.compile(r"job (\d{8}-\d{6}-\d{3}-[0-9a-f]{4})")


def _spec(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    spec = tmp_path / "console.yaml"
    spec.write_text(f"name: console\ncommand: [\"/usr/bin/python3\", \"train.py\"]\n"
                    f"workdir: {tmp_path}\ndevices: {{type: cpu, per_node: 2}}\n")
    return spec


def _env(home):
    return dict(os.environ, TRAINCTL_HOME=str(home), TERM="xterm", COLUMNS="120")


def _run_on_pty(trainctl, home, *args, timeout=120):
    """`trainctl run ARGS` with stdout on a pty; (its bytes, stderr, rc, seconds)."""
    master, slave = pty.openpty()
    t0 = time.monotonic()
    p = subprocess.Popen([str(trainctl), "run", *map(str, args)], stdout=slave,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=_env(home))
    os.close(slave)
    out = bytearray()
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the pty is gone
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    err = p.stderr.read().decode()
    rc = p.wait(timeout=timeout)
    return out.decode(), err, rc, time.monotonic() - t0


def _lines(text):
    return [line for line in ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
            .split("\n") if line]


def _rank_log(home, err, rank):
    job = JOB.search(err).group(1)
    return (Path(home) / "runs" / job / "logs" / f"rank-{rank}.log").read_text()


def test_terminal_shows_progress_not_metric_lines(trainctl, home, tmp_path):
    out, err, rc, took = _run_on_pty(trainctl, home, _spec(tmp_path))
    assert rc == 0, err
    lines = _lines(out)
    # the metric lines are not echoed ...
    assert not any("Epoch:[" in line for line in lines), out
    # ... every other line is, as before
    for rank in (0, 1):
        for want in (f"[{rank}] hello from rank {rank}", f"[{rank}] epoch 1 done on rank {rank}",
                     f"[{rank}] epoch 2 done on rank {rank}",
                     f"[{rank}] warning on stderr from rank {rank}"):
            assert want in lines, (want, out)
    # a progress line per rank: step of the total, loss, steps/s and an ETA while it runs
    progress = [line for line in lines if re.match(r"\[[01]\] step \d+/20 ", line)]
    assert any("steps/s" in line and "ETA " in line for line in progress), out
    for rank in (0, 1):
        assert f"[{rank}] step 20/20  loss 0.03333" in lines[-2:][rank], lines[-2:]
    # kept in place: the block is erased and redrawn with ANSI codes, a few times a second
    redraws = out.count("\x1b[J")
    assert 2 <= redraws <= 4 * took + 8, (redraws, took)
    # the logs keep everything
    log = _rank_log(home, err, 0)
    assert log.count("Epoch:[") == 2 * STEPS and "hello from rank 0" in log


def test_raw_echoes_metric_lines_as_printed(trainctl, home, tmp_path):
    out, err, rc, _ = _run_on_pty(trainctl, home, _spec(tmp_path), "--raw")
    assert rc == 0, err
    assert "\x1b[" not in out
    lines = _lines(out)
    for rank in (0, 1):
        mine = [line for line in lines if line.startswith(f"[{rank}] ") and "Epoch:[" in line]
        assert len(mine) == 2 * STEPS, out
    assert not any(re.match(r"\[[01]\] step \d+/20 ", line) for line in lines)


def test_pipe_is_unchanged(trainctl, home, tmp_path):
    r = subprocess.run([str(trainctl), "run", _spec(tmp_path)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=_env(home), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "\x1b[" not in r.stdout and "\r" not in r.stdout
    for rank in (0, 1):
        log = _rank_log(home, r.stderr, rank).splitlines()
        echoed = [line[len(f"[{rank}] "):] for line in r.stdout.splitlines()
                  if line.startswith(f"[{rank}] ")]
        assert echoed == log  # every line, in order, as printed
