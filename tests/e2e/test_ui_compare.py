"""The compare view and the sweep page of the web UI in a real browser
(Debian's chromium driven by playwright-core, tests/ui/compare_test.js):
three jobs ticked on the jobs page draw one chart per metric with three
series; a finished sweep's page sorts its trials by the objective and draws
a scatter per parameter; its Compare draws one series per trial.
Screenshots go to build/test-artifacts/ui/."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import REPO
from server_fixture import start_server, wait_for

# two metrics per step ([epoch, iteration] records, the ones charts draw): loss and acc
TOY = r'''
import json, os
x = float(os.environ["X"])
for i in range(20):
    print("DLLL " + json.dumps({"type": "LOG", "step": [1, i + 1], "data": {"loss": x / (i + 1), "acc": 1 - x / (i + 2)}}), flush=True)
'''


def test_compare_view(trainctl, tmp_path):
    node = shutil.which("node")
    ui = REPO / "tests" / "ui"
    if not node or not (ui / "node_modules" / "playwright-core").is_dir() or not os.path.exists("/usr/bin/chromium"):
        pytest.fail("the UI test needs node, `npm ci --prefix tests/ui` and /usr/bin/chromium "
                    "(scripts/install-deps.sh)", pytrace=False)
    (tmp_path / "toy.py").write_text(TOY)
    out = REPO / "build" / "test-artifacts" / "ui"
    out.mkdir(parents=True, exist_ok=True)
    srv = start_server(trainctl, tmp_path / "state", args=("--cpu-slots", "2"))
    spec = {"command": ["/usr/bin/python3", "toy.py"], "workdir": str(tmp_path),
            "devices": {"type": "cpu", "per_node": 1}}
    jobs = [srv.submit(dict(spec, name=f"toy{x}", env={"X": str(x)})) for x in (1, 2, 3)]
    (tmp_path / "sweep.yaml").write_text(
        "name: ui-sweep\nspec: {command: [/usr/bin/python3, toy.py], env: {X: '1'},"
        " devices: {type: cpu, per_node: 1}}\n"
        "parameters:\n  env.X: ['0.5', '1.5', '2.5']\nobjective: {metric: acc, mode: max}\nparallel: 2\n")
    r = srv.cli("sweep", tmp_path / "sweep.yaml")
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    for j in jobs:
        srv.wait_state(j, "succeeded")
    assert wait_for(lambda: srv.call("GET", f"/api/v1/sweeps/{sid}")[1]["state"] == "done", timeout=300), srv.log()
    try:
        p = subprocess.run([node, str(ui / "compare_test.js"), srv.url, str(out), sid] + jobs,
                           capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, UI_LOGIN_URL=srv.login_url()))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"compare_test.js ran past 600 s\nstdout: {e.stdout}\nstderr: {e.stderr}", pytrace=False)
    lines = p.stdout.strip().splitlines()
    assert lines, f"compare_test.js printed nothing (exit {p.returncode})\nstderr: {p.stderr}"
    res = json.loads(lines[-1])
    why = f"\n{json.dumps(res, indent=1)}\nstderr: {p.stderr[-2000:]}\nserver log:\n{srv.log()[-2000:]}"
    assert p.returncode == 0 and "error" not in res, why
    # one chart per metric, one series per job, labelled with the jobs' names
    assert sorted(c["metric"] for c in res["jobs_compare"]) == ["acc", "loss"], why
    for c in res["jobs_compare"]:
        assert c["series"] == 3 and sorted(c["labels"]) == ["toy1", "toy2", "toy3"], why
        assert c["points"] == [20, 20, 20], why
    # the sweep: 3 trials sorted both ways by the objective, a scatter for its parameter
    assert res["trials"] == 3, why
    assert res["sorted_up"] == sorted(res["sorted_up"]) and res["sorted_down"] == sorted(res["sorted_down"], reverse=True), why
    assert res["scatters"] == ["env.X"], why
    assert sorted(c["metric"] for c in res["sweep_compare"]) == ["acc", "loss"], why
    assert all(c["series"] == 3 and c["points"] == [20, 20, 20] for c in res["sweep_compare"]), why
    assert not res.get("pageerrors"), why
    srv.stop()
