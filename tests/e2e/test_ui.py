"""The web UI in a real browser (Debian's chromium driven by playwright-core,
tests/ui/ui_test.js): submit a job with the form, watch it reach running and
succeeded, see the loss chart with points drawn, stop another job with its
button.  Screenshots are kept in build/test-artifacts/ui/."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import REPO
from server_fixture import start_server, sleeper

LOSS = r'''
import json, os, time
n = int(os.environ.get("STEPS", "50"))
for i in range(n):
    print("DLLL " + json.dumps({"type": "LOG", "step": [0, i], "data": {"loss": 2.0 / (i + 1) + 0.05 * (i % 7)}}), flush=True)
    time.sleep(float(os.environ.get("PAUSE", "0")))
print("done", flush=True)
'''


def test_browser(trainctl, tmp_path):
    node = shutil.which("node")
    ui = REPO / "tests" / "ui"
    if not node or not (ui / "node_modules" / "playwright-core").is_dir() or not os.path.exists("/usr/bin/chromium"):
        pytest.fail("the UI test needs node, `npm ci --prefix tests/ui` and /usr/bin/chromium "
                    "(scripts/install-deps.sh)", pytrace=False)
    (tmp_path / "loss.py").write_text(LOSS)
    out = REPO / "build" / "test-artifacts" / "ui"
    out.mkdir(parents=True, exist_ok=True)
    srv = start_server(trainctl, tmp_path / "state", fake="gpu:1", args=["--sample-seconds", "1"])
    try:
        st, page = srv.call("GET", "/")
        assert st == 200 and "<title>trainctl</title>" in page
        st, js = srv.call("GET", "/uPlot.js")
        assert st == 200 and "uPlot" in js and len(js) > 10000, "uPlot was not embedded (npm ci --prefix web)"
        sl = srv.submit(sleeper(120, name="ui-sleeper"))
        srv.wait_state(sl, "running")
        p = subprocess.run([node, str(ui / "ui_test.js"), srv.url, str(out), str(tmp_path), sl],
                           capture_output=True, text=True, timeout=240)
        assert p.stdout.strip(), p.stderr
        r = json.loads(p.stdout.strip().splitlines()[-1])
        assert p.returncode == 0 and "error" not in r, r.get("error", p.stderr)
        assert "running" in r["states"] and r["states"][-1] == "succeeded", r
        assert r["metric"] == "loss" and r["painted"] > 500, r
        assert r["sleeper"] == "killed", r
        assert r["phone_overflow"] <= 0, r
        assert not r.get("pageerrors"), r
        assert srv.job(r["job"])["state"] == "succeeded"
        assert srv.job(sl)["state"] == "killed"
        for shot in ("submit-form", "job-running", "job-metrics", "jobs-table", "phone-metrics"):
            assert (out / f"{shot}.png").stat().st_size > 1000
    finally:
        srv.stop()
