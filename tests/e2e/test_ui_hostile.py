"""Text into the page (docs/security.md, "The page"): every page of the web
UI over data that carries markup, in a real browser (tests/ui/ui_hostile.js),
and the static check that the UI builds no HTML from values.

A normal account's job writes its own diagnostics.json (the file the server
serves inside the job record) with a <meta http-equiv=refresh> to another
port and an <img onerror> in every field, prints metric names and log lines
of the same, and fails.  The fields the API refuses such text in (job and
endpoint names, sweeps, device health of other nodes, event reasons) are
written into the server's store, as an older or buggy writer could have.
The operator's browser, logged in with the server's one-time login URL,
opens every page; no element may come from the data, window.__pwned stays
undefined, and the page stays where it was opened.  The job page is opened
once more with the diagnostics exactly as the job wrote them (a server that
did not type the file), so the page is checked on its own too.

Seen to fail before the fix: with the old web/app.js, the refresh in the
diagnostics' rank took the page to http://127.0.0.1:1/."""
import json
import os
import shutil
import sqlite3
import subprocess
import time

import pytest

from conftest import PYTHON, REPO
from server_fixture import root_server

H = ("\"'></td></tr><img src=x onerror=window.__pwned=1>"
     "<meta http-equiv=refresh content=\"0;url=http://127.0.0.1:1/\">"
     "<script>window.__pwned=2</script>")

# the job: its diagnostics.json with markup wherever a value is, metric names
# and log lines of the same, then a failure
JOB = r'''
import json, os, sys
H = sys.argv[1]
# (the old page called number methods on step times: numbers there, so that it
# reached the markup with the rest)
d = {"attempt": H, "steps": H, "median_step_time": 0.1, "hang_timeout": H,
     "straggler_percent": H, "straggler_steps": H,
     "ranks": [{"rank": H, "steps": H, "step_time": 0.2}, {"rank": 1, "steps": 3, "step_time": 0.1}],
     "stragglers": [{"rank": 1, "slower_percent": H, "step_time": H}, {"rank": H}],
     "hangs": [{"attempt": H, "silent_seconds": 7.5, "culprit": H, "culprit_node": H,
                "culprit_node_name": H, "why": H, "message": H,
                "stacks": [{"rank": H, "stack": H}]}],
     "log_matches": [{"attempt": 0, "rank": 0, "pattern": H, "action": H, "line": H}],
     "resume_mismatch": {"attempt": 0, "message": H}, H: H}
# the run folder: the parent of its logs/ (the job owns both)
run_dir = os.path.dirname(os.environ["TRAINCTL_LOG_DIR"].rstrip("/"))
with open(os.path.join(run_dir, "diagnostics.json"), "w") as f:
    json.dump(d, f)
for s in range(1, 4):
    print("DLLL " + json.dumps({"type": "LOG", "step": s, "data": {"loss": 1.0 / s, H: s}}), flush=True)
print(H, flush=True)
print(H, file=sys.stderr, flush=True)
sys.exit(3)
'''


def numbers_are_numbers(d):
    """The typed diagnostics (src/jobs/diagjson.c): no text where a number is."""
    nums = {"attempt", "steps", "median_step_time", "hang_timeout", "straggler_percent",
            "straggler_steps", "rank", "step_time", "slower_percent", "silent_seconds", "timeout",
            "culprit", "culprit_node", "node", "time", "device_utilization", "checkpoint_step",
            "epoch", "iteration"}
    if isinstance(d, dict):
        for k, v in d.items():
            assert k != H, d
            if k in nums:
                assert v is None or isinstance(v, (int, float)), (k, v)
            numbers_are_numbers(v)
    elif isinstance(d, list):
        for x in d:
            numbers_are_numbers(x)


