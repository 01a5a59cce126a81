"""The job page's step time per rank, with the straggler marked
(docs/diagnostics.md), in a real browser (tests/ui/ui_watchdog.js), as
tests/e2e/test_ui.py does: a job of 2 CPU ranks (the server's CPUs may be
no more) where rank 1 takes twice as long a step, submitted through the
server: 33% slower than the median of the two.  The browser logs in with
the server's one-time login URL first."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import PYTHON, REPO
from server_fixture import start_server

STEPS = r'''
import json, os, time
r = int(os.environ["RANK"])
for s in range(1, 31):
    time.sleep(0.2 if r == 1 else 0.1)
    print("DLLL " + json.dumps({"type": "LOG", "step": s, "data": {"loss": 1.0 / s}}), flush=True)
'''


def test_job_page_shows_step_time_per_rank(trainctl, tmp_path):
    node = shutil.which("node")
    ui = REPO / "tests" / "ui"
    if not node or not (ui / "node_modules" / "playwright-core").is_dir() or not os.path.exists("/usr/bin/chromium"):
        pytest.fail("the UI test needs node, `npm ci --prefix tests/ui` and /usr/bin/chromium "
                    "(scripts/install-deps.sh)", pytrace=False)
    (tmp_path / "steps.py").write_text(STEPS)
    out = REPO / "build" / "test-artifacts" / "ui"
    out.mkdir(parents=True, exist_ok=True)
    srv = start_server(trainctl, tmp_path / "state")
    try:
        job = srv.submit({"name": "skew", "command": [PYTHON, str(tmp_path / "steps.py")],
                          "devices": {"type": "cpu", "per_node": 2},
                          "watchdog": {"straggler_percent": 25, "straggler_steps": 5}})
        srv.wait_state(job, "succeeded", timeout=300)
        d = srv.job(job)["diagnostics"]
        assert [s["rank"] for s in d["stragglers"]] == [1], d
        p = subprocess.run([node, str(ui / "ui_watchdog.js"), srv.url, str(out), job, srv.login_url()],
                           capture_output=True, text=True, timeout=600)
        lines = p.stdout.strip().splitlines()
        assert lines, f"ui_watchdog.js printed nothing (exit {p.returncode})\nstderr: {p.stderr}"
        r = json.loads(lines[-1])
        assert p.returncode == 0 and "error" not in r, f"{r}\nstderr: {p.stderr[-2000:]}"
        assert r["heading"] == "Step time per rank"
        assert [x["rank"] for x in r["rows"]] == [0, 1], r
        assert [x["straggler"] for x in r["rows"]] == [False, True], r
        assert all(x["step_time"].endswith("ms") for x in r["rows"]), r
        assert "straggler:" in r["rows"][1]["note"] and "slower than the median" in r["rows"][1]["note"]
        assert not r.get("pageerrors"), r
    finally:
        srv.stop()
