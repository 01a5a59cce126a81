"""What a new user trips over (issue 16, section 3): logs of a job without
worker logs, commands that are not there, `ps` columns, `run -q`, the order
of the end message, plurals and the small CLI things."""
import csv
import io
import json
import os
import pwd
import re
import sqlite3

import pytest

from conftest import PYTHON
from server_fixture import sleeper, start_server


def jobs_in_db(home):
    db = os.path.join(home, "trainctl.db")
    if not os.path.exists(db):
        return []
    with sqlite3.connect(db) as c:
        return [r[0] for r in c.execute("SELECT id FROM jobs")]


# ---- 3.3: logs of a job with no worker log ----------------------------------------

def test_logs_of_a_job_that_failed_in_staging(run_tc, home, tmp_path):
    s = tmp_path / "st.yaml"
    s.write_text("name: stagefail\ncommand: [\"true\"]\ninputs:\n  - {from: /nonexistent/data, to: d}\n")
    p = run_tc("run", s)
    assert p.returncode == 3, p.stderr
    p = run_tc("logs", "stagefail")
    assert p.returncode == 1 and p.stdout == ""
    job = jobs_in_db(home)[0]
    assert p.stderr.strip() == (f"trainctl: logs: job {job}: failed before any worker started: "
                                f"see `trainctl show {job}`")


def test_logs_rank_beyond_the_job(run_tc, home):
    assert run_tc("run", "--nproc", "2", "--", "true").returncode == 0
    p = run_tc("logs", "true", "--rank", "5")
    assert p.returncode == 2 and "has ranks 0-1 (not 5)" in p.stderr, p.stderr


