"""The web UI in a real browser (tests/ui/ui_endpoint.js, as test_ui.py runs
ui_test.js), on a server with --endpoint-host ep.test (chromium maps *.ep.test to 127.0.0.1):

  - the submit form's image field reaches the spec: the job page shows it,
    and so does the API's job JSON (the job itself may fail: no podman or
    no such image here; what counts is the field);
  - the job page's endpoint link opens the endpoint on its own host name
    (JOB-web.ep.test, on the server's port), through the one-time ticket;
  - there, the job's page (its script) with the admin's session cookie in
    the browser cannot stop a job or submit one through the API, cannot read
    the API's answers (no CORS), and sees no trainctl cookie.
Screenshots go to build/test-artifacts/ui/."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import REPO, wait_until
from server_fixture import endpoint_up, start_server

IMAGE = "localhost/trainctl-ui-absent:1"

PAGE = r'''<!doctype html><html><head><title>endpoint</title></head><body><pre id="result"></pre><script>
const API = "%API%", JOB = "%JOB%";
(async () => {
  const r = { origin: location.origin, cookies: document.cookie };
  // with the admin's cookie, were the browser to send it
  try {
    await fetch(`${API}/api/v1/jobs/${JOB}/stop`, { method: "POST", mode: "no-cors", credentials: "include" });
    r.stop = "sent";
  } catch (e) { r.stop = "error: " + e; }
  try {
    await fetch(`${API}/api/v1/jobs`, { method: "POST", mode: "no-cors", credentials: "include",
      headers: { "Content-Type": "text/plain" }, body: JSON.stringify({ spec: { name: "forged-ui", command: "true" } }) });
    r.submit = "sent";
  } catch (e) { r.submit = "error: " + e; }
  try {
    const a = await fetch(`${API}/api/v1/whoami`, { credentials: "include" });
    r.read = "read: " + await a.text();
  } catch (e) { r.read = "blocked"; }
  document.getElementById("result").textContent = JSON.stringify(r);
  const d = document.createElement("i"); d.id = "done"; document.body.appendChild(d);
})();
</script></body></html>
'''


def test_image_field_and_endpoint_origin(trainctl, tmp_path):
    node = shutil.which("node")
    ui = REPO / "tests" / "ui"
    if not node or not (ui / "node_modules" / "playwright-core").is_dir() or not os.path.exists("/usr/bin/chromium"):
        pytest.fail("the UI test needs node, `npm ci --prefix tests/ui` and /usr/bin/chromium "
                    "(scripts/install-deps.sh)", pytrace=False)
    out = REPO / "build" / "test-artifacts" / "ui"
    out.mkdir(parents=True, exist_ok=True)
    srv = start_server(trainctl, tmp_path / "state", args=["--endpoint-host", "ep.test"])
    jobs = []
    try:
        site = tmp_path / "site"
        site.mkdir()
        job = srv.submit({"name": "ui-ep", "command": "sleep 600", "workdir": str(site),
                          "endpoints": [{"name": "web", "command":
                                         "python3 -m http.server --bind 127.0.0.1 $PORT"}]})
        jobs.append(job)
        (site / "index.html").write_text(PAGE.replace("%API%", srv.url).replace("%JOB%", job))
        srv.wait_state(job, "running")

        wait_until(lambda: endpoint_up(srv, job), what=lambda: srv.run_logs(job))
        try:
            p = subprocess.run([node, str(ui / "ui_endpoint.js"), srv.url, str(out), srv.login_url(),
                                IMAGE, job], capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"ui_endpoint.js ran past 600 s\nstdout: {e.stdout}\nstderr: {e.stderr}\n"
                        f"server log:\n{srv.log()[-3000:]}", pytrace=False)
        lines = p.stdout.strip().splitlines()
        assert lines, f"ui_endpoint.js printed nothing (exit {p.returncode})\nstderr: {p.stderr}"
        r = json.loads(lines[-1])
        if r.get("job"):
            jobs.append(r["job"])
        why = f"\n{json.dumps(r, indent=1)}\nstderr: {p.stderr[-2000:]}\nserver log:\n{srv.log()[-3000:]}"
        assert p.returncode == 0 and "error" not in r, why

        # the form's image: on the job page and in the API's job JSON
        assert r["image_shown"] == IMAGE and r["image_json"] == IMAGE, why
        assert srv.job(r["job"])["spec"]["image"] == IMAGE, why

        # the endpoint on its own host name, served by the server's own port
        assert r["link"] == f"/jobs/{job}/endpoints/web/", why
        origin = r["page"]["origin"]
        assert origin == f"http://{job}-web.ep.test:{srv.port}", why
        assert r["endpoint_url"] == f"{origin}/jobs/{job}/endpoints/web/", why
        # its script, with the admin's cookie: no change, no read, no cookie to see
        assert r["page"]["cookies"] == "", why
        assert r["page"]["read"] == "blocked", why
        assert r["page"]["stop"] == "sent" and r["page"]["submit"] == "sent", why
        assert srv.job(job)["state"] == "running", why
        listed = srv.call("GET", "/api/v1/jobs?limit=1000")[1]["jobs"]
        assert not [j for j in listed if j["name"] == "forged-ui"], why
        assert not r.get("pageerrors"), why
    finally:
        for j in jobs:
            try:
                if srv.job(j)["state"] not in ("killed", "succeeded", "failed", "lost"):
                    srv.call("POST", f"/api/v1/jobs/{j}/stop", {})
                    srv.wait_state(j, ["killed", "succeeded", "failed", "lost"], timeout=60)
            except AssertionError:
                pass  # the test's own failure is the one to report
        srv.stop()
