"""What a new user trips over (issue 16, section 3): logs of a job without
worker logs, commands that are not there, `ps` columns, `run -q`, the order
of the end message, plurals and the small CLI things."""
import csv
import io
import json
import os
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
        queued = srv.submit(sleeper(1, name="second"))
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
        srv.call("POST", f"/api/v1/jobs/{running}/stop", {})
        srv.call("POST", f"/api/v1/jobs/{queued}/stop", {})
        srv.wait_state(running, "killed")
        srv.wait_state(queued, "killed")
        p = srv.cli("logs", queued)
        assert p.returncode == 1, p.stderr
        assert f"job {queued}: killed before any worker started: see `trainctl show {queued}`" in p.stderr
    finally:
        srv.stop()
