"""logs.max_bytes: a rank log keeps its head, a marker of what was dropped and
its tail; followers go on across the cut; metrics of the dropped lines stay
(docs/reliability.md, "Log limits")."""
import json
import os
import re
import subprocess
import sys

from conftest import show, wait_on_job, wait_until, job_id_in

LIMIT = 64 * 1024
LINES = 3000

# Rank 0 prints FIRST, waits for the gate file (the test's follower is
# running then), prints LINES lines, each with a DLLogger metric line, then LAST.
WORKER = r"""
import os, sys, time
gate = sys.argv[1]
print("FIRST", flush=True)
while not os.path.exists(gate):
    time.sleep(0.02)
for i in range(1, %d + 1):
    print("line %%06d %%s" %% (i, "x" * 80))
    print('DLLL {"type": "LOG", "step": %%d, "data": {"train.loss": %%d.5}}' %% (i, i))
    if i %% 200 == 0:
        sys.stdout.flush()
print("LAST", flush=True)
""" % LINES


def _spec(tmp_path, limit):
    (tmp_path / "worker.py").write_text(WORKER)
    spec = tmp_path / "job.yaml"
    spec.write_text(f"""name: loglimit
command: ["{sys.executable}", "{tmp_path / 'worker.py'}", "{tmp_path / 'gate'}"]
logs:
  max_bytes: {limit}
""")
    return spec


def _numbers(text):
    return [int(m) for m in re.findall(r"^line (\d{6}) ", text, re.M)]


def test_head_marker_tail_followed_and_metrics_kept(trainctl, home, run_tc, tmp_path):
    spec = _spec(tmp_path, "64KiB")
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    run = subprocess.Popen([trainctl, "run", "--quiet", str(spec)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    follow = None
    try:
        job = wait_until(lambda: job_id_in(home), timeout=120, what="the job's row")

        def state():
            p = run_tc("show", "--json", job)
            return json.loads(p.stdout) if p.returncode == 0 else None

        # the follower starts before the cut: it has printed FIRST
        out = tmp_path / "follow.out"
        with open(out, "w") as f:
            follow = subprocess.Popen([trainctl, "logs", "-f", job], env=env, stdout=f,
                                      stderr=subprocess.PIPE, text=True)
        wait_on_job(lambda: "FIRST" in out.read_text(), state, timeout=120,
                    what="FIRST from `logs -f`")
        (tmp_path / "gate").write_text("")
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
        follow.wait(timeout=120)
        assert follow.returncode == 0, follow.stderr.read()
    finally:
        for p in (run, follow):
            if p and p.poll() is None:
                p.kill()
                p.wait()

    j = show(run_tc, job)
    log_path = os.path.join(j["run_dir"], "logs", "rank-0.log")
    with open(log_path) as f:
        log = f.read()

    # one marker, between the head and the tail, and the log within the limit plus the marker
    markers = [l for l in log.splitlines() if l.startswith("[trainctl: ")]
    assert len(markers) == 1, markers
    marker = markers[0] + "\n"
    assert len(log.encode()) <= LIMIT + len(marker)
    m = re.match(r"\[trainctl: (\d+) bytes \((\d+) lines\) dropped here: the log passed "
                 r"logs.max_bytes 64.0 KiB\]$", markers[0])
    assert m, markers[0]
    head, tail = log.split(marker)
    assert head.startswith("FIRST\n") and len(head.encode()) <= LIMIT // 2
    assert tail.endswith("LAST\n")
    # the counts are exact: what the worker printed is head + dropped + tail
    printed = "FIRST\n" + "".join(
        "line %06d %s\n" % (i, "x" * 80) +
        'DLLL {"type": "LOG", "step": %d, "data": {"train.loss": %d.5}}\n' % (i, i)
        for i in range(1, LINES + 1)) + "LAST\n"
    assert int(m.group(1)) == len(printed.encode()) - len(head.encode()) - len(tail.encode())
    assert int(m.group(2)) == printed.count("\n") - head.count("\n") - tail.count("\n")
    assert printed.startswith(head) and printed.endswith(tail)

    # every metric, from the dropped middle too
    r = run_tc("metrics", job, "--name", "train.loss", "--rank", "0", "--format", "json")
    assert r.returncode == 0, r.stderr
    steps = sorted(int(p["step"]) for p in json.loads(r.stdout) if p["kind"] == "point")
    assert steps == list(range(1, LINES + 1))

    # the follower: the head, then on across the cut to the tail's end, never a line twice
    followed = out.read_text()
    assert followed.startswith(head) and followed.endswith("LAST\n")
    seen = _numbers(followed)
    assert seen == sorted(set(seen)), "a line twice or out of order"
    assert seen[-1] == LINES and set(_numbers(tail)) <= set(seen)

    # --tail 5: the last 5 lines, across the cut
    r = run_tc("logs", job, "--tail", "5")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "".join(tail.splitlines(keepends=True)[-5:])
    # and the whole log: head, marker, tail
    r = run_tc("logs", job)
    assert r.returncode == 0 and r.stdout == log


def test_bad_max_bytes_names_file_line_key(run_tc, tmp_path):
    spec = _spec(tmp_path, "lots")
    r = run_tc("run", str(spec))
    assert r.returncode == 2
    assert f"{spec.name}:4: logs.max_bytes: must be a size" in r.stderr, r.stderr


def test_the_servers_stream_follows_across_the_cut(trainctl, tmp_path):
    from server_fixture import start_server
    spec = _spec(tmp_path, "64KiB").read_text()
    srv = start_server(trainctl, tmp_path / "state")
    try:
        job = srv.submit(spec)
        r = srv.stream(f"/api/v1/jobs/{job}/logs?follow=1&rank=0")
        lines = []
        ended = False
        while not ended:
            line = r.readline()
            assert line, "the stream ended without its end event"
            if line.startswith(b"event: end"):
                ended = True
            elif line.startswith(b"data: "):
                lines.append(json.loads(line[6:])["line"])
                if lines == ["FIRST"]:  # the stream runs before the cut
                    (tmp_path / "gate").write_text("")
        r.close()
        r.connection_.close()
        assert lines[0] == "FIRST" and lines[-1] == "LAST", (lines[:3], lines[-3:])
        seen = _numbers("\n".join(lines) + "\n")
        assert seen == sorted(set(seen)), "a line twice or out of order"
        assert seen[-1] == LINES
        srv.wait_state(job, "succeeded")
        st, text = srv.call("GET", f"/api/v1/jobs/{job}/logs?rank=0")
        assert st == 200 and text.startswith("FIRST\n") and text.endswith("LAST\n")
        assert text.count("dropped here: the log passed logs.max_bytes 64.0 KiB]\n") == 1
        assert len(text.encode()) <= LIMIT + 200
    finally:
        srv.stop()