def seed(state, job, user):
    """Rows the API would not take, written into the store: a second job
    (name, user, devices, spec with endpoints, env keys, image), its event,
    endpoints and a metric; another node's unhealthy device; a sweep with its
    trials.  Returns (the second job's id, the sweep's id)."""
    db = sqlite3.connect(os.path.join(state, "trainctl.db"), timeout=60)
    try:
        with db:
            cols = [r[1] for r in db.execute("PRAGMA table_info(jobs)")]
            row = dict(zip(cols, db.execute("SELECT * FROM jobs WHERE id = ?", (job,)).fetchone()))
            b = job + "b"
            spec = json.loads(row["spec_json"])
            spec.update({"command": H, "image": H, "env": {H: H},
                         "endpoints": [{"name": H, "kind": H, "port": 1}]})
            row.update({"id": b, "name": H, "user": H, "devices": H, "device_type": H,
                        "root_cause": H, "spec_json": json.dumps(spec)})
            db.execute(f"INSERT INTO jobs ({','.join(cols)}) VALUES ({','.join('?' * len(cols))})",
                       [row[c] for c in cols])
            now = time.time()
            db.execute("INSERT INTO events (job_id, time, state, reason) VALUES (?, ?, 'failed', ?)",
                       (b, now, H))
            for name, st in ((H, "running"), (H + "2", "failed")):
                db.execute("INSERT INTO job_endpoints (job_id, name, kind, host, port, state, pid, note, updated) "
                           "VALUES (?, ?, ?, ?, 1, ?, 0, ?, ?)", (b, name, H, H, st, H, now))
            db.execute("INSERT INTO metric_series (job_id, metric, rank) VALUES (?, ?, 0)", (b, H))
            db.execute("INSERT INTO device_health (node, device_type, device_id, reason, since, job_id) "
                       "VALUES (?, 'gpu', 0, ?, ?, ?)", (H, H, now, job))
            sid = "s" + job
            sweep_def = {"name": H, "spec_path": None, "spec_text": "name: x\ncommand: 'true'\n",
                         "base": "/tmp", "parameters": [{"key": "env." + H, "dist": "grid", "values": [H, 1]}],
                         "random": False, "count": 2, "seed": 0,
                         "objective": {"metric": H, "mode": "min", "reduce": "last"}, "parallel": 1,
                         "early_stopping": {"rule": "none", "grace": 0, "min_trials": 0, "budget": 0,
                                            "eta": 3, "min_steps": 0},
                         "priority": 100, "preemptible": 0}
            db.execute("INSERT INTO sweeps (id, name, state, def_json, user, created, ended, note) "
                       "VALUES (?, ?, 'done', ?, ?, ?, ?, ?)", (sid, H, json.dumps(sweep_def), user, now, now, H))
            for i, (v, j) in enumerate(((H, job), (1, b))):
                db.execute("INSERT INTO sweep_trials (sweep_id, idx, params_json, state, job_id, objective, "
                           "steps, note) VALUES (?, ?, ?, 'done', ?, ?, 3, ?)",
                           (sid, i, json.dumps({"env." + H: v}), j, 0.5 + i, H))
    finally:
        db.close()
    return b, sid


