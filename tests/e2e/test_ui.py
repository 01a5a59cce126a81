"""The web UI in a real browser (Debian's chromium driven by playwright-core,
tests/ui/ui_test.js): the distributed form offers the server's backends and
says why one cannot be used; submit a job with the form, watch it reach
running and succeeded, see the loss chart with points drawn, stop another job
with its button, after logging in with the server's one-time login URL; a
page from another origin cannot submit a job.  Screenshots are kept in build/test-artifacts/ui/ (failure.png is the
page at the moment a check failed).

Robust on a loaded machine: ui_test.js waits on conditions with generous
deadlines (UI_TIMEOUT_SCALE=N stretches them), the job holds in running until
the script releases it, and a failure prints the step, the page's state,
the screenshot path and the server's log."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import REPO
from server_fixture import start_server, sleeper

# holds (running) until the browser script creates ./release, at most 10 min
LOSS = r'''
import json, os, time
n = int(os.environ.get("STEPS", "50"))
for i in range(n):
    print("DLLL " + json.dumps({"type": "LOG", "step": [0, i], "data": {"loss": 2.0 / (i + 1) + 0.05 * (i % 7)}}), flush=True)
end = time.time() + 600
while not os.path.exists("release") and time.time() < end:
    time.sleep(0.1)
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
    sl = None
    try:
        st, page = srv.call("GET", "/")
        assert st == 200 and "<title>trainctl</title>" in page
        st, js = srv.call("GET", "/uPlot.js")
        assert st == 200 and "uPlot" in js and len(js) > 10000, "uPlot was not embedded (npm ci --prefix web)"
        # lives until the browser stops it, however long the steps before take
        sl = srv.submit(sleeper(3600, name="ui-sleeper"))
        srv.wait_state(sl, "running", timeout=120)
        (out / "failure.png").unlink(missing_ok=True)
        try:
            p = subprocess.run([node, str(ui / "ui_test.js"), srv.url, str(out), str(tmp_path), sl,
                                srv.login_url()],
                               capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"ui_test.js ran past 900 s\nstdout: {e.stdout}\nstderr: {e.stderr}\n"
                        f"server log:\n{srv.log()[-3000:]}", pytrace=False)
        lines = p.stdout.strip().splitlines()
        assert lines, f"ui_test.js printed nothing (exit {p.returncode})\nstderr: {p.stderr}"
        r = json.loads(lines[-1])

        def why():
            return (f"\nfailed step: {r.get('error', '-')}\npage: {json.dumps(r.get('page'), indent=1)}"
                    f"\nscreenshot: {r.get('screenshot', out)}"
                    f"\nresult: {json.dumps({k: v for k, v in r.items() if k not in ('error', 'page')})}"
                    f"\nstderr: {p.stderr[-2000:]}\nserver log:\n{srv.log()[-3000:]}")

        assert p.returncode == 0 and "error" not in r, why()
        # the cookie login (docs/security.md): nothing before, the operator after, one use
        assert r["before_login"] == 401, why()
        assert r["cookie"] == {"httpOnly": True, "sameSite": "Strict"}, why()
        assert r["whoami"]["admin"] is True, why()
        assert r["login_again"] == 403, why()
        # the page from another origin submitted nothing (issue 13, finding 1)
        assert "another origin" in r["csrf_answer"], why()
        st, listed = srv.call("GET", "/api/v1/jobs?limit=1000")
        assert not [j for j in listed["jobs"] if j["name"].startswith("csrf")], why()
        assert "running" in r["states"] and r["states"][-1] == "succeeded", why()
        assert r["metric"] == "loss" and r["painted"] > 500, why()
        assert r["sleeper"] == "killed", why()
        assert r["distributed_spec"] == {"backend": "slurm", "nodes": 2}, why()
        assert r["phone_overflow"] <= 0, why()
        assert not r.get("pageerrors"), why()
        assert srv.job(r["job"])["state"] == "succeeded", why()
        assert srv.job(sl)["state"] == "killed", why()
        for shot in ("submit-distributed", "submit-form", "job-running", "job-metrics", "jobs-table", "phone-metrics"):
            assert (out / f"{shot}.png").stat().st_size > 1000
    finally:
        # a failure before the stop step must not leave the hour-long sleeper
        # behind (supervisors outlive the server)
        if sl and srv.proc.poll() is None:
            try:
                if srv.job(sl)["state"] not in ("killed", "succeeded", "failed", "lost"):
                    srv.call("POST", f"/api/v1/jobs/{sl}/stop", {})
                    srv.wait_state(sl, "killed", timeout=60)
            except AssertionError:
                pass  # the test's own failure is the one to report
        srv.stop()
