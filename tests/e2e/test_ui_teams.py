"""The web UI's teams, queue and usage pages and the submit form's team
(docs/server.md "Teams", docs/usage.md), in a real browser (Debian's
chromium driven by playwright-core, tests/ui/ui_teams.js), against a root
server with real accounts and teams on 6 fake GPUs:

  vision (a; guarantee 2, may borrow 2): two 2-GPU jobs of a run, the second
      on nlp's idle devices (borrowing 2); a 1-GPU job of a waits (team limit);
  nlp (a and b; guarantee 2, borrows nothing): a 2-GPU job of b runs, a
      1-GPU job of b waits (team limit);
  misc (c; no guarantee, no limit): two 1-GPU jobs wait for devices: the
      first in line (the team-held jobs ahead block nobody) has the
      reservation (the running jobs have limits.max_runtime), the second is
      held behind it.

b (not an admin) sees the teams with the right numbers, the queue in start
order with a's waiting job's name hidden and the reservation misc's job is
held behind, why its own job waits on its page, only its own
usage (another user's is refused), and a form with no team choice (its one
team); a (two teams) picks nlp in the form and the job lands in nlp; the
operator sees everyone's usage as a table, a bar chart and the same CSV as
the API.  Names carrying markup (the API's answers rewritten in the
browser: the server refuses such names) show as text and inject nothing.
Screenshots go to build/test-artifacts/ui/."""
import contextlib
import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import REPO, _end_leftovers, chromium_or_fail, holds_for
from endpoint_helpers import request
from server_fixture import held, start_server, token_for, unix_accounts

HOSTILE = '<img src=x onerror="window.__pwned=1"><b class="pwn">bold</b>'