def test_the_ui_builds_no_html_from_values():
    """scripts/check-web-html.py: no innerHTML (outerHTML, insertAdjacentHTML,
    document.write) of a value that is not a constant, in web/."""
    p = subprocess.run([PYTHON, str(REPO / "scripts" / "check-web-html.py")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_no_element_comes_from_the_data(trainctl, tmp_path):
    node = shutil.which("node")
    ui = REPO / "tests" / "ui"
    if not node or not (ui / "node_modules" / "playwright-core").is_dir() or not os.path.exists("/usr/bin/chromium"):
        pytest.fail("the UI test needs node, `npm ci --prefix tests/ui` and /usr/bin/chromium "
                    "(scripts/install-deps.sh)", pytrace=False)
    out = REPO / "build" / "test-artifacts" / "ui"
    out.mkdir(parents=True, exist_ok=True)
    with root_server(trainctl, "tc-uihostile-", "user") as (srv, u, base):
        script = os.path.join(base, "hostile_job.py")
        with open(script, "w") as f:
            f.write(JOB)
        os.chmod(script, 0o644)
        # the account's own job, submitted with its token
        job = srv.submit({"name": "hostile", "command": [PYTHON, script, H], "env": {"HOSTILE": H},
                          "devices": {"type": "gpu", "per_node": 1}})
        j = srv.wait_state(job, "failed", timeout=300)
        assert j["user"] == u["user"]
        written = os.path.join(j["run_dir"], "diagnostics.json")
        assert os.path.exists(written), f"{j}\n{srv.run_logs(job)}"
        raw = json.load(open(written))
        # the server typed what it serves: text stays only where text belongs
        d = j["diagnostics"]
        numbers_are_numbers(d)
        assert [r for r in d["ranks"] if "rank" in r] == [{"rank": 1, "steps": 3, "step_time": 0.1}], d
        assert d["hangs"][0]["culprit_node_name"] == H and "culprit" not in d["hangs"][0], d
        b, sid = seed(srv.state, job, u["user"])
        q = lambda s: s.replace("%", "%25").replace("/", "%2F").replace("?", "%3F").replace("#", "%23")
        visits = [
            {"hash": "#/jobs", "wait": f"#jobs tbody tr[data-id='{b}']"},
            {"hash": f"#/job/{job}/brief", "wait": "#diag p.hang"},
            {"hash": f"#/job/{b}/brief", "wait": "#endpoints table tbody tr"},
            {"hash": f"#/job/{job}/logs", "wait": "#l-text:not(:empty)"},
            {"hash": f"#/job/{job}/metrics", "wait": "#m-info:not(:empty)"},
            {"hash": f"#/job/{b}/metrics", "wait": "#m-info:not(:empty)"},
            {"hash": f"#/job/{b}/resources", "wait": "#tab .card"},
            {"hash": f"#/job/{b}/checkpoints", "wait": "#tab table"},
            {"hash": f"#/job/{b}/report", "wait": "#tab .card"},
            {"hash": f"#/compare?jobs={job},{b}", "wait": "#c-charts .card"},
            {"hash": "#/sweeps", "wait": f"#sweeps tbody tr[data-id='{sid}']"},
            {"hash": f"#/sweep/{sid}", "wait": "#trials tbody tr"},
            {"hash": f"#/compare?sweep={sid}", "wait": "#c-charts .card"},
            {"hash": "#/devices", "wait": "#nodedevs tbody tr"},
            {"hash": "#/submit", "wait": "#submit"},
            # errors that quote what was asked for
            {"hash": f"#/job/{q(H)}", "wait": ".card.error"},
            {"hash": f"#/sweep/{q(H)}", "wait": ".card.error"},
            {"hash": f"#/compare?jobs={q(H)}", "wait": ".card.error"},
            # the page on its own: the diagnostics as the job wrote them
            {"hash": f"#/job/{job}/brief", "wait": "#diag", "raw": {"job": job, "diagnostics": raw}},
        ]
        vf = tmp_path / "visits.json"
        vf.write_text(json.dumps(visits))
        try:
            p = subprocess.run([node, str(ui / "ui_hostile.js"), srv.url, str(out), srv.login_url(), str(vf)],
                               capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"ui_hostile.js ran past 600 s\nstdout: {e.stdout}\nstderr: {e.stderr}", pytrace=False)
        lines = p.stdout.strip().splitlines()
        assert lines, f"ui_hostile.js printed nothing (exit {p.returncode})\nstderr: {p.stderr}"
        r = json.loads(lines[-1])
        bad = [v for v in r["visits"] if not v["ok"]]
        assert p.returncode == 0 and not bad and "error" not in r and not r.get("pageerrors"), \
            json.dumps({"failed": bad, "error": r.get("error"), "pageerrors": r.get("pageerrors"),
                        "own": r.get("own")}, indent=1) + f"\nstderr: {p.stderr[-2000:]}"
        assert len(r["visits"]) == len(visits)
        # each page but the form showed the data, as text
        assert [v["hash"] for v in r["visits"] if not v["shown"]] == ["#/submit"], \
            json.dumps(r["visits"], indent=1)
