"""Usage accounting and retention (docs/usage.md): device-seconds recorded as
jobs run, matching the jobs' own recorded start and end, also across a server
killed with SIGKILL; `trainctl usage` as a table, csv and json, locally and
through the server; `trainctl gc` and the server's --retention remove old
finished jobs, rows and run folders, and nothing else."""
import csv
import io
import json
import os
import pwd
import signal
import sqlite3
import subprocess
import time

from conftest import job_id_of, wait_until
from server_fixture import start_server, token_for, unix_accounts

FAKE = {"TRAINCTL_FAKE_DEVICES": "gpu:2"}
SINCE = "2020-01-01"
TOL = 0.5  # seconds of slack per device-second sum: clocks read a moment apart


def me():
    return pwd.getpwuid(os.getuid()).pw_name


def db(home, sql, *args):
    with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
        return c.execute(sql, args).fetchall()


def recorded_device_seconds(home, ids):
    rows = db(home, "SELECT device_count * (ended - started) FROM jobs WHERE id IN (%s)"
              % ",".join("?" * len(ids)), *ids)
    assert len(rows) == len(ids)
    return sum(r[0] for r in rows)


def usage_json(run_tc, *extra):
    r = run_tc("usage", "--since", SINCE, "--format", "json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def the_row(rep, group):
    rows = [r for r in rep["rows"] if r["group"] == group and r["device_type"] == "gpu"]
    assert len(rows) == 1, rep
    return rows[0]


def test_usage_of_local_runs_matches_what_ran(run_tc, home):
    a = run_tc("run", "--device", "gpu", "--nproc", "2", "--name", "usage-a", "--", "sleep", "2",
               env=FAKE)
    assert a.returncode == 0, a.stderr
    b = run_tc("run", "--device", "gpu", "--nproc", "1", "--name", "usage-b", "--",
               "sh", "-c", "sleep 1; exit 3", env=FAKE)
    assert b.returncode != 0
    ids = [job_id_of(a), job_id_of(b)]
    want = recorded_device_seconds(home, ids)
    assert want >= 5  # 2 x 2 s + 1 x 1 s at least

    row = the_row(usage_json(run_tc), me())
    assert abs(row["device_seconds"] - want) < TOL, (row, want)
    assert abs(row["device_hours"] * 3600 - row["device_seconds"]) < 1e-6
    assert row["jobs"] == 2 and row["waited"] == 2
    assert 0 <= row["wait_mean_seconds"] <= row["wait_max_seconds"] < 60
    # the outcome of each interval is the state that closed it
    outcomes = sorted(o for (o,) in db(home, "SELECT outcome FROM usage"))
    assert outcomes == ["failed", "succeeded"]

    r = run_tc("usage", "--since", SINCE, "--format", "csv")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert list(rows[0].keys())[0] == "user"
    gpu = [x for x in rows if x["user"] == me() and x["device_type"] == "gpu"]
    assert len(gpu) == 1 and abs(float(gpu[0]["device_seconds"]) - want) < TOL, r.stdout
    assert int(gpu[0]["jobs"]) == 2

    r = run_tc("usage", "--since", SINCE)
    assert r.returncode == 0 and me() in r.stdout and "device-hours" in r.stdout, r.stdout

    # a window that ends before the jobs ran holds nothing; one that starts
    # 2 s into the first job leaves its first seconds out
    r = usage_json(run_tc, "--until", "2020-02-01")
    assert r["rows"] == []
    first = min(s for (s,) in db(home, "SELECT started FROM jobs"))
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(first) + 2))
    r = run_tc("usage", "--since", since, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert the_row(json.loads(r.stdout), me())["device_seconds"] < want - 1


def test_usage_refuses_bad_words(run_tc):
    for args, word in ((["--since", "yesterday"], "since"), (["--until", "2026-13-01"], "until"),
                       (["--by", "group"], "by"), (["--format", "xml"], "format"),
                       (["--since", "2026-11-02", "--until", "2026-11-01"], "since")):
        r = run_tc("usage", *args)
        assert r.returncode == 2 and word in r.stderr, (args, r.stderr)
    for args in ([], ["--older-than", "30x"], ["--older-than", "0d"]):
        r = run_tc("gc", *args)
        assert r.returncode == 2 and "--older-than" in r.stderr, (args, r.stderr)


def test_usage_survives_a_server_sigkill(trainctl, tmp_path):
    state = tmp_path / "state"
    release = tmp_path / "release"
    srv = start_server(trainctl, state, fake="gpu:2")
    srv2 = None
    try:
        job = srv.submit({"name": "usage-kill", "devices": {"type": "gpu", "per_node": 2},
                          "command": ["sh", "-c", f"while [ ! -e {release} ]; do sleep 0.1; done"]})
        srv.wait_state(job, "running")
        st, m = srv.call("GET", "/metrics")
        assert f'trainctl_user_devices_in_use{{user="{me()}",type="gpu"}} 2' in m, m[-2000:]
        assert "trainctl_queue_oldest_wait_seconds 0" in m
        srv.stop(signal.SIGKILL)
        # the server is gone: the open interval is read up to now
        env = dict(os.environ, TRAINCTL_HOME=str(state))
        env.pop("TRAINCTL_SERVER", None)

        def local():
            p = subprocess.run([str(trainctl), "usage", "--since", SINCE, "--format", "json"],
                               env=env, capture_output=True, text=True)
            assert p.returncode == 0, p.stderr
            return the_row(json.loads(p.stdout), me())["device_seconds"]
        first = local()
        assert first > 0
        wait_until(lambda: local() > first + 0.5, what="the open interval to grow")
        assert db(state, "SELECT COUNT(*) FROM usage WHERE closed IS NULL")[0][0] == 1

        srv2 = start_server(trainctl, state, fake="gpu:2")
        release.touch()
        srv2.wait_state(job, "succeeded")
        want = recorded_device_seconds(state, [job])
        st, rep = srv2.call("GET", f"/api/v1/usage?since={SINCE}&by=user")
        assert st == 200, rep
        row = the_row(rep, me())
        assert abs(row["device_seconds"] - want) < TOL, (row, want)
        assert row["jobs"] == 1
        p = srv2.cli("usage", "--since", SINCE, "--format", "csv")
        assert p.returncode == 0, p.stderr
        rows = [x for x in csv.DictReader(io.StringIO(p.stdout)) if x["user"] == me()]
        assert abs(float(rows[0]["device_seconds"]) - want) < TOL
        st, body = srv2.call("GET", "/api/v1/usage?since=never")
        assert st == 400 and "since" in body["error"], body
        # a user who is not an admin sees their own usage only
        with unix_accounts("u") as names:
            tok = token_for(trainctl, state, names["u"])
            st, rep = srv2.call("GET", f"/api/v1/usage?since={SINCE}", token=tok)
            assert st == 200 and rep["rows"] == [], rep
            st, body = srv2.call("GET", f"/api/v1/usage?since={SINCE}&user={me()}", token=tok)
            assert st == 403, body
    finally:
        release.touch()
        if srv2:
            srv2.stop()


def test_gc_removes_only_old_finished_jobs(run_tc, home, trainctl, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("not the job's")
    old = job_id_of(run_tc("run", "--name", "gc-old", "--", "true"))
    new = job_id_of(run_tc("run", "--name", "gc-new", "--", "true"))
    old_dir = db(home, "SELECT run_dir FROM jobs WHERE id = ?", old)[0][0]
    # the job's own folder may hold links: removal follows none of them
    os.symlink(outside, os.path.join(old_dir, "link"))
    release = tmp_path / "release"
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    live = subprocess.Popen([str(trainctl), "run", "--name", "gc-live", "--", "sh", "-c",
                             f"while [ ! -e {release} ]; do sleep 0.1; done"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: db(home, "SELECT state FROM jobs WHERE name = 'gc-live'") == [("running",)],
                   what="gc-live running")
        live_id = db(home, "SELECT id FROM jobs WHERE name = 'gc-live'")[0][0]
        # age the old job, and the live one as far as a bad row could (an end in the past)
        with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
            c.execute("UPDATE jobs SET created = created - 86400 * 40, started = started - 86400 * 40,"
                      " ended = ended - 86400 * 40 WHERE id = ?", (old,))
            c.execute("UPDATE jobs SET created = created - 86400 * 40, ended = 1000 WHERE id = ?",
                      (live_id,))
        r = run_tc("gc", "--older-than", "30d", "--dry-run")
        assert r.returncode == 0, r.stderr
        assert f"would remove {old}" in r.stdout and new not in r.stdout and live_id not in r.stdout
        assert os.path.isdir(old_dir) and db(home, "SELECT COUNT(*) FROM jobs")[0][0] == 3

        r = run_tc("gc", "--older-than", "30d")
        assert r.returncode == 0, r.stderr
        assert f"removed {old}" in r.stdout and "removed 1 job" in r.stdout, r.stdout
        assert new not in r.stdout and live_id not in r.stdout
        assert not os.path.exists(old_dir)
        assert (outside / "keep").read_text() == "not the job's"
        left = sorted(i for (i,) in db(home, "SELECT id FROM jobs"))
        assert left == sorted([new, live_id])
        assert live.poll() is None, "gc touched the running job"
        r = run_tc("gc", "--older-than", "30d", "--json")
        assert r.returncode == 0 and json.loads(r.stdout) == []
    finally:
        release.touch()
        live.communicate(timeout=120)
    assert live.returncode == 0
    # the usage records outlive the removed job
    assert db(home, "SELECT COUNT(*) FROM usage WHERE job_id = ?", old)[0][0] == 1


def test_server_retention_removes_old_finished_jobs(run_tc, home, trainctl):
    old = job_id_of(run_tc("run", "--name", "ret-old", "--", "true"))
    new = job_id_of(run_tc("run", "--name", "ret-new", "--", "true"))
    old_dir = db(home, "SELECT run_dir FROM jobs WHERE id = ?", old)[0][0]
    with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
        c.execute("UPDATE jobs SET ended = ended - 86400 * 40 WHERE id = ?", (old,))
    srv = start_server(trainctl, home, args=["--retention", "30d"])
    try:
        wait_until(lambda: srv.job_or_none(old) is None, what="the old job removed")
        assert not os.path.exists(old_dir)
        assert srv.job(new)["state"] == "succeeded"
        assert f"retention: removed {old}" in srv.log()
    finally:
        srv.stop()


def test_docs_usage_example(trainctl, home, REPO):
    text = (REPO / "docs" / "usage.md").read_text()
    block = text.split("```sh\n# usage example\n", 1)[1].split("```", 1)[0]
    env = dict(os.environ, TRAINCTL_HOME=str(home))
    env["PATH"] = os.path.dirname(os.path.abspath(str(trainctl))) + os.pathsep + env["PATH"]
    env.pop("TRAINCTL_SERVER", None)
    p = subprocess.run(["bash", "-ec", block], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = [x for x in csv.DictReader(io.StringIO(p.stdout.split("nothing to remove")[0]))
            if x.get("user") == me()]
    assert len(rows) == 1 and rows[0]["device_type"] == "gpu" and rows[0]["jobs"] == "1", p.stdout
    assert 3.5 < float(rows[0]["device_seconds"]) < 60, p.stdout
    assert "nothing to remove" in p.stdout


def test_a_teams_retention_and_time_limit_replace_the_servers(run_tc, home, trainctl, tmp_path):
    """teams.T.retention: a team's finished jobs go after its own time, the
    others' after --retention; teams.T.max_runtime: the time limit of its
    jobs that name none, in place of --default-max-runtime."""
    ids = {n: job_id_of(run_tc("run", "--name", n, "--", "true")) for n in ("a20", "b20", "none40", "a5")}
    dirs = {n: db(home, "SELECT run_dir FROM jobs WHERE id = ?", i)[0][0] for n, i in ids.items()}
    with sqlite3.connect(os.path.join(home, "trainctl.db")) as c:
        for n, team, days in (("a20", "short", 20), ("b20", "long", 20), ("none40", None, 40),
                              ("a5", "short", 5)):
            c.execute("UPDATE jobs SET ended = ended - 86400 * ?, team = ? WHERE id = ?",
                      (days, team, ids[n]))
    conf = tmp_path / "server.yaml"
    conf.write_text(f"teams:\n  short:\n    members: [{me()}]\n    default: true\n"
                    f"    retention: 10d\n    max_runtime: 90m\n"
                    f"  long:\n    members: [{me()}]\n")
    srv = start_server(trainctl, home, args=["--retention", "30d", "--default-max-runtime", "24h",
                                             "--config", str(conf)])
    try:
        gone = ("a20", "none40")  # short's 10 days; the server's 30 for a job of no team
        wait_until(lambda: all(srv.job_or_none(ids[n]) is None for n in gone),
                   what="the jobs past their retention removed")
        for n in gone:
            assert not os.path.exists(dirs[n]), n
            assert f"retention: removed {ids[n]}" in srv.log()
        # long has no retention of its own: the server's 30 days keep its 20-day-old job
        assert srv.job(ids["b20"])["state"] == "succeeded"
        assert srv.job(ids["a5"])["state"] == "succeeded"
        # the team's time limit, in the job's spec; the other team's jobs get the server's
        st, out = srv.call("POST", "/api/v1/jobs", {"spec": {"name": "lim", "command": "true"}})
        assert st == 201, out
        assert srv.job(out["id"])["spec"]["limits"]["max_runtime"] == "90m", srv.job(out["id"])["spec"]
        st, out = srv.call("POST", "/api/v1/jobs", {"spec": {"name": "lim2", "command": "true"},
                                                    "team": "long"})
        assert st == 201, out
        assert srv.job(out["id"])["spec"]["limits"]["max_runtime"] == "1d", srv.job(out["id"])["spec"]
    finally:
        srv.stop()