@contextlib.contextmanager
def teams_server(trainctl):
    """A root server (gpu:6) whose --config names two real accounts' teams, as
    root_server makes one: (srv, {role: account}, {role: token}, base)."""
    base = tempfile.mkdtemp(prefix="tc-uit-", dir="/tmp")
    os.chmod(base, 0o711)
    state = os.path.join(base, "state")
    try:
        with unix_accounts("a", "b", "c") as u:
            conf = os.path.join(base, "server.yaml")
            with open(conf, "w") as f:
                f.write(f"teams:\n"
                        f"  vision:\n    members: [{u['a']}]\n    guarantee: {{gpu: 2}}\n"
                        f"    borrow: {{gpu: 2}}\n    default: true\n"
                        f"  nlp:\n    members: [{u['a']}, {u['b']}]\n    guarantee: {{gpu: 2}}\n"
                        f"  misc:\n    members: [{u['c']}]\n")
            toks = {r: token_for(trainctl, state, u[r]) for r in ("a", "b", "c")}
            srv = start_server(trainctl, state, fake="gpu:6", args=["--config", conf], root_jobs=False)
            try:
                yield srv, u, toks, base
            finally:
                srv.stop()
                _end_leftovers(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def login_link(srv, token):
    """A one-time login URL of the token's user (POST /api/v1/login)."""
    st, _, t = request(srv.port, "POST", "/api/v1/login", headers={"Authorization": f"Bearer {token}"}, body={})
    assert st == 201, t
    return srv.url + t["path"]


def submit(srv, token, spec, team=None):
    body = {"spec": spec}
    if team:
        body["team"] = team
    st, out = srv.call("POST", "/api/v1/jobs", body, token=token)
    assert st == 201, out
    return out["id"]


def test_teams_queue_usage_pages(trainctl, tmp_path):
    node = chromium_or_fail()
    out = REPO / "build" / "test-artifacts" / "ui"
    out.mkdir(parents=True, exist_ok=True)
    with teams_server(trainctl) as (srv, u, tok, base):
        release = os.path.join(base, "release")
        home = {r: f"/home/{u[r]}" for r in u}

        def job(role, name, gpus, team=None):
            # a limit: the queue can tell when devices free up (a reservation's time)
            spec = held(release, name=name, devices={"type": "gpu", "per_node": gpus}, workdir=home[role],
                        limits={"max_runtime": "1h"})
            return submit(srv, tok[role], spec, team)

        v1 = job("a", "vis-one", 2)
        srv.wait_state(v1, "running")
        v2 = job("a", "vis-borrow", 2)  # past vision's guarantee: nlp's idle devices
        srv.wait_state(v2, "running")
        n1 = job("b", "nlp-one", 2)
        srv.wait_state(n1, "running")
        n2 = job("b", "nlp-waits", 1)
        v3 = job("a", "vis-secret-name", 1)
        # misc has no team limit: its jobs wait for devices; the first in line for the type
        # (the team-held jobs ahead of it block nobody) gets the reservation, the second is
        # held behind it
        m1 = job("c", "misc-one", 1)
        m2 = job("c", "misc-two", 1)
        holds_for(lambda: all(srv.job(j)["state"] == "queued" for j in (n2, v3, m1, m2)), 1.0,
                  "the third jobs wait for their team's limit, misc's for devices")
        st, api_queue = srv.call("GET", "/api/v1/queue")
        assert st == 200, api_queue
        api_m1 = {x["id"]: x for x in api_queue["jobs"]}[m1]
        api_m2 = {x["id"]: x for x in api_queue["jobs"]}[m2]
        assert api_m1["behind"] is None and api_m1["reserved_from"], api_queue
        assert "first in line for gpu" in api_m1["why"], api_queue
        assert api_m2["behind"] == m1 and api_m2["reserved_from"], api_queue
        plan = {"logins": {"a": login_link(srv, tok["a"]), "b": login_link(srv, tok["b"]),
                           "admin": srv.login_url()},
                "n2": n2, "hidden": "vis-secret-name", "a_user": u["a"],
                "submit_b": "form-b", "submit_a": "form-a", "hostile": HOSTILE}
        pf = tmp_path / "plan.json"
        pf.write_text(json.dumps(plan))
        try:
            p = subprocess.run([node, str(REPO / "tests" / "ui" / "ui_teams.js"), srv.url, str(out), str(pf)],
                               capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"ui_teams.js ran past 600 s\nstdout: {e.stdout}\nstderr: {e.stderr}\n"
                        f"server log:\n{srv.log()[-3000:]}", pytrace=False)
        lines = p.stdout.strip().splitlines()
        assert lines, f"ui_teams.js printed nothing (exit {p.returncode})\nstderr: {p.stderr}"
        r = json.loads(lines[-1])
        why = f"\n{json.dumps(r, indent=1)}\nstderr: {p.stderr[-2000:]}\nserver log:\n{srv.log()[-3000:]}"
        assert p.returncode == 0 and "error" not in r and not r.get("pageerrors"), why

        # ---- the teams page, as b: the numbers of GET /api/v1/teams ----
        b = r["b"]
        assert {"#/teams", "#/queue", "#/usage"} <= set(b["nav"]), why
        vis, nlp = b["teams"]["vision"], b["teams"]["nlp"]
        assert vis["rows"]["gpu"] == {"guarantee": "2", "borrow": "2", "in_use": "4", "borrowed": "2",
                                      "waiting_devices": "1"}, why
        assert nlp["rows"]["gpu"] == {"guarantee": "2", "borrow": "0", "in_use": "2", "borrowed": "0",
                                      "waiting_devices": "1"}, why
        assert (vis["running"], vis["waiting_jobs"], nlp["running"], nlp["waiting_jobs"]) == ("2", "1", "1", "1"), why
        assert nlp["mine"] and not vis["mine"], why
        assert u["a"] in vis["members"] and u["b"] in nlp["members"], why
        assert nlp["waiting"] == [{"id": n2, "why": "team limit", "link": True}], why
        # a's waiting job: listed (the API shows who waits), but not a link b cannot open
        assert vis["waiting"] == [{"id": v3, "why": "team limit", "link": False}], why

        # ---- the queue, as b: start order, reasons; a's job's name is not b's to see ----
        q = {x["id"]: x for x in b["queue"]}
        assert set(q) == {n2, v3, m1, m2}, why
        assert q[n2]["name"] == "nlp-waits" and q[n2]["team"] == "nlp" and q[n2]["link"], why
        assert "its team nlp would hold more than its guarantee" in q[n2]["why"], why
        assert q[v3]["name"] is None and not q[v3]["link"] and not b["queue_shows_hidden"], why
        assert [x["id"] for x in b["queue"]] == [x["id"] for x in api_queue["jobs"]], why
        assert [x["pos"] for x in b["queue"]] == ["1", "2", "3", "4"], why
        # held behind a reservation: the job it waits on and the time its devices are reserved from
        assert m1 in q[m2]["behind"] and q[m2]["reserved"] not in (None, "", "-"), why
        # a link where b may open that job (b's own), text otherwise: misc's is c's
        assert not q[m2]["behind_link"], why
        assert q[m2]["why"].startswith(api_m2["why"]) and q[m1]["why"].startswith(api_m1["why"]), why
        assert q[m1]["behind"] is None, why
        assert q[n2]["behind"] is None and q[v3]["behind"] is None, why
        # a sees its own job's name
        assert {x["id"]: x["name"] for x in r["a"]["queue"]}[v3] == "vis-secret-name", why

        # ---- the waiting job's page: why (the job's `waiting`) and its place ----
        st, detail = srv.call("GET", f"/api/v1/jobs/{n2}", token=tok["b"])
        assert st == 200 and detail["team"] == "nlp", detail
        assert b["job"]["why"] == detail["waiting"]["why"], why
        assert b["job"]["pos"] == q[n2]["pos"] and b["job"]["team"] == "nlp", why

        # ---- usage, as b: only b's own intervals, whatever the grouping ----
        assert [(x["group"], x["type"], x["jobs"]) for x in b["usage_user"]["rows"]] == [(u["b"], "gpu", 1)], why
        assert [(x["group"], x["jobs"]) for x in b["usage_team"]["rows"]] == [("nlp", 1)], why
        assert not b["usage_user"]["user_box"] and "your own jobs only" in b["usage_user"]["info"], why
        # a's usage asked for in the address: b's page offers no user choice, and shows b's own
        assert [x["group"] for x in b["usage_other"]["rows"]] == [u["b"]], why
        st, body = srv.call("GET", f"/api/v1/usage?since=2026-01-01&user={u['a']}", token=tok["b"])
        assert st == 403, body

        # ---- usage, as the operator: every team, a bar per row, the same CSV ----
        adm = r["admin"]["usage"]
        assert sorted((x["group"], x["type"], x["jobs"]) for x in adm["rows"]) == \
            [("nlp", "gpu", 1), ("vision", "gpu", 2)], why
        assert adm["user_box"], why
        bars = {(x["group"], x["type"]): x for x in adm["bars"]}
        assert set(bars) == {("nlp", "gpu"), ("vision", "gpu")}, why
        # vision held 4 devices to nlp's 2 over the same time: its bar is the taller
        assert bars[("vision", "gpu")]["height"] > bars[("nlp", "gpu")]["height"] > 0, why
        for x in adm["rows"]:
            assert abs(bars[(x["group"], x["type"])]["hours"] - x["hours"]) < 0.0006, why
        csv = r["admin"]["csv"]
        assert csv["status"] == 200 and csv["type"].startswith("text/csv"), why
        assert csv["disposition"] == 'attachment; filename="usage-by-team.csv"', why
        assert adm["csv"].startswith("/api/v1/usage?") and "format=csv" in adm["csv"], why
        lines = csv["text"].splitlines()
        assert lines[0] == "team,device_type,device_hours,device_seconds,jobs,wait_mean_seconds,wait_max_seconds", why
        assert sorted((c[0], c[1], c[4]) for c in (ln.split(",") for ln in lines[1:])) == \
            [("nlp", "gpu", "1"), ("vision", "gpu", "2")], why
        # the CLI's csv and the API's are one function's: same header and rows
        cli = subprocess.run([str(trainctl), "usage", "--since", "2026-01-01", "--by", "team", "--format", "csv"],
                             env=srv.env, capture_output=True, text=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        assert [ln.split(",")[:2] + [ln.split(",")[4]] for ln in cli.stdout.splitlines()] == \
            [ln.split(",")[:2] + [ln.split(",")[4]] for ln in lines], (cli.stdout, csv["text"])
        st, body = srv.call("GET", "/api/v1/usage?since=2026-01-01&format=xml")
        assert st == 400 and "format" in body["error"], body

        # ---- the submit form's team lands in the job's team ----
        sb, sa = b["submit"], r["a"]["submit"]
        assert sb["select"] == [] and sb["only"].startswith("nlp"), why  # one team: no choice
        assert srv.job(sb["id"])["team"] == "nlp" and sb["team_shown"] == "nlp", why
        assert sorted(sa["select"]) == ["nlp", "vision"] and sa["selected"] == "vision", why
        ja = srv.job(sa["id"])
        assert ja["team"] == "nlp" and ja["user"] == u["a"] and sa["team_shown"] == "nlp", why
        assert srv.job(sa["id"])["name"] == "form-a", why

        # ---- markup in names: text on every page, nothing injected ----
        for page, c in r["hostile"].items():
            assert c["shown"] and c["pwned"] is None and c["handlers"] == 0, (page, why)
            assert not [t for t, n in c["count"].items() if n], (page, why)

        for j in (sb["id"], sa["id"]):
            srv.call("POST", f"/api/v1/jobs/{j}/stop", {})
        open(release, "w").close()
        for j in (v1, v2, n1, n2, v3, m1, m2):
            srv.wait_state(j, "succeeded", timeout=180)