def test_logs_through_the_server(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:1")
    try:
        running = srv.submit(sleeper(60, name="first"))
        queued = srv.submit(sleeper(60, name="second"))
        srv.wait_state(running, "running")
        # a queued job: no 404 with the server's paths, a note and exit 0
        st, body = srv.call("GET", f"/api/v1/jobs/{queued}/logs")
        assert st == 404 and body["error"] == f"job {queued} is queued: no logs yet", body
        assert str(tmp_path) not in json.dumps(body)
        p = srv.cli("logs", queued)
        assert p.returncode == 0 and p.stdout == "", p.stderr
        assert f"job {queued} is queued: no logs yet" in p.stderr
        # a program that is not there: exit 2 at submission, nothing queued
        spec = tmp_path / "typo.yaml"
        spec.write_text("name: typo\ncommand: [pyhton3, -c, '1']\n")
        p = srv.cli("submit", spec)
        assert p.returncode == 2, p.stderr
        assert "typo.yaml:2: command: 'pyhton3' is not found on PATH (did you mean 'python3'?)" in p.stderr
        st, body = srv.call("GET", "/api/v1/jobs?limit=100")
        assert sorted(j["name"] for j in body["jobs"]) == ["first", "second"]
        srv.call("POST", f"/api/v1/jobs/{queued}/stop", {})
        srv.wait_state(queued, "killed")
        srv.call("POST", f"/api/v1/jobs/{running}/stop", {})
        srv.wait_state(running, "killed")
        p = srv.cli("logs", queued)
        assert p.returncode == 1, p.stderr
        assert f"job {queued}: killed before any worker started: see `trainctl show {queued}`" in p.stderr
    finally:
        srv.stop()


# ---- 3.10: ps columns, the same with and without a server --------------------------

PS_HEADER = ["JOB", "NAME", "USER", "STATE", "AGE", "DURATION", "DEVICES", "RESTARTS", "RESULT"]


def test_ps_columns_and_formats(run_tc, home):
    assert run_tc("run", "--nproc", "2", "--name", "ok", "--", "true").returncode == 0
    assert run_tc("run", "--name", "bad", "--", "sh", "-c", "exit 4").returncode == 1
    p = run_tc("ps")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == PS_HEADER
    bad, ok = lines[1].split(), lines[2].split()
    me = pwd.getpwuid(os.getuid()).pw_name  # run records the account (issue 16, 2)
    assert bad[1:4] == ["bad", me, "failed"] and ok[1:4] == ["ok", me, "succeeded"]
    assert ok[6] == "cpu:2" and bad[6] == "cpu:1"
    assert ok[8:] == ["exit", "0"]
    assert " ".join(bad[8:]) == "exit 1: rank 0 exited with code 4"
    # csv: a header of column names, every value whole
    p = run_tc("ps", "--format", "csv", "-o", "name,state,exit,cause,devices,start")
    rows = list(csv.reader(io.StringIO(p.stdout)))
    assert rows[0] == ["name", "state", "exit", "cause", "devices", "start"]
    assert rows[1][:5] == ["bad", "failed", "1", "rank 0 exited with code 4", "cpu:1"]
    assert rows[2][:5] == ["ok", "succeeded", "0", "", "cpu:2"] and rows[2][5].startswith("20")
    # json is the jobs' objects; --json is --format json
    assert json.loads(run_tc("ps", "--format", "json").stdout) == json.loads(run_tc("ps", "--json").stdout)
    p = run_tc("ps", "--state", "failed", "-o", "name")
    assert p.stdout.split() == ["NAME", "bad"]
    p = run_tc("ps", "-o", "name,colour")
    assert p.returncode == 2 and "'colour' is not a column" in p.stderr
    p = run_tc("ps", "--format", "xml")
    assert p.returncode == 2


def test_ps_is_the_same_through_the_server(trainctl, tmp_path):
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:2")
    try:
        job = srv.submit(sleeper(0, name="quick"))
        srv.wait_state(job, "succeeded")
        p = srv.cli("ps")
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert lines[0].split() == PS_HEADER
        row = lines[1].split()
        assert row[0] == job and row[1] == "quick" and row[3] == "succeeded"
        assert row[6] == "gpu:1" and row[8:] == ["exit", "0"]
        p = srv.cli("ps", "--format", "csv", "-o", "id,state,devices")
        assert p.stdout.splitlines() == ["id,state,devices", f"{job},succeeded,gpu:1"]
    finally:
        srv.stop()


# ---- 3.14: run -q, the order of the end message, plurals ---------------------------

CKPT_JOB = """
name: ckpts
command: ["/bin/sh", "-c", "for i in 1 2 3; do echo step $i; touch $TRAINCTL_CKPT_DIR/step-$i.pt; done; sleep 1.5"]
"""


def test_quiet_run_says_only_the_result(run_tc, home, tmp_path):
    (tmp_path / "job.yaml").write_text(CKPT_JOB)
    p = run_tc("run", "-q", tmp_path / "job.yaml")
    assert p.returncode == 0, p.stderr
    job = jobs_in_db(home)[0]
    assert p.stdout == "" and p.stderr == f"trainctl: job {job} succeeded\n"
    # everything is in the supervisor's log still
    p = run_tc("logs", job, "--supervisor")
    assert "1 worker started" in p.stdout and "succeeded" in p.stdout
    # a failure: the rank's, then the result line with its cause (and the log's tail)
    p = run_tc("run", "-q", "--", "sh", "-c", "echo oops; exit 3")
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    assert lines[0] == "trainctl: rank 0 exited with code 3; stopping the other workers", lines
    assert lines[1].startswith("trainctl: job ") and lines[1].endswith(" failed: rank 0 exited with code 3")
    assert lines[-1] == "oops" and "worker started" not in p.stderr


def test_the_result_line_comes_last(run_tc, home, tmp_path):
    (tmp_path / "job.yaml").write_text(CKPT_JOB)
    p = run_tc("run", tmp_path / "job.yaml")
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert lines[-1].endswith(" succeeded"), lines
    assert any("complete" in l for l in lines), lines
    assert "1 worker started" in p.stderr and "1 workers" not in p.stderr


# ---- 3.14: metrics --name and --rank, logs --help, a busy port ---------------------

METRICS_JOB = ["sh", "-c", 'echo \'DLLL {"type": "LOG", "step": [0, 1], "data": {"train.loss": 2.5}}\'']


def test_metrics_name_and_rank(run_tc, home):
    assert run_tc("run", "--nproc", "2", "--name", "m", "--", *METRICS_JOB).returncode == 0
    p = run_tc("metrics", "m", "--name", "train.los")
    assert p.returncode == 2
    assert "has no metric 'train.los' (did you mean 'train.loss'?)" in p.stderr, p.stderr
    p = run_tc("metrics", "m", "--name", "train.loss", "--rank", "5")
    assert p.returncode == 2 and "has ranks 0-1 (not 5)" in p.stderr, p.stderr
    p = run_tc("metrics", "m", "--name", "zzz")
    assert p.returncode == 2 and "trainctl show" in p.stderr
    assert run_tc("metrics", "m", "--name", "train.loss", "--rank", "1").returncode == 0
    # -n is no longer --name (nor run's --nproc): only logs -n, as tail -n
    assert run_tc("metrics", "m", "-n", "train.loss").returncode == 2
    assert run_tc("run", "-n", "2", "--", "true").returncode == 2
    assert run_tc("logs", "m", "-n", "1").returncode == 0


def test_old_short_n_says_what_it_became(run_tc, tmp_path):
    # -n is logs --tail only; where it meant something else, one message names the long option
    for args, was in ((["run", "-n", "2", "--", "true"], "--nproc"),
                      (["metrics", "m", "-n", "train.loss"], "--name"),
                      (["sync", "-n", str(tmp_path), str(tmp_path / "d")], "--dry-run"),
                      (["plan", "synth", "--graph-size", "4", "--num-split", "1", "-n", "2"], "--count")):
        p = run_tc(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert p.stderr.strip().splitlines() == [
            f"trainctl: {args[0] if args[0] != 'plan' else 'plan synth'}: -n is not an option here"
            f" (it is `logs --tail` only): did you mean {was}?"], p.stderr
    p = run_tc("sync", "--frobnicate", str(tmp_path), str(tmp_path / "d"))
    assert p.returncode == 2 and "unknown option '--frobnicate'" in p.stderr, p.stderr
    p = run_tc("plan", "synth", "--graph-size", "4", "--num-split", "1", "--count", "2")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 2
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "f").write_text("x")
    p = run_tc("sync", "--dry-run", str(tmp_path / "s"), str(tmp_path / "d"))
    assert p.returncode == 0 and not (tmp_path / "d" / "f").exists(), p.stderr


def test_logs_help_is_aligned(run_tc):
    p = run_tc("logs", "--help")
    opts = [l for l in p.stdout.splitlines() if l.startswith("  ")]
    assert len(opts) >= 5
    cols = {len(re.match(r"^(\s+(?:-\w, )?--[\w-]+(?: [A-Z]+)?\s+)", l).group(1)) for l in opts}
    assert len(cols) == 1, p.stdout


def test_busy_port_is_one_message(trainctl, tmp_path):
    import socket
    import subprocess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        env = dict(os.environ, TRAINCTL_HOME=str(tmp_path / "state"))
        p = subprocess.run([str(trainctl), "server", "--listen", f"127.0.0.1:{port}"], env=env,
                           capture_output=True, text=True, timeout=30)
    assert p.returncode == 3
    assert p.stderr == (f"trainctl: server: cannot listen on 127.0.0.1:{port}: the port is in use"
                        " (another server? --listen HOST:PORT picks another)\n"), p.stderr


def test_metrics_json_numbers_are_shortest(run_tc, home):
    # 0.05 as written, not 0.050000000000000003 (issue 16, 3.14); the values read back the same
    line = 'DLLL {"type": "LOG", "step": [0, 1], "data": {"train.lr": 0.05, "train.loss": 0.1}}'
    assert run_tc("run", "--name", "f", "--", "sh", "-c", f"echo '{line}'").returncode == 0
    p = run_tc("metrics", "f", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert '"value": 0.05,' in p.stdout and '"value": 0.1,' in p.stdout, p.stdout
    assert "0.0500000" not in p.stdout and "0.1000000" not in p.stdout, p.stdout
    values = {x["metric"]: x["value"] for x in json.loads(p.stdout)}
    assert values == {"train.lr": 0.05, "train.loss": 0.1}, values
